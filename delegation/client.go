package delegation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/principal"
	"github.com/agentmesh/agentmesh/registry"
)

// Limits and defaults of delegations.
const (
	// DefaultMaxDepth is the depth limit when Options.MaxDepth is 0: a
	// request whose context.depth is 5 or more is refused.
	DefaultMaxDepth = 5
	// DefaultTimeout is the deadline of a delegation whose request sets
	// none.
	DefaultTimeout = 120 * time.Second
	// MaxTimeout is the longest deadline a request may set.
	MaxTimeout = time.Hour
	// DefaultAsyncTimeout is how long an accepted (async) delegation waits
	// for its callback when the request sets no AsyncTimeout.
	DefaultAsyncTimeout = time.Hour
	// MaxAsyncTimeout is the longest AsyncTimeout a request may set.
	MaxAsyncTimeout = 24 * time.Hour
	// MaxResultBytes caps the result body of an agent (and of a callback):
	// a larger one fails the delegation with code response_too_large.
	// Every transport enforces it.
	MaxResultBytes = 4 << 20
	// MaxTaskBytes caps the task text of a request.
	MaxTaskBytes = 1 << 20
	// MaxRetries is how many times an attempt is retried, at most, when
	// it certainly did not reach the agent or the agent asked for a retry.
	MaxRetries = 2
	// DefaultRetention is how long final records are kept when
	// Options.Retention is 0.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultMaxRecords is how many records are kept at most when
	// Options.MaxRecords is 0.
	DefaultMaxRecords = 100_000
	// DefaultPruneInterval is how often records are pruned when
	// Options.PruneInterval is 0: often enough that the store stays
	// within a few thousand records of MaxRecords at hundreds of
	// delegations a second (docs/OPERATIONS.md#retention).
	DefaultPruneInterval = 5 * time.Second
	// DefaultPublicURL is the callback base URL when Options.PublicURL is
	// empty.
	DefaultPublicURL = "http://localhost:8766"
)

// retryBase is the first retry's backoff; each later one doubles it.
const retryBase = 200 * time.Millisecond

