package agentmesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
	"github.com/agentmesh/agentmesh/store/sealstore"
)

// Store is what a mesh keeps in its store: the Store interface of every
// core package that persists something. [memstore.Store],
// [boltstore.Store] and the etcd store of
// [github.com/agentmesh/agentmesh/store/etcdstore] implement it.
type Store interface {
	registry.Store
	delegation.Store
	breaker.Store
	session.Store
}

var (
	_ Store = (*memstore.Store)(nil)
	_ Store = (*boltstore.Store)(nil)
)

// Options configures [Open]. A nil *Options, like the zero value of every
// field, means the documented default: a mesh in memory (nothing is
// persisted), without routing, that allows agent endpoints on private
// networks and logs nothing. Open copies the struct.
type Options struct {
	// Path is the bbolt file the mesh keeps its state in, created if
	// missing. Every process that opens the same file sees the same mesh,
	// but only one holds it at a time (bbolt's lock). "" means no file:
	// the store is Store, else a new in-memory store.
	Path string

	// LockTimeout is how long opening Path waits while another process
	// holds the file; the error then wraps [boltstore.ErrLocked]. Zero
	// means boltstore's default ([boltstore.DefaultTimeout]).
	LockTimeout time.Duration

	// Store, if set, is the store of the mesh: a store of your own, or an
	// etcd store shared by several replicas (Open does not import etcd, so
	// a host that does not use it does not link it). Setting both Store
	// and Path is an error. The store stays the caller's: [Mesh.Close]
	// does not close it; close it after the mesh.
	Store Store

	// SecretKeys, if set, seals the agents' credentials (Auth.Token) in
	// the store, whichever it is: they are written AES-256-GCM-sealed with
	// the ring's first key and read with any of its keys (see
	// [sealstore]). Nil stores them in clear. Either way a credential
	// stored in clear is read as it is, and a sealed one whose key is not
	// in the ring fails Open with an error wrapping
	// [sealstore.ErrUnknownKey] that names the agent and the key id.
	// [Mesh.Store] is the store as written, sealed values included: read
	// agents through [Mesh.Registry].
	SecretKeys *sealstore.Keyring

	// Policy is the endpoint policy of registrations and of every
	// outbound call. Nil allows endpoints on loopback and private
	// networks, as in every package, and still refuses the always-refused
	// addresses.
	Policy *netguard.Policy

	// MaxAgents caps the agents of the registry (registry.Options.MaxAgents);
	// zero means no cap.
	MaxAgents int

	// PublicURL is the base URL under which agents post the results of
	// async delegations (<PublicURL>/v1/delegations/<id>/result). Empty
	// means [delegation.DefaultPublicURL].
	PublicURL string

	// Retention is how long finished delegation records are kept. Zero
	// means [delegation.DefaultRetention].
	Retention time.Duration

	// Transports replaces, adds or (with a nil value) removes delegation
	// transports by protocol, as [delegation.Options.Transports] does. Nil
	// means the built-in transports.
	Transports map[registry.Protocol]delegation.Transport

	// Routing, if set, also builds the routing orchestrator: sessions in
	// the store, the lexical classifier following the registry (and an
	// LLM classifier in front of it when asked for), and the router
	// dispatching through the delegation client. Nil means no routing:
	// [Mesh.Router], [Mesh.Sessions] and [Mesh.Lexical] are nil. The
	// lexical classifier retrains on every registry change, which a mesh
	// of many agents that only discovers and delegates need not pay for.
	Routing *RoutingOptions

	// Observe, if set, is called once during Open, when the store, the
	// registry and the breakers exist and before the discovery engine,
	// the delegation client and the router are built: what it starts to
	// follow the mesh (metrics, an audit log) is then in place before the
	// first delegation record or routing decision. Only [Mesh.Store],
	// [Mesh.Policy], [Mesh.Registry] and [Mesh.Breakers] are set on the
	// Mesh it gets. An error fails Open. A non-nil stop is called by
	// [Mesh.Close] once every other part has stopped, just before the
	// store closes, so it can write what it still holds to the store.
	Observe func(ctx context.Context, m *Mesh) (stop func(), err error)

	// OnRegistryWrite, if set, is called after every write of the
	// registry, committed, refused or failed, as [registry.Options.OnWrite]:
	// the one place to audit changes of the registry.
	OnRegistryWrite func(ctx context.Context, w registry.Write)

	// OnBreakerChange, if set, is called with every transition of an
	// agent's circuit breaker, as [breaker.Options.OnStateChange].
	OnBreakerChange func(name string, from, to breaker.State)

	// OnRecord, if set, is called with every delegation record the mesh
	// moves to accepted or to a final status, as
	// [delegation.Options.OnRecord].
	OnRecord func(delegation.Record)

	// Logger receives the lifecycle events of the mesh and of every part
	// (store opened, routing ready, breaker states that could not be
	// restored). Nil means discard.
	Logger *slog.Logger
}

