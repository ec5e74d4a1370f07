package registry

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/principal"
)

// Options configures a [Registry]. A nil *Options means all defaults.
type Options struct {
	// Policy is the endpoint policy applied at registration. Nil allows
	// private addresses (the library default: a local host talking to
	// local agents) and still refuses the always-refused ones.
	Policy *netguard.Policy

	// Now is the clock for timestamps, staleness and expiry. Nil means
	// time.Now.
	Now func() time.Time

	// SweepInterval is how often expired agents are removed. Zero means
	// 5 s; a negative value starts no sweeper (call [Registry.Sweep]
	// yourself, as tests with an injected clock do).
	SweepInterval time.Duration

	// MaxAgents caps the agents the registry holds: a registration that
	// would create one more fails with [ErrFull] (replacing an agent
	// always works). Zero means no cap. With a store shared by replicas
	// the count is this registry's view, so the replicas together may
	// briefly hold a few more.
	MaxAgents int

	// Logger receives lifecycle events (expiry removals, dropped errors).
	// Nil means discard.
	Logger *slog.Logger

	// OnWrite, if set, is called after every registration, unregistration,
	// file-agent change and TTL removal, and after every refused or failed
	// one, with the context of the call that caused it (see [Write]). It
	// is the one place to audit changes of the registry. It runs on the
	// caller's goroutine and must not block.
	OnWrite func(ctx context.Context, w Write)
}

// DefaultSweepInterval is the sweep interval when Options.SweepInterval is 0.
const DefaultSweepInterval = 5 * time.Second

// Registry is the set of registered agents over a durable [Store]: it
// validates records, keeps an in-memory view for reads, expires agents whose
// TTL lapsed and tells subscribers about every committed change.
//
// Over a [WatchableStore] (a store shared by several replicas) the
// registry also follows the store: changes committed by other processes,
// and records the store expired itself, are applied to the view and
// delivered to subscribers like its own (as EventPut, EventHeartbeat when
// only LastSeen changed, or EventDelete, with Expired set when the removed
// agent was stale), shortly after they commit. Its own writes are applied
// at once, as with any store; changes are ordered by store revision, so a
// watched change never overwrites a newer write of this registry, and the
// echo of its own writes is not delivered twice. Checks that span agents
// (at most one default agent, a file agent's name) are atomic within one
// registry only: two replicas can race.
//
// A Registry is safe for concurrent use. Writes to different agents proceed
// in parallel (so a batching store can group their commits); writes to the
// same agent are serialised. Every read path returns records without the
// auth token.
type Registry struct {
	store   Store
	policy  *netguard.Policy
	now     func() time.Time
	log     *slog.Logger
	onWrite func(context.Context, Write)

	seed      maphash.Seed
	nameLocks [64]sync.Mutex // per-name write serialisation, by hash
	defaultMu sync.Mutex     // serialises writes of default agents
	maxAgents int

	mu          sync.RWMutex
	agents      map[string]*Agent // committed records, token included
	names       []string          // sorted names; nil when agents changed membership
	defaultName string            // the agent with IsDefault, or ""
	creating    int               // with maxAgents, creations reserved and not yet committed or failed
	closed      bool
	seq         uint64 // sequence number of the last queued event
	queue       []queuedEvent
	subs        map[uint64]*subscriber
	nextSubID   uint64

	deliverMu sync.Mutex // held while delivering events, so they arrive in order

	stop chan struct{}
	done chan struct{}

	// Following a WatchableStore (watch.go); watched is nil for other
	// stores. revs and tombs are guarded by mu.
	watched   WatchableStore
	revs      map[string]int64 // store revision of each agent in the view
	tombs     map[string]int64 // revision of each deletion the watch has not yet passed
	stopWatch context.CancelFunc
	watchDone chan struct{}
}

type queuedEvent struct {
	seq uint64
	ev  Event
}

type subscriber struct {
	fn    func(Event)
	after uint64 // deliver only events with seq > after
}