// Options configures a [Client]. A nil *Options, like the zero value of
// every field, means the documented default. New copies the options; later
// changes have no effect.
type Options struct {
	// Discovery resolves [Request.Query]. Nil means delegating by query is
	// refused with [ErrInvalid]; delegating by name still works.
	Discovery discovery.Searcher

	// Breakers holds the per-agent circuit breakers that wrap
	// every delegation. Pass the Set the router uses so both see the same
	// breakers. Nil means a Set of its own with the breaker defaults and no
	// persistence.
	Breakers *breaker.Set

	// HTTPClient sends the requests of the http transport (and is the
	// client other transports should use). It must come from
	// [netguard.Policy.NewClient], so the endpoint policy is enforced at
	// dial time; its CheckRedirect is replaced so that redirects are never
	// followed. Nil means Policy.NewClient(nil).
	HTTPClient *http.Client

	// Policy is the endpoint policy of the default HTTPClient. Nil allows
	// private addresses (the library default; `agentmesh serve` refuses
	// them). Unused when HTTPClient is set.
	Policy *netguard.Policy

	// Transports adds or replaces the transport of a protocol (a nil
	// value removes it). By default "http" is an [HTTPTransport], "mcp"
	// an [MCPTransport] and "a2a" an [A2ATransport], all over HTTPClient,
	// and "inprocess" calls the handlers registered with [Client.Handle];
	// a protocol with no transport fails its delegations with code
	// agent_unreachable. The client closes the transports it created, not
	// those given here.
	Transports map[registry.Protocol]Transport

	// PublicURL is the mesh's public base URL, under which agents reach
	// the callback endpoint (…/v1/delegations/<id>/result). Empty means
	// DefaultPublicURL; otherwise it must be an absolute http or https
	// URL.
	PublicURL string

	// MaxDepth refuses requests whose context.depth is MaxDepth or more.
	// ≤ 0 means DefaultMaxDepth (5).
	MaxDepth int

	// Retention is how long final records are kept. ≤ 0 means 7 days.
	Retention time.Duration

	// MaxRecords is how many records are kept at most (oldest finished
	// pruned first). ≤ 0 means 100,000.
	MaxRecords int

	// PruneInterval is how often records beyond Retention and MaxRecords
	// are pruned. 0 means DefaultPruneInterval (5 s); a negative value
	// never prunes. The store then holds at most MaxRecords plus the
	// records that finish in one interval; a prune with nothing to delete
	// costs one read of the store.
	PruneInterval time.Duration

	// RescanInterval is how often the store is read for accepted records
	// this client does not know of (created by another replica), so that
	// their deadlines are enforced too. 0 means 1 minute; a negative value
	// never rescans (the accepted records found at start and those created
	// here are still timed out).
	RescanInterval time.Duration

	// WaitPollInterval is how often [Client.Wait] re-reads a record that
	// no local event has finalised, to see a callback that landed on
	// another replica. ≤ 0 means 1 second.
	WaitPollInterval time.Duration

	// SkipRecovery makes this client leave alone the running records
	// that others left. By default (false), over a store one process holds
	// alone, New marks the records found running at start failed with
	// code interrupted (a previous run of the process left them); over an
	// [OwnerStore], the client interrupts the running records of every
	// owner that died, at start and while it runs. Set it for a store
	// several processes share that is not an OwnerStore: there, a
	// restarting process must not fail the delegations the others run.
	SkipRecovery bool

	// OnRecord, if set, is called with every record that this client
	// moves to accepted or to a final status (for metrics and audit). It
	// is called without any lock held, on the goroutine that made the
	// change, and must be quick and safe for concurrent use.
	OnRecord func(Record)

	// TracerProvider creates the spans of delegations: one per Delegate
	// call ("delegation.delegate") and, under it, one per attempt
	// to reach the agent ("delegation.attempt", a client span), with the
	// agent's name and protocol, the delegation id, the attempt number and
	// the outcome's status and code — never the task's text or a token.
	// Nil means the global provider (otel.GetTracerProvider), a no-op
	// unless the host installs one.
	TracerProvider trace.TracerProvider

	// Propagator writes the trace context of each attempt into the
	// requests the client's own transports send to agents (with
	// propagation.TraceContext, the W3C traceparent and tracestate
	// headers). Nil means the global propagator
	// (otel.GetTextMapPropagator), a no-op unless the host installs one:
	// then no trace header is sent.
	Propagator propagation.TextMapPropagator

	// Logger receives lifecycle events and dropped errors (store writes
	// that failed in the background), and each finished delegation at
	// Debug (ids, target, status, code and the task's length and hash,
	// never its text). Nil means discard.
	Logger *slog.Logger
}

// Client delegates tasks to agents: it resolves the target by name or by
// discovery, enforces the limits, sends the task over the agent's protocol
// with retries inside its circuit breaker, keeps a record of every
// delegation, and receives the callbacks of async ones.
//
// A Client starts two goroutines (the group committer of records and the
// maintainer that times out accepted delegations and prunes old records);
// [Client.Shutdown] or [Client.Close] stops them. A Client is safe for
// concurrent use by multiple goroutines. Use [New]. The zero Client (and a
// nil *Client) is inert, as one that was shut down: its methods return
// [ErrClosed] and do nothing else.
type Client struct {
	dir         registry.Subscriber
	store       Store
	search      discovery.Searcher
	breakers    *breaker.Set
	transports  map[registry.Protocol]Transport
	owned       []io.Closer // transports New created, closed by Shutdown
	publicURL   string
	maxDepth    int
	retention   time.Duration
	maxRecords  int
	pruneEvery  time.Duration
	rescanEvery time.Duration
	pollEvery   time.Duration
	onRecord    func(Record)
	log         *slog.Logger
	tracer      trace.Tracer

	// Test seams, set only before the client is used.
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(base time.Duration) time.Duration

	agentsMu    sync.RWMutex
	agents      map[string]registry.Agent // tokens included
	unsubscribe func()

	handlersMu sync.RWMutex
	handlers   map[string]Handler

	liveMu   sync.Mutex
	live     map[string]*flight  // records in flight or not yet durable
	bg       map[string]*flight  // async in-process handlers running, sync delegations awaiting their callback
	forced   bool                // Shutdown cancelled what was in flight
	watchers map[string]*watcher // Wait calls, by record id
	lifeMu   sync.RWMutex        // guards closing and ops.Add
	closing  bool                // Shutdown started: no new work
	ops      sync.WaitGroup      // Delegate, Callback and Cancel calls in progress
	bgOps    sync.WaitGroup      // async in-process handler wrappers
	stopped  chan struct{}       // closed when Shutdown has finished
	commit   *committer
	maint    *maintainer
	owners   *owners // nil unless the store is an OwnerStore
}

