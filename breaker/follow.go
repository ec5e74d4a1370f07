package breaker

import (
	"context"
	"sync"
	"time"
)

// This file is how a Set follows a WatchableStore: the transitions other
// replicas save reach this replica's breakers through the store's watch.
//
// Every stored snapshot carries the store revision that wrote it, and each
// entry of the Set knows the revision of the latest write it saved or
// applied (entry.rev). A watched change is applied only if it is newer, so:
//
//   - the echo of the Set's own save (whose revision the save recorded) is
//     dropped, and so is anything older than what the entry holds;
//   - a change committed before one of the Set's own saves, but watched
//     after it, does not overwrite it: saves and applies of one breaker are
//     serialised by entry.mu, and a breaker with a transition of its own
//     not yet saved ignores watched changes (its save, still to come, is
//     later in the store's order and is what every replica ends with).
//
// Applied changes are not saved again, so replicas do not echo each other,
// and are not reported to OnStateChange: the replica that made the
// transition reports it.

// WatchableStore is an optional interface of a [Store] shared by several
// replicas of a mesh (store/etcdstore), whose snapshots other replicas
// change while this one runs. A [Set] over a WatchableStore saves with
// SaveBreakerRevision and, once [Set.Follow] is called, applies the
// snapshots the other replicas save. Stores used by one process only
// (store/memstore, store/boltstore) do not implement it.
//
// Changes are ordered by a store revision: a number that grows with every
// commit to the store, across all names (etcd's revision).
type WatchableStore interface {
	Store

	// SaveBreakerRevision is [Store.SaveBreaker] that also returns the
	// revision of the commit it made (when err is nil). The Set recognises
	// the echo of its own save in the watch with it.
	SaveBreakerRevision(ctx context.Context, name string, s Snapshot) (int64, error)

	// WatchBreakers reports the stored snapshots, and then every change to
	// them, to fn until ctx is done. Its first report is a snapshot
	// (SnapshotChanges.Reset); every later one holds changes committed
	// after the previous report, in revision order. When the store cannot
	// continue the stream where it left off (the revisions it needs were
	// compacted away, or the connection broke), it reports a new snapshot
	// and goes on from there. fn is called from WatchBreakers's goroutine,
	// one report at a time.
	//
	// WatchBreakers retries failures itself and returns only once ctx is
	// done (ctx's error) or the store is closed (an error).
	WatchBreakers(ctx context.Context, fn func(SnapshotChanges)) error
}

// SnapshotChanges is one report of [WatchableStore.WatchBreakers].
type SnapshotChanges struct {
	// Reset is true when Changes is a snapshot: every stored breaker at
	// Revision, one put each. A breaker the reader knows to be stored that
	// is missing from it was deleted (at a revision ≤ Revision).
	Reset bool
	// Revision is the store revision the report brings the reader to:
	// every change up to it has been reported.
	Revision int64
	// Changes are the changes, in revision order.
	Changes []SnapshotChange
}

// SnapshotChange is a change to the stored snapshot of one breaker.
type SnapshotChange struct {
	// Name is the breaker's name.
	Name string
	// Snapshot is the stored snapshot after the change; nil when the
	// change deleted it.
	Snapshot *Snapshot
	// Revision is the store revision of the commit that made the change
	// (in a snapshot, of the commit that last wrote the key).
	Revision int64
}

// Waits between attempts to follow the store, when WatchBreakers fails.
const (
	followRetryMin = time.Second
	followRetryMax = 30 * time.Second
)