// New loads every agent from store and returns a registry over it. Unless
// opts.SweepInterval is negative, it starts a sweeper goroutine that
// [Registry.Close] stops. When store is a [WatchableStore], it also starts
// a goroutine following the store's changes (see [Registry]), which Close
// stops too.
func New(ctx context.Context, store Store, opts *Options) (*Registry, error) {
	if store == nil {
		return nil, errors.New("registry: nil Store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	list, err := store.ListAgents(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: load agents: %w", err)
	}
	r := &Registry{
		store:     store,
		policy:    o.Policy,
		maxAgents: o.MaxAgents,
		now:       o.Now,
		log:       o.Logger,
		onWrite:   o.OnWrite,
		seed:      maphash.MakeSeed(),
		agents:    make(map[string]*Agent, len(list)),
		subs:      make(map[uint64]*subscriber),
	}
	for i := range list {
		r.agents[list[i].Name] = &list[i]
		if list[i].IsDefault {
			r.defaultName = list[i].Name
		}
	}
	if o.SweepInterval > 0 {
		r.stop, r.done = make(chan struct{}), make(chan struct{})
		go r.sweepLoop(o.SweepInterval)
	}
	if ws, ok := store.(WatchableStore); ok {
		r.follow(ws)
	}
	return r, nil
}

// Close stops the sweeper (and the store watch) and makes every later call
// fail with [ErrClosed]. It does not close the store. Close is idempotent
// and safe for concurrent use.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	if r.stop != nil {
		close(r.stop)
		<-r.done
	}
	if r.stopWatch != nil {
		r.stopWatch()
		<-r.watchDone
	}
	return nil
}

// Register validates a and stores it under a.Name: a new name creates the
// agent, an existing one is replaced, keeping its RegisteredAt. It returns
// the stored record (without the token) and whether it was created.
//
// Errors: a *[FieldError] wrapping [ErrInvalid] or [ErrEndpointNotAllowed];
// [ErrManagedByFile] when the existing agent belongs to the agent directory;
// [ErrPermissionDenied] when it is owned by another principal than the one
// ctx carries (see [Agent.Owner]);
// [ErrDefaultConflict] when a.IsDefault and another agent is the default;
// [ErrClosed]; or a store error. On error nothing is stored.
func (r *Registry) Register(ctx context.Context, a Agent) (Agent, bool, error) {
	stored, created, err := r.register(ctx, a)
	w := Write{Op: OpRegister, Agent: a, Created: created, Err: err}
	if err == nil {
		w.Agent = stored
	}
	r.wrote(ctx, w)
	return stored, created, err
}

func (r *Registry) register(ctx context.Context, a Agent) (Agent, bool, error) {
	a = a.Clone()
	a.Normalize()
	if err := a.Validate(r.policy); err != nil {
		return Agent{}, false, err
	}
	a.Source = SourceAPI

	defer r.deliver() // after the name lock is released
	unlock := r.lockName(a.Name)
	defer unlock()
	if a.IsDefault {
		r.defaultMu.Lock()
		defer r.defaultMu.Unlock()
		if other, ok := r.defaultAgent(); ok && other != a.Name {
			return Agent{}, false, apierr.Errorf(ErrDefaultConflict, "%s", other)
		}
	}

	now := r.now()
	var stored Agent
	var created, reserved bool
	err := r.update(ctx, a.Name, func(cur *Agent) (*Agent, error) {
		// a is this call's own deep copy, and nothing changes its slices
		// or maps from here on: the record the store gets may share them
		// (commitLocked keeps a copy of its own, view returns another).
		next := a
		next.RegisteredAt, next.UpdatedAt, next.LastSeen = now, now, now
		created = cur == nil
		switch {
		case r.maxAgents <= 0: // no cap
		case created && !reserved:
			if !r.reserveCreation() {
				return nil, apierr.Errorf(ErrFull, "it holds its maximum of %d agents", r.maxAgents)
			}
			reserved = true
		case !created && reserved: // the store called fn again: the agent exists now
			r.releaseCreation()
			reserved = false
		}
		if cur == nil {
			next.Owner = ownerOf(ctx, a.Owner)
		} else {
			if cur.Source == SourceFile {
				return nil, apierr.Errorf(ErrManagedByFile, "change its YAML file instead")
			}
			if !principal.Allowed(ctx, cur.Owner) {
				return nil, ErrPermissionDenied
			}
			next.RegisteredAt = cur.RegisteredAt
			next.Owner = principal.Of(cur.Owner) // a replacement keeps the owner
		}
		stored = next
		return &next, nil
	})
	if err != nil {
		if reserved {
			r.releaseCreation()
		}
		return Agent{}, false, err
	}
	r.mu.Lock()
	r.commitLocked(Event{Type: EventPut, Agent: stored, Created: created})
	if reserved {
		r.creating-- // counted in r.agents from now on: in the same step, or it would count twice
	}
	r.mu.Unlock()
	return r.view(&stored, now), created, nil
}