// flight is a record this client holds in memory: a delegation in flight,
// or a final one not yet durable.
type flight struct {
	rec    Record
	cancel context.CancelCauseFunc // nil once the delegation has finished
	done   chan struct{}           // closed when the record leaves the live map
	// calledBack is set when a callback for a synchronous delegation came
	// before its reply was settled (claimFlight).
	calledBack bool
}

// watcher wakes the Wait calls of one record.
type watcher struct {
	ch chan struct{}
	n  int
}

// Causes of a delegation's context ending, which decide its status.
var (
	errDeadline = errors.New("delegation: deadline passed")
	errCanceled = errors.New("delegation: canceled")
	errShutdown = errors.New("delegation: client shut down")
)

// New returns a client that resolves agents from dir (a
// *registry.Registry, whose Subscribe gives the agents with their auth
// tokens) and keeps its records in store (both required), configured by
// opts (nil means defaults).
//
// Over a store that is not an [OwnerStore], New first marks every record
// found in status running failed with code interrupted (a previous run of
// the process died during those delegations), unless opts.SkipRecovery
// is set. Over an OwnerStore, it holds an owner id instead, which it
// stamps on the records it creates, and, unless opts.SkipRecovery is set,
// interrupts the running records of dead owners from then on. It also
// loads the accepted records, whose deadlines the client then enforces.
// It then subscribes to dir and starts its goroutines. New does not close
// dir or store; close them after the client.
func New(ctx context.Context, dir registry.Subscriber, store Store, opts *Options) (*Client, error) {
	return newClient(ctx, dir, store, opts, seams{})
}

// seams are the test hooks of a client: its clock (for record times), its
// sleep between retries, and its backoff jitter. Zero fields mean the real
// ones.
type seams struct {
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(base time.Duration) time.Duration
}

