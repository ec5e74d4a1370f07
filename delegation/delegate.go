package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/principal"
	"github.com/agentmesh/agentmesh/registry"
)

// Request is one delegation: the body of POST /v1/delegate.
type Request struct {
	// Target is the name of the agent to delegate to. Set exactly one of
	// Target and Query.
	Target string
	// Query picks the target: the best discovery match for it that is not
	// already on the delegation chain.
	Query string
	// Resources are resource URIs the target must cover (see
	// [discovery.ResourceCovers]).
	Resources []string
	// Task is the task text: required, at most MaxTaskBytes of UTF-8.
	Task string
	// Context is the caller's context, sent to the agent. Its "depth"
	// (a non-negative integer: hops so far) and "chain" (agent names
	// already on the path) are checked against the limits; the mesh sends
	// depth+1 and the chain with SourceAgent appended. Other keys pass
	// through unchanged. It must encode as JSON.
	Context map[string]any
	// SourceAgent is the delegating agent, if it is one. It must not be
	// the target.
	SourceAgent string
	// Async asks the agent to answer later through the callback URL;
	// Delegate returns once the agent accepted the task.
	Async bool
	// Timeout bounds the delegation (all attempts; for an async one, until
	// the agent accepts; for a synchronous one the agent answered 202,
	// also the wait for its callback). 0 means DefaultTimeout; at most
	// MaxTimeout.
	Timeout time.Duration
	// AsyncTimeout is how long an accepted async delegation waits for its
	// callback before it becomes timeout. 0 means DefaultAsyncTimeout; at
	// most MaxAsyncTimeout. A synchronous delegation waits until Timeout
	// instead.
	AsyncTimeout time.Duration
	// Turn carries a routed conversation's fields to MCP agents; nil for
	// plain delegations.
	Turn *Turn
}

// plan is a request that passed the checks.
type plan struct {
	agent        registry.Agent
	context      map[string]any
	depth        int // the depth sent: hops including this one
	timeout      time.Duration
	asyncTimeout time.Duration
}

// Delegate runs one delegation and returns its record: final for a
// synchronous delegation (completed, failed, timeout or canceled), accepted
// (or already final) for an async one.
//
// Every delegation to an http agent carries a callback URL. A synchronous
// one the agent answers 202 is accepted (so Get shows it and the callback
// finalises it, on any replica) while Delegate waits, until the
// delegation's deadline, for the callback's outcome, seen through the
// same path as [Client.Wait]: completed or failed as the agent reports,
// or timeout at the deadline. Cancelling ctx during that wait ends it as
// it ends a delegation in flight: canceled (timeout at ctx's deadline).
//
// A delegation that ran and failed is not an error: the record says what
// happened (Status, Code, Error). Delegate returns an error, and writes no
// record, only when it refuses the request before anything is sent:
// [ErrInvalid], [ErrNotFound] (no agent of that name), [ErrNoMatch],
// [ErrDepthExceeded], [ErrCycle], [ErrResourceNotCovered], [ErrClosed],
// ctx's error if ctx is already done, or the store's error when the record
// of an async delegation cannot be written (it must be durable before the
// task is sent).
//
// A stale agent, an open circuit breaker or a protocol with no transport
// give a failed record (code agent_unavailable or agent_unreachable)
// without calling the agent. Cancelling ctx cancels the delegation
// (status canceled).
func (c *Client) Delegate(ctx context.Context, req Request) (rec Record, err error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if c.inert() {
		return Record{}, ErrClosed
	}
	ctx, span := c.startDelegate(ctx, &req)
	defer func() { endDelegate(span, &rec, err) }()
	if !c.enter() {
		return Record{}, ErrClosed
	}
	defer c.leave()
	p, err := c.prepare(&req)
	if err != nil {
		return Record{}, err
	}
	now := c.now()
	rec = Record{
		ID:          newID(),
		SourceAgent: req.SourceAgent,
		TargetAgent: p.agent.Name,
		Task:        req.Task,
		Status:      StatusRunning,
		Depth:       p.depth,
		Async:       req.Async,
		CreatedAt:   now,
		UpdatedAt:   now,
		Owner:       c.owners.current(),
	}
	if who, ok := principal.FromContext(ctx); ok {
		rec.Principal = principal.Of(who.Name)
	}
	a := &p.agent
	if a.StaleAt(now) {
		return c.refuse(rec, CodeAgentUnavailable, fmt.Sprintf(
			"agent %s is stale: no heartbeat since %s", a.Name, a.LastSeen.UTC().Format(time.RFC3339))), nil
	}
	t := c.transports[protocolOf(a)]
	if t == nil {
		return c.refuse(rec, CodeAgentUnreachable, fmt.Sprintf(
			"agent %s speaks protocol %q, which this mesh has no transport for", a.Name, protocolOf(a))), nil
	}
	done, err := c.breakers.Get(a.Name).Allow()
	if err != nil {
		return c.refuse(rec, CodeAgentUnavailable, unavailable(a.Name, err)), nil
	}
	msg := Message{
		DelegationID: rec.ID,
		SourceAgent:  req.SourceAgent,
		Task:         req.Task,
		Context:      p.context,
		Turn:         req.Turn,
	}
	if req.Async {
		return c.delegateAsync(ctx, &p, rec, t, msg, done)
	}
	return c.delegateSync(ctx, &p, rec, t, msg, done), nil
}