// reserveCreation takes a place for an agent about to be created and
// reports whether one was left: the registry holds fewer than
// Options.MaxAgents agents, counting the creations reserved and not yet
// committed or failed. Reserving instead of holding a lock across the
// store's write lets concurrent creations share a commit.
func (r *Registry) reserveCreation() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.agents)+r.creating >= r.maxAgents {
		return false
	}
	r.creating++
	return true
}

// releaseCreation gives back a place reserveCreation took when the
// creation failed or the agent turned out to exist (a committed creation
// gives it back as it adds the agent to r.agents).
func (r *Registry) releaseCreation() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.creating--
}

// Get returns the agent named name, or [ErrNotFound].
func (r *Registry) Get(ctx context.Context, name string) (Agent, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return Agent{}, ErrClosed
	}
	a, ok := r.agents[name]
	if !ok {
		return Agent{}, apierr.Errorf(ErrNotFound, "%s", name)
	}
	return r.view(a, r.now()), nil
}

// Delete unregisters the agent named name. Errors: [ErrNotFound],
// [ErrManagedByFile], [ErrPermissionDenied] when the principal ctx
// carries does not own the agent, [ErrClosed] or a store error.
func (r *Registry) Delete(ctx context.Context, name string) error {
	removed, err := r.delete(ctx, name)
	if err != nil {
		removed = Agent{Name: name}
	}
	r.wrote(ctx, Write{Op: OpDelete, Agent: removed, Err: err})
	return err
}

func (r *Registry) delete(ctx context.Context, name string) (Agent, error) {
	defer r.deliver()
	unlock := r.lockName(name)
	defer unlock()
	var removed Agent
	err := r.update(ctx, name, func(cur *Agent) (*Agent, error) {
		switch {
		case cur == nil:
			return nil, apierr.Errorf(ErrNotFound, "%s", name)
		case cur.Source == SourceFile:
			return nil, apierr.Errorf(ErrManagedByFile, "change its YAML file instead")
		case !principal.Allowed(ctx, cur.Owner):
			return nil, ErrPermissionDenied
		}
		removed = *cur
		return nil, nil
	})
	if err != nil {
		return Agent{}, err
	}
	r.commit(Event{Type: EventDelete, Agent: removed})
	return removed, nil
}

// Heartbeat refreshes the agent's LastSeen, restarting its TTL, and returns
// the record. Errors: [ErrNotFound], [ErrPermissionDenied] when the
// principal ctx carries does not own an API agent, [ErrClosed] or a store
// error.
func (r *Registry) Heartbeat(ctx context.Context, name string) (Agent, error) {
	defer r.deliver()
	unlock := r.lockName(name)
	defer unlock()
	now := r.now()
	var stored Agent
	err := r.update(ctx, name, func(cur *Agent) (*Agent, error) {
		switch {
		case cur == nil:
			return nil, apierr.Errorf(ErrNotFound, "%s", name)
		case cur.Source != SourceFile && !principal.Allowed(ctx, cur.Owner):
			return nil, ErrPermissionDenied
		}
		stored = cur.Clone()
		stored.LastSeen = now
		next := stored
		return &next, nil
	})
	if err != nil {
		return Agent{}, err
	}
	r.commit(Event{Type: EventHeartbeat, Agent: stored})
	return r.view(&stored, now), nil
}

// ListOptions selects a page of [Registry.List].
type ListOptions struct {
	// Limit is the page size. Zero means DefaultListLimit; it is capped at
	// MaxListLimit.
	Limit int
	// Cursor continues from a previous page's NextCursor. Empty starts at
	// the first agent.
	Cursor string
	// Labels keeps only agents carrying every one of these labels.
	Labels map[string]string
}