func newClient(ctx context.Context, dir registry.Subscriber, store Store, opts *Options, s seams) (*Client, error) {
	if dir == nil {
		return nil, errors.New("delegation: nil registry")
	}
	if store == nil {
		return nil, errors.New("delegation: nil Store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	publicURL, err := checkPublicURL(o.PublicURL)
	if err != nil {
		return nil, err
	}
	c := &Client{
		dir:         dir,
		store:       store,
		search:      o.Discovery,
		breakers:    o.Breakers,
		publicURL:   publicURL,
		maxDepth:    positive(o.MaxDepth, DefaultMaxDepth),
		retention:   positive(o.Retention, DefaultRetention),
		maxRecords:  positive(o.MaxRecords, DefaultMaxRecords),
		pruneEvery:  interval(o.PruneInterval, DefaultPruneInterval),
		rescanEvery: interval(o.RescanInterval, time.Minute),
		pollEvery:   positive(o.WaitPollInterval, time.Second),
		onRecord:    o.OnRecord,
		log:         o.Logger,
		tracer:      tracing.Tracer(o.TracerProvider, tracerName),
		now:         time.Now,
		sleep:       sleepCtx,
		jitter:      jitter,
		agents:      make(map[string]registry.Agent),
		handlers:    make(map[string]Handler),
		live:        make(map[string]*flight),
		bg:          make(map[string]*flight),
		watchers:    make(map[string]*watcher),
		stopped:     make(chan struct{}),
	}
	if s.now != nil {
		c.now = s.now
	}
	if s.sleep != nil {
		c.sleep = s.sleep
	}
	if s.jitter != nil {
		c.jitter = s.jitter
	}
	if c.breakers == nil {
		c.breakers = breaker.NewSet(nil, nil)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = o.Policy.NewClient(nil)
	}
	prop := tracing.Propagator(o.Propagator)
	c.transports = map[registry.Protocol]Transport{
		registry.ProtocolHTTP:      newHTTPTransport(hc, prop),
		registry.ProtocolA2A:       NewA2ATransport(&A2AOptions{HTTPClient: hc, Logger: o.Logger, Propagator: prop}),
		registry.ProtocolInProcess: inprocessTransport{c},
	}
	if _, set := o.Transports[registry.ProtocolMCP]; !set {
		mt := NewMCPTransport(&MCPOptions{HTTPClient: hc, Logger: o.Logger, Propagator: prop})
		c.transports[registry.ProtocolMCP] = mt
		c.owned = append(c.owned, mt)
	}
	for p, t := range o.Transports {
		if t == nil {
			delete(c.transports, p)
		} else {
			c.transports[p] = t
		}
	}

	ownerStore, shared := store.(OwnerStore)
	accepted, err := c.recover(ctx, !o.SkipRecovery && !shared)
	if err != nil {
		c.closeTransports()
		return nil, err
	}
	if shared {
		if c.owners, err = holdOwner(ctx, c, ownerStore); err != nil {
			c.closeTransports()
			return nil, err
		}
	}
	snapshot, cancel := dir.Subscribe(c.apply)
	c.agentsMu.Lock()
	for _, a := range snapshot { // the snapshot is the client's own copy
		c.agents[a.Name] = a
	}
	c.agentsMu.Unlock()
	c.unsubscribe = cancel
	c.commit = newCommitter(store, c.log, c.durable)
	c.maint = newMaintainer(c, accepted)
	if shared && !o.SkipRecovery {
		c.owners.watch()
	}
	return c, nil
}

func checkPublicURL(s string) (string, error) {
	if s == "" {
		return DefaultPublicURL, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("delegation: PublicURL %q must be an absolute http or https URL without userinfo, query or fragment", s)
	}
	return strings.TrimRight(s, "/"), nil
}

func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// interval maps 0 to def and keeps negative values (meaning "never").
func interval(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// apply keeps the agent map current from registry events. An event's
// record is shared by every subscriber and never modified, so it is kept
// as it is: the client only reads its records.
func (c *Client) apply(ev registry.Event) {
	c.agentsMu.Lock()
	defer c.agentsMu.Unlock()
	switch ev.Type {
	case registry.EventPut, registry.EventHeartbeat:
		c.agents[ev.Agent.Name] = ev.Agent
	case registry.EventDelete:
		delete(c.agents, ev.Agent.Name)
	}
}

// agent returns the registered agent called name, token included. Its
// slices and maps are shared: read them, never change them.
func (c *Client) agent(name string) (registry.Agent, bool) {
	c.agentsMu.RLock()
	a, ok := c.agents[name]
	c.agentsMu.RUnlock()
	return a, ok
}

// inert reports whether c is nil or a zero Client, not made by New.
func (c *Client) inert() bool { return c == nil || c.stopped == nil }

// enter registers a call that must finish before Shutdown returns. It
// reports false once Shutdown has started, and for an inert client.
func (c *Client) enter() bool {
	if c.inert() {
		return false
	}
	c.lifeMu.RLock()
	defer c.lifeMu.RUnlock()
	if c.closing {
		return false
	}
	c.ops.Add(1)
	return true
}

func (c *Client) leave() { c.ops.Done() }

// Shutdown stops the client: new calls fail with [ErrClosed], delegations
// in flight (and async in-process handlers) are given until ctx is done to
// finish, then cancelled (their records become failed with code
// interrupted); finally the records not yet written are flushed to the
// store and the goroutines stop. Over an [OwnerStore], the client's owner
// id dies last, once its records are in the store: a record the flush
// could not write stays running there until another client interrupts
// it. It returns ctx's error if it had to cancel delegations, else nil.
//
// Shutdown is idempotent and safe for concurrent use; a second call waits
// for the first to finish. It closes neither the store nor the registry.
// On an inert (zero) Client it returns nil.
func (c *Client) Shutdown(ctx context.Context) error {
	if c.inert() {
		return nil
	}
	c.lifeMu.Lock()
	if c.closing {
		c.lifeMu.Unlock()
		<-c.stopped
		return nil
	}
	c.closing = true
	c.lifeMu.Unlock()

	idle := make(chan struct{})
	go func() {
		c.ops.Wait()
		c.bgOps.Wait()
		close(idle)
	}()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
		c.cancelAll(errShutdown)
		<-idle
	}
	c.owners.endWatch()
	c.unsubscribe()
	c.maint.stop()
	c.commit.stop()
	c.owners.release()
	c.closeTransports()
	close(c.stopped)
	return err
}

// closeTransports closes the transports the client created.
func (c *Client) closeTransports() {
	for _, t := range c.owned {
		if err := t.Close(); err != nil {
			c.log.Warn("closing a transport failed", "err", err)
		}
	}
}

// Close is Shutdown without a grace period: delegations in flight are
// cancelled at once (failed, code interrupted), pending records are
// flushed, the goroutines stop. It returns nil.
func (c *Client) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Shutdown(ctx)
	return nil
}

// cancelAll cancels every delegation in flight and every async in-process
// handler with cause.
func (c *Client) cancelAll(cause error) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	c.forced = true
	for _, f := range c.live {
		if f.cancel != nil {
			f.cancel(cause)
		}
	}
	for _, f := range c.bg {
		if f.cancel != nil {
			f.cancel(cause)
		}
	}
}