func protocolOf(a *registry.Agent) registry.Protocol {
	if a.Protocol == "" {
		return registry.ProtocolHTTP
	}
	return a.Protocol
}

// unavailable is the error text of a delegation refused by the breaker.
func unavailable(name string, err error) string {
	var open *breaker.OpenError
	if errors.As(err, &open) {
		return fmt.Sprintf("agent %s is unavailable: circuit breaker open until %s",
			name, open.Until.UTC().Format(time.RFC3339))
	}
	if errors.Is(err, breaker.ErrTooManyRequests) {
		return fmt.Sprintf("agent %s is unavailable: circuit breaker half-open with every probe in flight", name)
	}
	return fmt.Sprintf("agent %s is unavailable: %v", name, err)
}

// prepare validates req, resolves its target and checks the limits.
func (c *Client) prepare(req *Request) (plan, error) {
	var p plan
	switch {
	case req.Task == "":
		return p, apierr.Errorf(ErrInvalid, "task is required")
	case len(req.Task) > MaxTaskBytes:
		return p, apierr.Errorf(ErrInvalid, "task is %d bytes, over the limit of %d", len(req.Task), MaxTaskBytes)
	case !utf8.ValidString(req.Task):
		return p, apierr.Errorf(ErrInvalid, "task must be valid UTF-8")
	case req.SourceAgent != "" && !registry.ValidName(req.SourceAgent):
		return p, apierr.Errorf(ErrInvalid, "sourceAgent %q is not a valid agent name", req.SourceAgent)
	case req.Timeout < 0 || req.Timeout > MaxTimeout:
		return p, apierr.Errorf(ErrInvalid, "timeoutMs must be between 1 and %d", MaxTimeout.Milliseconds())
	case req.AsyncTimeout < 0 || req.AsyncTimeout > MaxAsyncTimeout:
		return p, apierr.Errorf(ErrInvalid, "asyncTimeoutMs must be between 1 and %d", MaxAsyncTimeout.Milliseconds())
	case (req.Target == "") == (req.Query == ""):
		return p, apierr.Errorf(ErrInvalid, "set exactly one of targetName and query")
	}
	p.timeout = positive(req.Timeout, DefaultTimeout)
	p.asyncTimeout = positive(req.AsyncTimeout, DefaultAsyncTimeout)

	depth, chain, err := limits(req.Context)
	if err != nil {
		return p, err
	}
	if depth >= c.maxDepth {
		return p, apierr.Errorf(ErrDepthExceeded, "context.depth is %d, the limit is %d hops", depth, c.maxDepth)
	}
	onChain := func(name string) bool { return name == req.SourceAgent || slices.Contains(chain, name) }
	if req.Target != "" {
		a, ok := c.agent(req.Target)
		if !ok {
			return p, apierr.Reword(ErrNotFound, "no agent named %q is registered", req.Target)
		}
		if onChain(a.Name) {
			return p, cycleError(a.Name, req.SourceAgent, chain)
		}
		if uri, ok := uncovered(&a, req.Resources); !ok {
			return p, apierr.Errorf(ErrResourceNotCovered, "agent %s does not cover %q", a.Name, uri)
		}
		p.agent = a
	} else {
		a, err := c.match(req, onChain, chain)
		if err != nil {
			return p, err
		}
		p.agent = a
	}

	p.depth = depth + 1
	out := make(map[string]any, len(req.Context)+2)
	maps.Copy(out, req.Context)
	out["depth"] = p.depth
	next := make([]string, len(chain), len(chain)+1)
	copy(next, chain)
	if req.SourceAgent != "" && !slices.Contains(chain, req.SourceAgent) {
		next = append(next, req.SourceAgent)
	}
	out["chain"] = next
	if len(req.Context) > 0 {
		// Refuse what the transports could not encode now, before a record
		// exists, rather than fail the delegation later.
		if _, err := json.Marshal(req.Context); err != nil {
			return p, apierr.Errorf(ErrInvalid, "context does not encode as JSON: %v", err)
		}
	}
	p.context = out
	return p, nil
}