// Page is one page of agents in name order.
type Page struct {
	Agents []Agent
	// NextCursor is the cursor of the next page, or "" when this is the
	// last one.
	NextCursor string
}

// Page sizes of [Registry.List].
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// List returns a page of agents in name order, stale ones included (marked
// Stale).
func (r *Registry) List(ctx context.Context, opts ListOptions) (Page, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	after := ""
	if opts.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(opts.Cursor)
		if err != nil || !ValidName(string(b)) {
			return Page{}, apierr.Errorf(ErrBadCursor, "not a cursor this registry issued; start again without one")
		}
		after = string(b)
	}

	names, err := r.sortedNames()
	if err != nil {
		return Page{}, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.names == nil { // membership changed since sortedNames: use this view's
		names = slices.Sorted(maps.Keys(r.agents))
	} else {
		names = r.names
	}
	now := r.now()
	var page Page
	start, found := slices.BinarySearch(names, after)
	if found {
		start++
	}
	for _, name := range names[start:] {
		a, ok := r.agents[name]
		if !ok || !hasLabels(a.Labels, opts.Labels) {
			continue
		}
		if len(page.Agents) == limit {
			page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(page.Agents[limit-1].Name))
			break
		}
		page.Agents = append(page.Agents, r.view(a, now))
	}
	return page, nil
}

// Len returns the number of registered agents, stale ones included.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.agents)
}

// Subscribe registers fn to receive every change committed from now on and
// returns the agents registered at that moment (tokens included: subscribers
// are trusted in-process code) and a function that cancels the
// subscription. The snapshot and the subscription are atomic: fn sees
// exactly the changes after the snapshot.
//
// fn is called in commit order, never concurrently with itself or another
// subscriber, and outside the registry's locks. It must not call the
// registry's write methods (Register, Delete, Heartbeat, Sweep): those wait
// for pending events to be delivered and would deadlock. A slow fn delays
// the writers.
func (r *Registry) Subscribe(fn func(Event)) (snapshot []Agent, cancel func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.nextSubID
	r.nextSubID++
	r.subs[id] = &subscriber{fn: fn, after: r.seq}
	snapshot = make([]Agent, 0, len(r.agents))
	for _, name := range slices.Sorted(maps.Keys(r.agents)) {
		snapshot = append(snapshot, r.agents[name].Clone())
	}
	return snapshot, func() {
		r.mu.Lock()
		delete(r.subs, id)
		r.mu.Unlock()
	}
}

// Sweep removes every agent whose TTL grace period is over (see
// [Agent.ExpiredAt]) and returns how many it removed. The sweeper goroutine
// calls it every Options.SweepInterval.
func (r *Registry) Sweep(ctx context.Context) (int, error) {
	now := r.now()
	r.mu.RLock()
	var expired []string
	for name, a := range r.agents {
		if a.ExpiredAt(now) {
			expired = append(expired, name)
		}
	}
	r.mu.RUnlock()
	slices.Sort(expired)

	removed := 0
	var errs []error
	for _, name := range expired {
		ok, err := r.expire(ctx, name, now)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

var errStillAlive = errors.New("registry: agent no longer expired")

func (r *Registry) expire(ctx context.Context, name string, now time.Time) (bool, error) {
	defer r.deliver()
	unlock := r.lockName(name)
	defer unlock()
	var removed Agent
	err := r.update(ctx, name, func(cur *Agent) (*Agent, error) {
		if cur == nil || !cur.ExpiredAt(now) {
			return nil, errStillAlive // heartbeat or re-registration won the race
		}
		removed = *cur
		return nil, nil
	})
	if errors.Is(err, errStillAlive) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.log.Info("agent removed after its TTL grace period",
		"agent", name, "ttl_seconds", removed.TTLSeconds, "last_seen", removed.LastSeen)
	r.commit(Event{Type: EventDelete, Agent: removed, Expired: true})
	r.wrote(ctx, Write{Op: OpExpire, Agent: removed})
	return true, nil
}

func (r *Registry) sweepLoop(every time.Duration) {
	defer close(r.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if _, err := r.Sweep(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
				r.log.Warn("registry sweep failed", "err", err)
			}
		}
	}
}

// update runs a store write for one agent. The caller holds the agent's
// name lock, so the store commit, the cache update and the event happen in
// the same order for that agent.
func (r *Registry) update(ctx context.Context, name string, fn func(cur *Agent) (*Agent, error)) error {
	r.mu.RLock()
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	var err error
	if r.watched != nil {
		err = r.updateWatched(ctx, name, fn)
	} else {
		err = r.store.UpdateAgent(ctx, name, fn)
	}
	if err == nil || isOwnError(err) {
		return err
	}
	return fmt.Errorf("registry: store agent %s: %w", name, err)
}

func isOwnError(err error) bool {
	var fe *FieldError
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrManagedByFile) || errors.Is(err, ErrFull) ||
		errors.Is(err, ErrPermissionDenied) ||
		errors.Is(err, errStillAlive) || errors.As(err, &fe)
}