// Get returns the record with the given id: from memory while the
// delegation is in flight, else from the store. Errors: one wrapping
// [ErrNotFound], [ErrClosed], or the store's.
func (c *Client) Get(ctx context.Context, id string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if c.inert() {
		return Record{}, ErrClosed
	}
	c.liveMu.Lock()
	f := c.live[id]
	var rec Record
	if f != nil {
		rec = f.rec
	}
	c.liveMu.Unlock()
	if f == nil {
		if c.isStopped() {
			return Record{}, ErrClosed
		}
		var err error
		rec, err = c.store.GetDelegation(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return Record{}, notFound(id)
		}
		if err != nil {
			return Record{}, fmt.Errorf("delegation: get %q: %w", id, err)
		}
	}
	if !principal.Allowed(ctx, rec.Principal) {
		return Record{}, notFound(id) // its existence is not revealed
	}
	return rec.Public(), nil
}

// notFound is the error of a record the caller cannot see: missing, or
// another principal's. The store's own wording stays out of the message:
// it is shown to API callers.
func notFound(id string) error {
	return apierr.Reword(ErrNotFound, "no delegation with id %q", id)
}

// isStopped reports whether Shutdown has finished, or c is inert.
func (c *Client) isStopped() bool {
	if c.inert() {
		return true
	}
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}