func cycleError(target, source string, chain []string) error {
	if target == source {
		return apierr.Errorf(ErrCycle, "agent %s cannot delegate to itself", target)
	}
	return apierr.Errorf(ErrCycle, "agent %s is already on the delegation chain [%s]", target, strings.Join(chain, " → "))
}

// limits reads context.depth and context.chain.
func limits(ctx map[string]any) (int, []string, error) {
	depth := 0
	switch v := ctx["depth"].(type) {
	case nil:
	case float64:
		if !(v >= 0 && v <= math.MaxInt32) || v != math.Trunc(v) {
			return 0, nil, apierr.Errorf(ErrInvalid, "context.depth must be a non-negative integer")
		}
		depth = int(v)
	case int:
		depth = v
	case int64:
		depth = int(max(min(v, math.MaxInt32), -1))
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return 0, nil, apierr.Errorf(ErrInvalid, "context.depth must be a non-negative integer")
		}
		depth = int(max(min(n, math.MaxInt32), -1))
	default:
		return 0, nil, apierr.Errorf(ErrInvalid, "context.depth must be a non-negative integer")
	}
	if depth < 0 {
		return 0, nil, apierr.Errorf(ErrInvalid, "context.depth must be a non-negative integer")
	}
	var chain []string
	switch v := ctx["chain"].(type) {
	case nil:
	case []string:
		chain = v
	case []any:
		chain = make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return 0, nil, apierr.Errorf(ErrInvalid, "context.chain must be a list of agent names")
			}
			chain[i] = s
		}
	default:
		return 0, nil, apierr.Errorf(ErrInvalid, "context.chain must be a list of agent names")
	}
	return depth, chain, nil
}

// uncovered returns the first required resource a does not cover.
func uncovered(a *registry.Agent, required []string) (string, bool) {
next:
	for _, want := range required {
		for _, have := range a.Resources {
			if discovery.ResourceCovers(have.URI, want) {
				continue next
			}
		}
		return want, false
	}
	return "", true
}

// match resolves a query to the best matching agent not on the chain.
func (c *Client) match(req *Request, onChain func(string) bool, chain []string) (registry.Agent, error) {
	if c.search == nil {
		return registry.Agent{}, apierr.Errorf(ErrInvalid, "delegation by query needs a discovery engine (Options.Discovery)")
	}
	q := &discovery.Query{Limit: len(chain) + 8, RequiredResources: req.Resources}
	res, err := c.search.Search(req.Query, q)
	if err != nil {
		return registry.Agent{}, apierr.Wrap(ErrInvalid, err, "")
	}
	var skipped string
	for _, r := range res {
		if onChain(r.Agent.Name) {
			skipped = r.Agent.Name
			continue
		}
		if a, ok := c.agent(r.Agent.Name); ok {
			return a, nil
		}
	}
	if skipped != "" {
		return registry.Agent{}, apierr.Errorf(ErrCycle, "the agents matching the query are already on the delegation chain (%s)", skipped)
	}
	if len(req.Resources) > 0 {
		if res, _ := c.search.Search(req.Query, &discovery.Query{Limit: 1}); len(res) > 0 {
			return registry.Agent{}, apierr.Errorf(ErrResourceNotCovered, "no agent matching the query covers %s", strings.Join(req.Resources, ", "))
		}
	}
	return registry.Agent{}, apierr.Reword(ErrNoMatch, "no agent matches %q", req.Query)
}

// refuse records a delegation that failed before any attempt.
func (c *Client) refuse(rec Record, code, msg string) Record {
	finalize(&rec, StatusFailed, code, msg, c.now())
	rec.SecretHash = nil
	f := c.track(rec, nil)
	c.settled(f, rec)
	return rec.Public()
}