// RoutingOptions configures the routing orchestrator of [Options.Routing].
// The zero value of every field means the documented default: the
// lexical classifier, sessions of [session.DefaultTTL] and
// [session.DefaultMaxTurns], and clarification enabled.
type RoutingOptions struct {
	// LLM, if set, classifies messages with an OpenAI-compatible model in
	// front of the lexical classifier. A nil LLM.Fallback means the
	// lexical classifier, a nil LLM.Logger means [Options.Logger].
	LLM *routing.LLMOptions

	// SessionTTL is how long a session lives after its last turn. Zero
	// means [session.DefaultTTL].
	SessionTTL time.Duration

	// SessionMaxTurns caps the turns kept in a session's history. Zero
	// means [session.DefaultMaxTurns].
	SessionMaxTurns int

	// DisableClarification turns clarification off: a message below its
	// agent's threshold then falls back to the default agent.
	DisableClarification bool

	// Dispatcher, if set, returns what the router delegates through,
	// given the mesh's delegation client: a wrapper that audits or meters
	// each dispatch, as a front-end may wrap the client it serves. Nil
	// means the client itself.
	Dispatcher func(*delegation.Client) routing.Dispatcher

	// OnDecision, if set, is called with every routing decision, as
	// [routing.RouterOptions.OnDecision].
	OnDecision func(ctx context.Context, resp routing.Response, err error)

	// OnSessionClose, if set, is called once for every routing session
	// that ends — completed, abandoned, error, or expired — after the
	// store write, as [session.Options.OnClose]: it runs on the goroutine
	// that ended the session, so it should return quickly.
	OnSessionClose func(ctx context.Context, e session.CloseEvent)

	// Identity, if set, completes the identity of every routed request,
	// as [routing.RouterOptions.Identity]; OnIdentityFailure is told of
	// its failures, as [routing.RouterOptions.OnIdentityFailure]. Nil
	// means requests are routed with the identity they came with.
	Identity          routing.IdentityResolver
	OnIdentityFailure func(ctx context.Context, err error)
}

// Mesh is the core of agentmesh wired together over one store: the
// registry, the discovery engine following it, the per-agent circuit
// breakers, the delegation client and, when asked for, the routing
// orchestrator and its sessions. It has no logic of its own: use the parts
// through its accessors, and build the front-ends
// ([github.com/agentmesh/agentmesh/httpserver],
// [github.com/agentmesh/agentmesh/mcpserver],
// [github.com/agentmesh/agentmesh/a2aserver]) on them.
//
// A Mesh owns the goroutines its parts start and stops them in
// [Mesh.Shutdown] or [Mesh.Close]. It is safe for concurrent use. Create
// it with [Open]; the zero Mesh is inert: its accessors return nil and
// Close returns nil.
type Mesh struct {
	store      Store
	ownedStore interface{ Close() error } // the store Open opened, nil for Options.Store
	policy     *netguard.Policy
	reg        *registry.Registry
	breakers   *breaker.Set
	// stopBreakers stops the breakers following the other replicas'
	// transitions (etcd); a no-op for the other stores.
	stopBreakers func()
	stopObserve  func()
	engine       *discovery.Engine
	stopIndex    func()
	delegation   *delegation.Client
	sessions     *session.Manager
	lexical      *routing.Lexical
	stopLex      func()
	llm          *routing.LLM
	stopLLM      func()
	router       *routing.Router

	closeOnce sync.Once
}