// List returns records newest first, filtered and paged by f,
// without their secret hashes.
// It first waits for the records already queued for the group commit, so
// a delegation that has returned is listed with its final status. A filter with an unknown status, a
// negative limit or offset is refused with [ErrInvalid]; a limit over
// MaxListLimit is capped.
func (c *Client) List(ctx context.Context, f ListFilter) ([]Record, error) {
	if f.Limit < 0 || f.Offset < 0 {
		return nil, apierr.Errorf(ErrInvalid, "limit and offset must not be negative")
	}
	if c.isStopped() {
		return nil, ErrClosed
	}
	for _, s := range append([]Status{f.Status}, f.Statuses...) {
		if s != "" && !s.Valid() {
			return nil, apierr.Errorf(ErrInvalid, "unknown status %q", s)
		}
	}
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	f.Limit = min(f.Limit, MaxListLimit)
	if p := principal.Filter(ctx); p != "" {
		f.Principal = p
	}
	// Records of sync delegations reach the store through the background
	// committer; wait for the ones already queued so a delegation that has
	// returned is listed with its final status (read-your-writes).
	if err := c.commit.flush(ctx); err != nil {
		return nil, fmt.Errorf("delegation: list: %w", err)
	}
	recs, err := c.store.ListDelegations(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("delegation: list: %w", err)
	}
	for i := range recs {
		recs[i] = recs[i].Public()
	}
	return recs, nil
}

// Wait returns the record with the given id once it is final. It is woken
// by this client's own changes (a delegation finishing, a callback, a
// timeout, a cancel) and re-reads the store every Options.WaitPollInterval
// to see changes made by another replica. If ctx is done first, Wait
// returns the record as it is then with ctx's error (the long-poll of
// GET /v1/delegations/{id}?wait=). Errors: one wrapping [ErrNotFound],
// [ErrClosed], or the store's.
func (c *Client) Wait(ctx context.Context, id string) (Record, error) {
	if c.inert() {
		return Record{}, ErrClosed
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ch, release := c.watch(id)
		rec, err := c.Get(ctx, id)
		if err != nil || rec.Status.Final() {
			release()
			if err != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
			return rec, err
		}
		if timer == nil {
			timer = time.NewTimer(c.pollEvery)
		} else {
			timer.Reset(c.pollEvery)
		}
		select {
		case <-ch:
		case <-timer.C:
		case <-c.stopped:
			release()
			return rec, ErrClosed
		case <-ctx.Done():
			release()
			return rec, ctx.Err()
		}
		release()
	}
}

// watch returns a channel closed at the next notify(id), and a function
// to call when the caller stops watching.
func (c *Client) watch(id string) (<-chan struct{}, func()) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	w := c.watchers[id]
	if w == nil {
		w = &watcher{ch: make(chan struct{})}
		c.watchers[id] = w
	}
	w.n++
	return w.ch, func() {
		c.liveMu.Lock()
		defer c.liveMu.Unlock()
		w.n--
		if w.n == 0 && c.watchers[id] == w {
			delete(c.watchers, id)
		}
	}
}

// notify wakes the Wait calls of id. Call it after the change is visible
// to Get.
func (c *Client) notify(id string) {
	c.liveMu.Lock()
	w := c.watchers[id]
	if w != nil {
		delete(c.watchers, id)
	}
	c.liveMu.Unlock()
	if w != nil {
		close(w.ch)
	}
}

