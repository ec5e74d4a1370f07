// Package breaker is the circuit breaker of agentmesh
// (docs/API.md#circuit-breakers): one breaker per target agent, wrapped
// around each delegation, so that an agent that keeps failing is given a
// rest instead of more traffic.
//
// [Breaker] is one breaker; [Set] holds one per name, creates them on
// demand and persists their transitions through a [Store]. The design
// follows sony/gobreaker v2 (a settings struct whose zero fields are
// defaults, [Execute] plus a two-step [Breaker.Allow], two sentinels, no
// goroutines) with three differences: the clock is injected
// ([Options].Now), OnStateChange runs after the lock is released, and
// half-open probes are counted when they are admitted, not when they
// finish.
//
// Wrap a call with [Execute]:
//
//	b := breaker.New("finance", nil)
//	reply, err := breaker.Execute(b, func() (string, error) {
//		return callAgent(ctx, task)
//	})
//	var open *breaker.OpenError
//	if errors.As(err, &open) {
//		// refused without calling: the agent is unavailable until open.Until
//	}
//
// or, when the call cannot be wrapped in a closure (a streamed reply, an
// outcome known in another function), with [Breaker.Allow]:
//
//	done, err := b.Allow()
//	if err != nil {
//		return err // ErrOpen (an *OpenError) or ErrTooManyRequests
//	}
//	err = stream(ctx)
//	done(err)
//
// # States
//
//   - Closed: every call is admitted. FailureThreshold (5) consecutive
//     failures open the breaker; a success resets the count.
//   - Open: every call is refused with an *[OpenError] (errors.Is
//     [ErrOpen]) that carries Until, the end of the open period. The
//     period is ResetTimeout (30 s) × a multiplier that is 1 when the
//     breaker opens from closed, doubles on each re-open from half-open
//     (60 s, 120 s …) up to [MaxMultiplier] (32: 16 min), and is reset by
//     closing.
//   - Half-open: at the end of the open period the breaker admits at most
//     HalfOpenMaxCalls (3) concurrent probes; a further call is refused
//     with [ErrTooManyRequests]. A probe occupies its slot from admission
//     until it reports. HalfOpenMaxCalls successful probes close the
//     breaker; any failed probe re-opens it with the doubled period; so does
//     a probe still unreported more than HalfOpenTimeout (60 s) after its
//     admission (it is counted as failed).
//
// Outcomes are classified by Options.IsExcluded (default: context.Canceled
// counts as nothing, since the caller gave up) and Options.IsFailure
// (default: every other error is a failure). A report from a call admitted
// before the latest transition is ignored, so a slow call that fails after
// the breaker opened neither extends nor re-opens it.
//
// Transitions that depend only on time are computed lazily, from the
// injected clock, by the next method call: there is no timer, nothing to
// close, and a test moves time by changing what Options.Now returns.
//
// # Concurrency
//
// [Breaker] and [Set] are safe for concurrent use and start no goroutines,
// except the one [Set.Follow] starts, which belongs to its caller: the stop
// function Follow returns ends it.
// Each breaker's state is guarded by its own mutex, held only for a few
// field updates; the user's hooks (Now, IsExcluded, IsFailure,
// OnStateChange, the Store) are never called with it held, so OnStateChange may call
// back into the breaker or the set. Transitions of one breaker are
// delivered in order, one batch at a time, by whichever goroutine finds
// them pending: OnStateChange may therefore run after the call that caused
// the transition has returned, and on another caller's goroutine.
//
// # Persistence
//
// A [Set] with a [Store] saves a breaker's [Snapshot] on each transition
// (never on an ordinary success or failure), after OnStateChange, outside
// every lock, bounded by Options.StoreTimeout. Saves of one breaker happen
// in transition order; if several transitions are pending, only the latest
// state is written. A failed save is logged (Options.Logger, Warn) and
// otherwise ignored: the breaker works from memory, and the next transition
// writes again. [Set.Restore] loads the stored snapshots at start: an open
// breaker stays open until its stored OpenUntil (but no longer than one
// open period from now, in case the store's clock was wrong), a half-open
// one restarts its half-open window, a closed one keeps its count.
// [Set.Remove] deletes a breaker and its stored state when its agent is
// unregistered.
//
// # Replicas
//
// A store shared by several replicas (store/etcdstore) is a
// [WatchableStore]: it returns the revision of each save and streams the
// stored snapshots and their changes. [Set.Follow] applies the snapshots
// the other replicas save, so that an agent opened on one replica is
// refused on all of them until its OpenUntil, and closed everywhere when
// one replica's probes close it. Changes are applied in revision order;
// the echoes of the set's own saves are ignored; applied changes are
// neither saved again nor reported to OnStateChange (the replica that made
// the transition reports it: an audit log gets it once). Counts of
// consecutive failures and half-open probes stay per replica, and the
// time-driven open → half-open, which every replica computes from the
// shared OpenUntil, is not saved.
//
// The Store interfaces are declared here, where they are consumed; their
// implementations belong to the store packages (store/memstore,
// store/boltstore, store/etcdstore), which run the shared conformance
// suite.
//
// # Errors
//
// A refused call returns an *[OpenError] (wrapping [ErrOpen]) from an open
// breaker, or [ErrTooManyRequests] from a half-open one with every probe
// slot taken; neither is counted as an outcome. A caller such as delegation
// reports both as the error code "agent_unavailable" (docs/API.md#errors),
// with [OpenError].Until as the time the agent may be tried again. An
// admitted call's own error is returned unchanged by [Execute]. Store
// errors are returned by [Set.Restore] and [Set.Remove], wrapped with the
// breaker's name; save errors are only logged.
package breaker