// delegateSync runs a synchronous delegation. Its records (running, then
// final) go through the group commit: the caller does not wait for them
// to be durable. An http agent gets a callback URL, as for an async
// delegation: after a 202 the record is accepted, in the store, and the
// delegation waits for the callback until its deadline. A callback that
// comes before the reply does (see claimFlight) also moves the outcome to
// the store, where the first final status wins.
func (c *Client) delegateSync(ctx context.Context, p *plan, rec Record, t Transport, msg Message, done func(error)) Record {
	if protocolOf(&p.agent) == registry.ProtocolHTTP {
		msg.CallbackURL = c.newCallback(&rec)
	}
	dctx, cancel := withTimeout(ctx, p.timeout)
	defer cancel(nil)
	f := c.track(rec, cancel)
	reply, attempts, err := c.send(dctx, t, p, msg, f)
	rec = c.settle(dctx, rec, attempts, reply, err, p.timeout)
	if rec.Status != StatusAccepted && c.settled(f, rec) {
		done(breakerOutcome(rec, err))
		return rec.Public()
	}
	if rec.Status == StatusAccepted {
		dl := rec.CreatedAt.Add(p.timeout) // the deadline of dctx
		rec.Deadline = &dl
	}
	stored := c.storeOutcome(ctx, f, rec)
	if stored.Status == StatusAccepted {
		stored = c.awaitCallback(ctx, dctx, cancel, p, stored)
	}
	// One outcome for the breaker, as for a reply: the final record's.
	done(breakerOutcome(stored, nil))
	return stored.Public()
}

// newCallback gives rec a callback secret, of which only the hash is kept
// on the record, and returns the callback URL that carries it.
func (c *Client) newCallback(rec *Record) string {
	secret, hash := newSecret()
	rec.SecretHash = hash
	return c.callbackURL(rec.ID, secret)
}

// delegateAsync runs an async delegation: its record is durable before
// the task is sent, and the accepted record before Delegate returns.
func (c *Client) delegateAsync(ctx context.Context, p *plan, rec Record, t Transport, msg Message, done func(error)) (Record, error) {
	msg.CallbackURL = c.newCallback(&rec)
	if err := c.store.PutDelegations(ctx, []Record{rec}); err != nil {
		done(context.Canceled) // not the agent's doing
		return Record{}, fmt.Errorf("delegation: write record: %w", err)
	}
	dctx, cancel := withTimeout(ctx, p.timeout)
	defer cancel(nil)
	f := c.track(rec, cancel)

	var out Record
	if protocolOf(&p.agent) == registry.ProtocolInProcess {
		reply, err := c.startHandler(rec, msg, p, done)
		if err != nil {
			done(err)
		}
		out = c.settle(dctx, rec, 1, reply, err, p.timeout)
	} else {
		reply, attempts, err := c.send(dctx, t, p, msg, f)
		out = c.settle(dctx, rec, attempts, reply, err, p.timeout)
		done(breakerOutcome(out, err))
	}
	if out.Status == StatusAccepted {
		dl := out.UpdatedAt.Add(p.asyncTimeout)
		out.Deadline = &dl
	}
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer wcancel()
	stored, changed, err := c.updateUnlessFinal(wctx, rec.ID, func(Record) Record { return out })
	c.untrack(f)
	if err != nil {
		return Record{}, fmt.Errorf("delegation: write record: %w", err)
	}
	if stored.Status == StatusAccepted {
		c.maint.add(stored.ID, *stored.Deadline)
	}
	if changed {
		c.finished(stored)
	}
	return stored.Public(), nil
}

// storeOutcome writes the outcome of a synchronous delegation, accepted
// (the agent answered 202) or one a callback raced, to the store, unless
// the record is final there already, and returns the record as stored.
// From here the record lives in the store, like an async one.
func (c *Client) storeOutcome(ctx context.Context, f *flight, rec Record) Record {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	// The running record went through the group commit: it must be in
	// the store before the outcome is written around it.
	err := c.commit.flush(wctx)
	stored, changed := rec, true
	if err == nil {
		stored, changed, err = c.updateUnlessFinal(wctx, rec.ID, func(Record) Record { return rec })
	}
	if err != nil {
		c.log.Warn("delegation record not written", "delegation_id", rec.ID, "err", err)
		stored, changed = rec, true
	}
	c.untrack(f)
	if stored.Status == StatusAccepted {
		c.maint.add(stored.ID, *stored.Deadline)
	}
	if changed {
		c.finished(stored)
	}
	return stored
}