// Cancel cancels a delegation that is running or accepted and returns its
// record, which is then final: canceled, or whatever it became if it
// finished first. A running delegation's request is aborted; an accepted
// one's later callback is refused with 409. Errors: one wrapping
// [ErrNotFound]; [ErrFinal] if the record was already final; [ErrConflict]
// for a synchronous delegation running on another replica; [ErrClosed].
func (c *Client) Cancel(ctx context.Context, id string) (Record, error) {
	if !c.enter() {
		return Record{}, ErrClosed
	}
	defer c.leave()

	c.liveMu.Lock()
	f := c.live[id]
	if f != nil && !principal.Allowed(ctx, f.rec.Principal) {
		c.liveMu.Unlock()
		return Record{}, notFound(id) // its existence is not revealed
	}
	if f != nil && !f.rec.Status.Final() && f.cancel != nil {
		f.cancel(errCanceled)
		done := f.done
		c.liveMu.Unlock()
		// The delegation records its own canceled status; wait for it so
		// the caller gets the final record.
		select {
		case <-done:
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
		// Read the record as it ended (canceled, unless it finished
		// first, or accepted if the agent's 202 won the race).
		rec, err := c.Get(ctx, id)
		if err == nil && rec.Status == StatusAccepted {
			return c.cancelStored(ctx, id)
		}
		return rec, err
	}
	if f != nil && f.rec.Status.Final() {
		c.liveMu.Unlock()
		return Record{}, apierr.Errorf(ErrFinal, "delegation %s is %s", id, f.rec.Status)
	}
	c.liveMu.Unlock()
	return c.cancelStored(ctx, id)
}

// cancelStored cancels an accepted record in the store and stops its
// in-process handler, if any. Another principal's record is not found.
func (c *Client) cancelStored(ctx context.Context, id string) (Record, error) {
	now := c.now()
	rec, err := c.update(ctx, id, func(cur *Record) (*Record, error) {
		switch {
		case !principal.Allowed(ctx, cur.Principal):
			return nil, notFound(id) // its existence is not revealed
		case cur.Status.Final():
			return nil, apierr.Errorf(ErrFinal, "delegation %s is %s", id, cur.Status)
		case cur.Status != StatusAccepted:
			return nil, apierr.Errorf(ErrConflict, "delegation %s is running on another replica", id)
		}
		next := *cur
		finalize(&next, StatusCanceled, CodeCanceled, "canceled by request", now)
		return &next, nil
	})
	if err != nil {
		return Record{}, err
	}
	c.liveMu.Lock()
	if f := c.bg[id]; f != nil && f.cancel != nil {
		f.cancel(errCanceled)
	}
	c.liveMu.Unlock()
	c.finished(rec)
	return rec.Public(), nil
}

// errKeep makes an update function leave the record unchanged; update
// then returns the current record and no error.
var errKeep = errors.New("delegation: keep record")

// update runs fn on the stored record through Store.UpdateDelegation and
// returns the record as stored afterwards.
func (c *Client) update(ctx context.Context, id string, fn func(cur *Record) (*Record, error)) (Record, error) {
	rec, _, err := c.change(ctx, id, fn)
	return rec, err
}

// change is update that also reports whether it wrote the record fn
// returned: false when fn kept the stored one (errKeep).
func (c *Client) change(ctx context.Context, id string, fn func(cur *Record) (*Record, error)) (Record, bool, error) {
	var (
		out   Record
		wrote bool
	)
	err := c.store.UpdateDelegation(ctx, id, func(cur *Record) (*Record, error) {
		next, err := fn(cur)
		wrote = err == nil
		switch {
		case errors.Is(err, errKeep):
			out = *cur
		case err == nil:
			out = *next
		}
		return next, err
	})
	if errors.Is(err, errKeep) {
		err = nil
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Record{}, false, notFound(id)
		}
		return Record{}, false, err
	}
	return out, wrote, nil
}

// finalize moves rec to a final status at now.
func finalize(rec *Record, s Status, code, msg string, now time.Time) {
	rec.Status, rec.Code, rec.Error = s, code, msg
	rec.UpdatedAt = now
	t := now
	rec.FinishedAt = &t
	rec.LatencyMs = now.Sub(rec.CreatedAt).Milliseconds()
}

// finished reports a record that reached accepted or a final status
// through the store: wakes waiters, calls the hook, logs.
func (c *Client) finished(rec Record) {
	if rec.Status.Final() {
		c.notify(rec.ID)
	}
	if c.onRecord != nil {
		c.onRecord(rec.Public())
	}
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("delegation", "delegation_id", rec.ID, "target", rec.TargetAgent,
			"source", rec.SourceAgent, "status", string(rec.Status), "code", rec.Code,
			"latency_ms", rec.LatencyMs, "attempts", rec.Attempts, "depth", rec.Depth,
			"task_len", len(rec.Task), "task_sha256", taskHash(rec.Task))
	}
}