// Open builds a mesh as `agentmesh serve` does: it opens the store (the
// bbolt file at opts.Path, opts.Store, or a new in-memory store), the
// registry over it with the endpoint policy, the breakers (restoring the
// states the store kept), the discovery engine (which leaves out agents
// whose breaker is open), the delegation client (which first recovers the
// delegations a previous process left running) and, with opts.Routing,
// the sessions, the classifiers and the router. A nil opts means
// defaults (see [Options]).
//
// On error, Open closes what it built and returns nil. Call [Mesh.Close]
// or [Mesh.Shutdown] when done.
func Open(ctx context.Context, opts *Options) (m *Mesh, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m = &Mesh{policy: o.Policy}
	switch {
	case o.Path != "" && o.Store != nil:
		return nil, errors.New("agentmesh: Options.Path and Options.Store are both set")
	case o.Store != nil:
		m.store = o.Store
	case o.Path != "":
		s, err := boltstore.Open(o.Path, &boltstore.Options{Logger: log, Timeout: o.LockTimeout})
		if err != nil {
			return nil, fmt.Errorf("agentmesh: open store %s: %w", o.Path, err)
		}
		log.Info("store opened", "store", "bolt", "path", o.Path)
		m.store, m.ownedStore = s, s
	default:
		s := memstore.New()
		m.store, m.ownedStore = s, s
	}
	// "return nil, err" sets m to nil before deferred calls run: close
	// what was built through its own variable.
	built := m
	defer func() {
		if err != nil {
			_ = built.Shutdown(context.Background()) // nothing is in flight yet
		}
	}()

	agents := sealstore.Wrap(m.store, o.SecretKeys, &sealstore.Options{Logger: log})
	m.reg, err = registry.New(ctx, agents, &registry.Options{Policy: o.Policy, MaxAgents: o.MaxAgents, OnWrite: o.OnRegistryWrite, Logger: log})
	if err != nil {
		return nil, err
	}
	m.breakers = breaker.NewSet(m.store, &breaker.Options{Logger: log, OnStateChange: o.OnBreakerChange})
	if err := m.breakers.Restore(ctx); err != nil {
		log.Warn("some breaker states could not be restored", "err", err)
	}
	m.stopBreakers = m.breakers.Follow()
	if o.Observe != nil {
		if m.stopObserve, err = o.Observe(ctx, m); err != nil {
			return nil, err
		}
	}
	breakers := m.breakers
	m.engine = discovery.New(&discovery.Options{
		Available: func(name string) bool { return breakers.Lookup(name).State() != breaker.StateOpen },
	})
	m.stopIndex = m.engine.Follow(m.reg)
	m.delegation, err = delegation.New(ctx, m.reg, m.store, &delegation.Options{
		OnRecord:   o.OnRecord,
		Discovery:  m.engine,
		Breakers:   m.breakers,
		Policy:     o.Policy,
		PublicURL:  o.PublicURL,
		Retention:  o.Retention,
		Transports: o.Transports,
		Logger:     log,
	})
	if err != nil {
		return nil, err
	}
	if o.Routing != nil {
		if err := m.openRouting(*o.Routing, log); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// openRouting builds the routing orchestrator: sessions over the store
// with a sweeper, the lexical classifier following the registry (and the
// LLM one in front of it when asked for), and the router dispatching
// through the delegation client with its breakers.
func (m *Mesh) openRouting(ro RoutingOptions, log *slog.Logger) error {
	var err error
	m.sessions, err = session.NewManager(m.store, &session.Options{
		TTL:      ro.SessionTTL,
		MaxTurns: ro.SessionMaxTurns,
		OnClose:  ro.OnSessionClose,
		Logger:   log,
	})
	if err != nil {
		return err
	}
	m.lexical = routing.NewLexical(&routing.LexicalOptions{Logger: log})
	m.stopLex = m.lexical.Follow(m.reg)
	var cls routing.Classifier = m.lexical
	name := "lexical"
	if ro.LLM != nil {
		lo := *ro.LLM
		if lo.Fallback == nil {
			lo.Fallback = m.lexical
		}
		if lo.Logger == nil {
			lo.Logger = log
		}
		if m.llm, err = routing.NewLLM(&lo); err != nil {
			return fmt.Errorf("agentmesh: llm classifier: %w", err)
		}
		m.stopLLM = m.llm.Follow(m.reg)
		cls, name = m.llm, "llm"
	}
	var dispatcher routing.Dispatcher = m.delegation
	if ro.Dispatcher != nil {
		dispatcher = ro.Dispatcher(m.delegation)
	}
	m.router, err = routing.New(cls, m.reg, dispatcher, m.sessions, &routing.RouterOptions{
		OnDecision:           ro.OnDecision,
		DisableClarification: ro.DisableClarification,
		Identity:             ro.Identity,
		OnIdentityFailure:    ro.OnIdentityFailure,
		Breakers:             m.breakers,
		Logger:               log,
	})
	if err != nil {
		return err
	}
	ttl := ro.SessionTTL
	if ttl <= 0 {
		ttl = session.DefaultTTL
	}
	log.Info("routing ready", "classifier", name, "session_ttl", ttl.String())
	return nil
}

// Store is the store of the mesh.
func (m *Mesh) Store() Store { return m.store }

// Policy is the endpoint policy of the mesh ([Options.Policy]); nil
// allows private endpoints. Its NewClient makes HTTP clients that honour
// it.
func (m *Mesh) Policy() *netguard.Policy { return m.policy }

// Registry is the registry of the mesh's agents.
func (m *Mesh) Registry() *registry.Registry { return m.reg }

// Breakers are the per-agent circuit breakers the delegation client, the
// discovery engine and the router share.
func (m *Mesh) Breakers() *breaker.Set { return m.breakers }

// Engine is the discovery engine, kept current from the registry.
func (m *Mesh) Engine() *discovery.Engine { return m.engine }

// Delegation is the delegation client.
func (m *Mesh) Delegation() *delegation.Client { return m.delegation }

// Sessions is the routing session manager; nil without [Options.Routing].
func (m *Mesh) Sessions() *session.Manager { return m.sessions }

// Lexical is the lexical classifier, kept trained from the registry (the
// LLM classifier's fallback when there is one); nil without
// [Options.Routing].
func (m *Mesh) Lexical() *routing.Lexical { return m.lexical }

// Router is the routing orchestrator; nil without [Options.Routing].
func (m *Mesh) Router() *routing.Router { return m.router }

// Shutdown stops the mesh: delegations in flight are given until ctx is
// done to finish (see [delegation.Client.Shutdown]), then every part is
// closed in the reverse order of opening — router, classifiers, sessions,
// delegation client, discovery engine, registry, breakers, what
// [Options.Observe] started — and last the store, if Open opened it. It
// returns the errors of the delegation client, the registry and the
// store, joined.
//
// Shutdown is idempotent and safe for concurrent use; a later call waits
// for the first to finish and returns nil.
func (m *Mesh) Shutdown(ctx context.Context) error {
	var err error
	m.closeOnce.Do(func() { err = m.shutdown(ctx, true) })
	return err
}

// Close is [Mesh.Shutdown] without a grace period: delegations in flight
// are interrupted at once (see [delegation.Client.Close]). It is
// idempotent and safe for concurrent use.
func (m *Mesh) Close() error {
	var err error
	m.closeOnce.Do(func() { err = m.shutdown(context.Background(), false) })
	return err
}

// shutdown closes the parts; without grace, delegations in flight are
// interrupted at once, else they have until ctx is done.
func (m *Mesh) shutdown(ctx context.Context, grace bool) error {
	var errs []error
	if m.router != nil {
		_ = m.router.Close()
	}
	if m.stopLLM != nil {
		m.stopLLM()
	}
	if m.llm != nil {
		_ = m.llm.Close()
	}
	if m.stopLex != nil {
		m.stopLex()
	}
	if m.lexical != nil {
		_ = m.lexical.Close()
	}
	if m.sessions != nil {
		_ = m.sessions.Close()
	}
	switch {
	case m.delegation == nil:
	case !grace:
		errs = append(errs, m.delegation.Close())
	default:
		errs = append(errs, m.delegation.Shutdown(ctx))
	}
	if m.stopIndex != nil {
		m.stopIndex()
	}
	if m.reg != nil {
		errs = append(errs, m.reg.Close())
	}
	if m.stopBreakers != nil {
		m.stopBreakers()
	}
	if m.stopObserve != nil {
		m.stopObserve()
	}
	if m.ownedStore != nil {
		errs = append(errs, m.ownedStore.Close())
	}
	return errors.Join(errs...)
}