// awaitCallback waits for the callback of a synchronous delegation its
// agent accepted and returns the final record. It waits through Wait, so
// a callback that lands on another replica is seen too. When dctx ends
// first, the record ends as a delegation in flight would at that point
// (ended: timeout at the deadline; canceled by Cancel or the caller,
// timeout at the caller's deadline; failed, interrupted, at Shutdown),
// unless it became final meanwhile. Cancel and Shutdown reach the wait
// through c.bg, as they reach an async in-process handler.
func (c *Client) awaitCallback(ctx, dctx context.Context, cancel context.CancelCauseFunc, p *plan, rec Record) Record {
	defer c.untrackBg(c.trackBg(rec, cancel))
	for {
		got, err := c.Wait(dctx, rec.ID)
		if err == nil {
			return got
		}
		if dctx.Err() != nil {
			break
		}
		c.log.Warn("reading an accepted delegation failed; retrying", "delegation_id", rec.ID, "err", err)
		if sleepCtx(dctx, c.pollEvery) != nil {
			break
		}
	}
	s, code, msg := ended(dctx, p.timeout)
	now := c.now()
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer wcancel()
	stored, changed, err := c.updateUnlessFinal(wctx, rec.ID, func(cur Record) Record {
		finalize(&cur, s, code, msg, now)
		return cur
	})
	if err != nil {
		// The maintainer times the stored record out at its deadline.
		c.log.Warn("delegation record not written", "delegation_id", rec.ID, "err", err)
		finalize(&rec, s, code, msg, now)
		return rec
	}
	if changed {
		c.finished(stored)
	}
	return stored
}

// updateUnlessFinal writes next(cur) over the stored record id unless
// that one is final already: then it stays as it is, and whoever made it
// final (a callback, a cancel, the maintainer, another replica) reported
// it. It returns the record as stored and whether this call wrote it.
func (c *Client) updateUnlessFinal(ctx context.Context, id string, next func(cur Record) Record) (Record, bool, error) {
	return c.change(ctx, id, func(cur *Record) (*Record, error) {
		if cur.Status.Final() {
			return nil, errKeep
		}
		n := next(*cur)
		return &n, nil
	})
}

// storeTimeout bounds the store writes a client makes on its own behalf.
const storeTimeout = 30 * time.Second

// withTimeout returns a context that ends at d (cause errDeadline) or when
// cancel is called with a cause.
func withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelCauseFunc) {
	cctx, cancelCause := context.WithCancelCause(parent)
	tctx, cancelTimer := context.WithTimeoutCause(cctx, d, errDeadline)
	return tctx, func(cause error) {
		cancelCause(cause)
		cancelTimer()
	}
}

// send makes the attempts of one delegation: the first, and up to
// MaxRetries more while the failure is retryable and the deadline allows.
func (c *Client) send(ctx context.Context, t Transport, p *plan, msg Message, f *flight) (Reply, int, error) {
	for attempt := 1; ; attempt++ {
		c.setAttempts(f, attempt)
		actx, span := c.startAttempt(ctx, p, msg.DelegationID, attempt)
		reply, err := t.Send(actx, p.agent, msg)
		err = maskAgentSecrets(err, p.agent)
		endAttempt(span, reply, err)
		if err == nil || ctx.Err() != nil || attempt > MaxRetries {
			return reply, attempt, err
		}
		var te *TransportError
		if !errors.As(err, &te) || !te.Retryable {
			return reply, attempt, err
		}
		wait := te.RetryAfter
		if wait <= 0 {
			wait = c.jitter(retryBase << (attempt - 1))
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return reply, attempt, err // the retry could not finish in time
		}
		if c.sleep(ctx, wait) != nil {
			return reply, attempt, err
		}
	}
}

// jitter returns a backoff between base and 1.5 × base.
func jitter(base time.Duration) time.Duration {
	return base + rand.N(base/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settle sets rec's status from the outcome of its attempts.
func (c *Client) settle(ctx context.Context, rec Record, attempts int, reply Reply, err error, timeout time.Duration) Record {
	now := c.now()
	rec.Attempts = attempts
	switch {
	case err == nil && reply.Accepted:
		rec.Status, rec.UpdatedAt = StatusAccepted, now
		rec.LatencyMs = now.Sub(rec.CreatedAt).Milliseconds()
	case err == nil:
		rec.Result, rec.Response, rec.NeedsInput = reply.Result, reply.Response, reply.NeedsInput
		finalize(&rec, StatusCompleted, "", "", now)
	case ctx.Err() != nil:
		s, code, msg := ended(ctx, timeout)
		finalize(&rec, s, code, msg, now)
	default:
		var te *TransportError
		switch {
		case errors.As(err, &te) && te.Code != "":
			finalize(&rec, StatusFailed, te.Code, te.Message, now)
		default:
			finalize(&rec, StatusFailed, CodeAgentError, err.Error(), now)
		}
		if rec.Error == "" {
			rec.Error = err.Error()
		}
	}
	return rec
}

// ended maps the end of a delegation's context to a status.
func ended(ctx context.Context, timeout time.Duration) (Status, string, string) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCanceled):
		return StatusCanceled, CodeCanceled, "canceled by request"
	case errors.Is(cause, errShutdown):
		return StatusFailed, CodeInterrupted, "the mesh shut down during the delegation"
	case errors.Is(cause, errDeadline):
		return StatusTimeout, CodeTimeout, fmt.Sprintf("no reply within %s", timeout)
	case errors.Is(cause, context.DeadlineExceeded):
		return StatusTimeout, CodeTimeout, "no reply before the caller's deadline"
	default:
		return StatusCanceled, CodeCanceled, "the caller canceled the delegation"
	}
}