// Follow makes the set follow the transitions other replicas save in its
// store, when the store is a [WatchableStore]; with any other store (or
// none, or a nil Set) it does nothing and starts nothing. It starts one
// goroutine, which runs the store's watch (restarting it when it fails)
// until stop is called; the caller owns it: stop ends it and waits for it
// to return, and is idempotent and safe for concurrent use. Call Follow
// once, after [Set.Restore], and call stop before closing the store.
//
// A snapshot another replica saved replaces the state of this replica's
// breaker of that name (creating it if needed), as [Set.Restore] does but
// keeping the snapshot's times:
//
//   - open: the breaker refuses calls until the snapshot's OpenUntil (but
//     no longer than one open period from now), with its multiplier;
//   - half-open: the breaker admits probes afresh;
//   - closed: the breaker closes, with the snapshot's failure count.
//
// A snapshot in the state the breaker already has changes nothing (an
// open one only moves OpenUntil), so probes in flight and the count of
// consecutive failures, which are per replica, survive the transitions
// every replica computes alike. A deleted snapshot forgets the breaker,
// as [Set.Remove] does. Calls admitted before an applied change report to
// no effect, as after any transition.
//
// Applied changes are not saved again and are not reported to
// OnStateChange (the replica that made the transition reports it, so an
// audit log gets it once); they are logged, with remote=true. Transitions
// that depend only on time (open → half-open at OpenUntil) are computed by
// every replica that uses the breaker and reported by each; over a
// WatchableStore they are not saved. Changes are applied in revision
// order; the echo of the set's own saves, and anything older than what a
// breaker holds, is ignored, and so is every change to a breaker whose own
// transition is not saved yet (its save comes later in the store's order,
// so every replica ends with it).
func (s *Set) Follow() (stop func()) {
	if s == nil {
		return func() {}
	}
	ws, ok := s.store.(WatchableStore)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.followLoop(ctx, ws)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// followLoop runs the store's watch until ctx is done, restarting it when
// it fails.
func (s *Set) followLoop(ctx context.Context, ws WatchableStore) {
	wait := followRetryMin
	for {
		err := ws.WatchBreakers(ctx, s.applyChanges)
		if ctx.Err() != nil {
			return
		}
		if lg := s.opts.Logger; lg != nil {
			lg.Warn("breaker: following the store stopped; retrying", "err", err, "retry_in", wait.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, followRetryMax)
	}
}

// applyChanges applies one report of the store's watch.
func (s *Set) applyChanges(r SnapshotChanges) {
	var present map[string]bool
	if r.Reset {
		present = make(map[string]bool, len(r.Changes))
	}
	for _, c := range r.Changes {
		if present != nil && c.Snapshot != nil {
			present[c.Name] = true
		}
		s.applyChange(c)
	}
	if !r.Reset {
		return
	}
	s.mu.RLock()
	var gone []string
	for name := range s.m {
		if !present[name] {
			gone = append(gone, name)
		}
	}
	s.mu.RUnlock()
	for _, name := range gone {
		s.applyChange(SnapshotChange{Name: name, Revision: r.Revision})
	}
}

// applyChange applies c to the breaker of its name if c is newer than
// what the breaker holds.
func (s *Set) applyChange(c SnapshotChange) {
	if c.Snapshot == nil {
		s.applyDelete(c.Name, c.Revision)
		return
	}
	if err := c.Snapshot.validate(); err != nil {
		if lg := s.opts.Logger; lg != nil {
			lg.Warn("breaker: stored state skipped", "breaker", c.Name, "err", err)
		}
		return
	}
	s.mu.Lock()
	e := s.getLocked(c.Name)
	s.mu.Unlock()
	e.mu.Lock()
	if e.removed || c.Revision <= e.rev {
		// Removed meanwhile (its deletion is later in the store's order),
		// or older than what the breaker holds.
		e.mu.Unlock()
		return
	}
	e.rev = c.Revision
	flush := e.b.follow(*c.Snapshot)
	e.mu.Unlock()
	if flush {
		e.b.deliver() // without e.mu: it may save
	}
}

// applyDelete forgets the breaker called name when its stored snapshot was
// deleted at revision rev, after what the breaker holds. A breaker this
// set never saw stored (rev 0: never saved, or only loaded by Restore
// before the watch's first snapshot) is left alone.
func (s *Set) applyDelete(name string, rev int64) {
	s.mu.RLock()
	e := s.m[name]
	s.mu.RUnlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	if e.removed || e.rev == 0 || rev <= e.rev || e.b.unsaved() {
		e.mu.Unlock()
		return
	}
	e.removed = true
	e.mu.Unlock()
	s.mu.Lock()
	if s.m[name] == e {
		delete(s.m, name)
	}
	s.mu.Unlock()
	if lg := s.opts.Logger; lg != nil {
		lg.Info("breaker removed", "breaker", name, "remote", true)
	}
}

// unsaved reports whether the breaker has a transition its Set has not
// taken for saving yet.
func (b *Breaker) unsaved() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dirty
}

// follow replaces the breaker's state with s, a snapshot another replica
// saved (see [Set.Follow]), unless the breaker has a transition of its own
// not yet saved. An open snapshot whose period is over is the half-open
// state its period ended in. The change is logged but neither saved nor
// reported to OnStateChange. It returns whether the caller must call
// deliver, which it must do without the Set's locks held.
func (b *Breaker) follow(s Snapshot) (flush bool) {
	now := b.now()
	b.mu.Lock()
	defer func() {
		flush = b.flushNeeded()
		b.mu.Unlock()
	}()
	now = b.advance(now)
	if b.dirty {
		return
	}
	state, since, shift := s.State, s.Since, shiftOf(s.Multiplier)
	if since.IsZero() || since.After(now) {
		since = now
	}
	var until time.Time
	switch state {
	case StateOpen:
		until = s.OpenUntil
		if limit := now.Add(b.periodOf(shift)); until.After(limit) {
			until = limit
		}
		if !now.Before(until) {
			state, since = StateHalfOpen, until
		} else if since.After(until) {
			since = until
		}
	case StateClosed:
		shift = 0
	}
	from := b.state
	if state == from && state != StateOpen {
		// Closed or half-open already: keep this replica's count of
		// consecutive failures, or its probes.
		return
	}
	if state != from {
		b.gen++ // calls admitted before report to no effect
		b.failures, b.successes = 0, 0
		b.probes = b.probes[:0]
		if state == StateClosed {
			b.failures = min(max(s.Failures, 0), b.failureThreshold()-1)
		}
		if b.opts.Logger != nil {
			b.events = append(b.events, event{from: from, to: state, until: until, remote: true})
		}
	}
	b.state, b.since, b.openUntil, b.shift = state, since, until, shift
	return
}