// commit applies committed changes to the in-memory view and queues their
// events, all under one lock (so readers see all of them or none). The
// caller holds the agents' name locks, so events of one agent are queued in
// commit order, and calls deliver once it has released them.
func (r *Registry) commit(evs ...Event) {
	r.mu.Lock()
	for _, ev := range evs {
		r.commitLocked(ev)
	}
	r.mu.Unlock()
}

func (r *Registry) commitLocked(ev Event) {
	name := ev.Agent.Name
	_, existed := r.agents[name]
	if ev.Type == EventDelete {
		delete(r.agents, name)
		r.names = nil
	} else {
		// The registry's record is the one subscribers get: records are
		// replaced, never changed in place, so one copy serves them all.
		a := ev.Agent.Clone()
		r.agents[name] = &a
		ev.Agent = a
		if !existed {
			r.names = nil
		}
	}
	switch {
	case ev.Type == EventDelete && r.defaultName == name:
		r.defaultName = ""
	case ev.Type != EventDelete && ev.Agent.IsDefault:
		r.defaultName = name
	case ev.Type != EventDelete && r.defaultName == name:
		r.defaultName = ""
	}
	if len(r.subs) > 0 {
		r.seq++
		r.queue = append(r.queue, queuedEvent{seq: r.seq, ev: ev})
	}
}

// deliver hands queued events to subscribers in order. Whoever holds
// deliverMu delivers everything queued so far, so when deliver returns, the
// caller's own event has been delivered.
func (r *Registry) deliver() {
	r.deliverMu.Lock()
	defer r.deliverMu.Unlock()
	for {
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		subs := slices.Collect(maps.Values(r.subs))
		r.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, q := range batch {
			for _, s := range subs {
				if q.seq > s.after {
					s.fn(q.ev)
				}
			}
		}
	}
}

func (r *Registry) lockName(name string) (unlock func()) {
	m := &r.nameLocks[maphash.String(r.seed, name)%uint64(len(r.nameLocks))]
	m.Lock()
	return m.Unlock
}

func (r *Registry) defaultAgent() (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.defaultName, r.defaultName != ""
}

func (r *Registry) sortedNames() ([]string, error) {
	r.mu.RLock()
	names, closed := r.names, r.closed
	r.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if names != nil {
		return names, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = slices.Sorted(maps.Keys(r.agents))
	}
	return r.names, nil
}

// view is the read-path form of a stored record: a redacted copy with Stale
// computed at now.
func (r *Registry) view(a *Agent, now time.Time) Agent {
	v := a.Redacted()
	v.Stale = a.StaleAt(now)
	if v.Source != SourceFile {
		v.Owner = principal.Of(v.Owner) // stored before agents had owners
	}
	return v
}

// ownerOf returns the owner of an agent the caller ctx carries creates:
// the caller's principal, or given (the record's own Owner field) for a
// caller without one, principal.Default when that is empty too.
func ownerOf(ctx context.Context, given string) string {
	if p, ok := principal.FromContext(ctx); ok {
		return principal.Of(p.Name)
	}
	return principal.Of(given)
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

var zeroTime time.Time