// breakerOutcome is what a delegation that ended as rec reports to its
// breaker: nil when the agent answered (completed, or accepted to answer
// later), context.Canceled (not counted) when the delegation was canceled
// or interrupted, context.DeadlineExceeded at a timeout, and otherwise
// the agent's failure: err, the transport's error, when rec was settled
// from a reply, else one made of the record (a failure the agent reported
// through the callback).
func breakerOutcome(rec Record, err error) error {
	switch {
	case rec.Status == StatusCompleted, rec.Status == StatusAccepted:
		return nil
	case rec.Status == StatusCanceled, rec.Code == CodeInterrupted:
		return context.Canceled
	case rec.Status == StatusTimeout:
		return context.DeadlineExceeded
	case err != nil:
		return err
	}
	return &TransportError{Code: rec.Code, Message: rec.Error}
}

// track puts rec in the live map (and, for a synchronous record, in the
// group commit).
func (c *Client) track(rec Record, cancel context.CancelCauseFunc) *flight {
	f := &flight{rec: rec, cancel: cancel, done: make(chan struct{})}
	c.liveMu.Lock()
	c.live[rec.ID] = f
	c.liveMu.Unlock()
	if !rec.Async {
		c.commit.put(rec)
	}
	return f
}

func (c *Client) setAttempts(f *flight, n int) {
	c.liveMu.Lock()
	f.rec.Attempts = n
	c.liveMu.Unlock()
}

// settled records the final outcome of a synchronous delegation: in the
// live map at once, in the store through the group commit. It records
// nothing and reports false when a callback claimed the delegation first
// (claimFlight): the outcome must then go through the store, where the
// callback's may already be.
func (c *Client) settled(f *flight, rec Record) bool {
	c.liveMu.Lock()
	if f.calledBack {
		c.liveMu.Unlock()
		return false
	}
	f.rec, f.cancel = rec, nil
	c.liveMu.Unlock()
	close(f.done)
	c.commit.put(rec)
	c.finished(rec)
	return true
}

// trackBg registers what the client runs for an accepted record (an
// async in-process handler, a synchronous delegation waiting for its
// callback) in c.bg, where Cancel, the maintainer's timeout and Shutdown
// end it through cancel. It cancels at once when Shutdown already gave
// up waiting.
func (c *Client) trackBg(rec Record, cancel context.CancelCauseFunc) *flight {
	f := &flight{rec: rec, cancel: cancel, done: make(chan struct{})}
	c.liveMu.Lock()
	c.bg[rec.ID] = f
	if c.forced {
		cancel(errShutdown)
	}
	c.liveMu.Unlock()
	return f
}

// untrackBg removes f, registered by trackBg, once its work is over.
func (c *Client) untrackBg(f *flight) {
	c.liveMu.Lock()
	if c.bg[f.rec.ID] == f {
		delete(c.bg, f.rec.ID)
	}
	c.liveMu.Unlock()
	close(f.done)
}

// untrack removes a flight whose record lives in the store from here on.
func (c *Client) untrack(f *flight) {
	c.liveMu.Lock()
	if c.live[f.rec.ID] == f {
		delete(c.live, f.rec.ID)
	}
	f.cancel = nil
	c.liveMu.Unlock()
	close(f.done)
}

// durable drops the final records of a committed batch from the live map.
func (c *Client) durable(batch []Record) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	for i := range batch {
		id := batch[i].ID
		if f := c.live[id]; f != nil && f.rec.Status.Final() && batch[i].Status.Final() {
			delete(c.live, id)
		}
	}
}
