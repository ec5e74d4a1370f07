package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/etcdstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// store is what the mesh needs from a storage backend: every consumer
// package's Store interface, and Close.
type store interface {
	registry.Store
	delegation.Store
	breaker.Store
	session.Store
	Close() error
}

var (
	_ store = (*boltstore.Store)(nil)
	_ store = (*memstore.Store)(nil)
	_ store = (*etcdstore.Store)(nil)
)

// meshConfig is the configuration shared by `serve` and the stdio MCP
// server.
type meshConfig struct {
	store        string // bolt | memory | etcd
	db           string
	allowPrivate bool
	allowHosts   []string
	publicURL    string
	log          *slog.Logger
	routing      routingConfig
	// withRouting builds the routing orchestrator (sessions, classifier,
	// Router). `serve` enables it only with --agents (SPEC 2.2: routing is
	// enabled by the agent directory): the lexical classifier retrains on
	// every registry change, which a discovery-only mesh of thousands of
	// API-registered agents should not pay for.
	withRouting bool
	// metrics is where the metrics of SPEC 11 are registered (`serve`);
	// nil means none (the stdio MCP server).
	metrics *prometheus.Registry
	// audit keeps the audit log of SPEC 11 in the store (`serve`).
	audit bool
	// etcdEndpoints are the etcd client URLs of --store etcd,
	// comma-separated (--etcd-endpoints).
	etcdEndpoints string
	// lockTimeout is how long opening the bbolt file waits for its lock;
	// 0 means boltstore's default (1 s).
	lockTimeout time.Duration
	// delegationRetention is how long finished delegation records are
	// kept (--delegation-retention); 0 means the default, 7 days.
	delegationRetention time.Duration
}

// routingConfig configures the routing orchestrator (SPEC 5, 8).
type routingConfig struct {
	classifier      string // lexical | llm
	llmBaseURL      string
	llmModel        string
	llmAPIKey       string // AGENTMESH_LLM_API_KEY only, never a flag
	sessionTTL      time.Duration
	sessionMaxTurns int
	clarification   bool
}

// sessionSweepInterval is how often expired sessions are deleted.
const sessionSweepInterval = time.Minute

// routingFlags defines the routing flags on f.
func routingFlags(f *flags, cfg *routingConfig) {
	f.String(&cfg.classifier, "classifier", "MESH_CLASSIFIER", "lexical", "routing classifier: lexical (local, no network) or llm (an OpenAI-compatible endpoint, lexical fallback); the API key is read from AGENTMESH_LLM_API_KEY")
	f.String(&cfg.llmBaseURL, "llm-base-url", "AGENTMESH_LLM_BASE_URL", "", "API root of the OpenAI-compatible chat-completions endpoint (with --classifier llm), e.g. http://localhost:11434/v1")
	f.String(&cfg.llmModel, "llm-model", "AGENTMESH_LLM_MODEL", "", "model name for --classifier llm")
	f.Duration(&cfg.sessionTTL, "session-ttl", "MESH_SESSION_TTL", session.DefaultTTL, "how long a routing session lives after its last turn")
	f.Int(&cfg.sessionMaxTurns, "session-max-turns", "MESH_SESSION_MAX_TURNS", session.DefaultMaxTurns, "turns kept in a session's history (oldest dropped)")
	f.Bool(&cfg.clarification, "clarification", "MESH_CLARIFICATION", true, "ask a clarification question when an agent that requires it is not confidently matched (else fall back to the default agent)")
}

// check validates the routing configuration.
func (c routingConfig) check() error {
	switch c.classifier {
	case "", "lexical":
	case "llm":
		if c.llmBaseURL == "" || c.llmModel == "" {
			return errors.New("--classifier llm needs --llm-base-url and --llm-model")
		}
	default:
		return fmt.Errorf("--classifier %q: must be lexical or llm", c.classifier)
	}
	if c.sessionTTL < 0 {
		return fmt.Errorf("--session-ttl %s: must be positive", c.sessionTTL)
	}
	if c.sessionMaxTurns < 0 {
		return fmt.Errorf("--session-max-turns %d: must be positive", c.sessionMaxTurns)
	}
	return nil
}

// storeFlags declares the store flags of both servers.
func storeFlags(f *flags, cfg *meshConfig) {
	f.String(&cfg.db, "db", "AGENTMESH_DB", "", "bbolt store file (default ~/.agentmesh/mesh.db); every agentmesh on the same file shares one mesh")
	f.String(&cfg.store, "store", "MESH_STORE", "bolt", "store backend: bolt, memory or etcd")
	f.String(&cfg.etcdEndpoints, "etcd-endpoints", "MESH_ETCD_ENDPOINTS", "", "etcd client URLs, comma-separated (with --store etcd), e.g. http://10.0.0.1:2379")
}

// policyFlags declares the endpoint policy flags of both servers;
// allowPrivate is the default of --allow-private-endpoints.
func policyFlags(f *flags, cfg *meshConfig, allowHosts *string, allowPrivate bool) {
	f.Bool(&cfg.allowPrivate, "allow-private-endpoints", "MESH_ALLOW_PRIVATE_ENDPOINTS", allowPrivate, "allow agent endpoints on loopback and private networks")
	f.String(allowHosts, "allow-endpoint-hosts", "MESH_ALLOW_ENDPOINT_HOSTS", "", "host names, *.suffix wildcards or CIDRs allowed even when private, comma-separated")
}

// retentionFlag declares --delegation-retention (SPEC 4.4), a flag of both
// servers: each keeps delegation records in its store.
func retentionFlag(f *flags, cfg *meshConfig) {
	f.Duration(&cfg.delegationRetention, "delegation-retention", "MESH_DELEGATION_RETENTION", delegation.DefaultRetention,
		"how long finished delegation records are kept (and at most 100,000 of them)")
}

// checkRetention refuses a retention that would keep nothing.
func (cfg *meshConfig) checkRetention() error {
	if cfg.delegationRetention <= 0 {
		return fmt.Errorf("--delegation-retention must be positive, got %s", cfg.delegationRetention)
	}
	return nil
}

// mesh is the library wired together: one store, the registry, the
// discovery index following it, the breakers and the delegation client.
type mesh struct {
	policy     *netguard.Policy // the endpoint policy of every outbound call
	store      store
	reg        *registry.Registry
	engine     *discovery.Engine
	breakers   *breaker.Set
	delegation *delegation.Client
	stopIndex  func()
	// stopBreakers stops the breakers following the other replicas'
	// transitions (etcd); a no-op for the other stores.
	stopBreakers func()

	sessions *session.Manager
	lexical  *routing.Lexical
	stopLex  func()
	llm      *routing.LLM
	stopLLM  func()
	router   *routing.Router

	obs *observer // metrics and audit log (observe.go)
}

// openStore opens the store backend cfg names.
func openStore(ctx context.Context, cfg meshConfig) (store, error) {
	kind, db, log := cfg.store, cfg.db, cfg.log
	switch kind {
	case "", "bolt":
		path, err := dbPath(db)
		if err != nil {
			return nil, err
		}
		s, err := boltstore.Open(path, &boltstore.Options{Logger: log, Timeout: cfg.lockTimeout})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
		log.Info("store opened", "store", "bolt", "path", path)
		return s, nil
	case "memory":
		log.Warn("memory store: nothing is persisted")
		return memstore.New(), nil
	case "etcd":
		endpoints := splitList(cfg.etcdEndpoints)
		if len(endpoints) == 0 {
			return nil, errors.New("--store etcd needs --etcd-endpoints (MESH_ETCD_ENDPOINTS)")
		}
		s, err := etcdstore.Open(ctx, &etcdstore.Options{Endpoints: endpoints, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		log.Info("store opened", "store", "etcd", "endpoints", endpoints, "prefix", etcdstore.DefaultPrefix)
		return s, nil
	default:
		return nil, fmt.Errorf("--store %q: must be bolt, memory or etcd", kind)
	}
}

// dbPath is --db, else $AGENTMESH_DB (already applied to the flag), else
// ~/.agentmesh/mesh.db.
func dbPath(db string) (string, error) {
	if db != "" {
		return db, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --db given and no home directory: %w", err)
	}
	return filepath.Join(home, ".agentmesh", "mesh.db"), nil
}

func openMesh(ctx context.Context, cfg meshConfig) (m *mesh, err error) {
	if err := cfg.routing.check(); err != nil {
		return nil, err
	}
	policy, err := netguard.NewPolicy(netguard.Options{AllowPrivate: cfg.allowPrivate, AllowHosts: cfg.allowHosts})
	if err != nil {
		return nil, fmt.Errorf("--allow-endpoint-hosts: %w", err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m = &mesh{store: st, policy: policy, obs: &observer{log: cfg.log}}
	// "return nil, err" sets m to nil before deferred calls run: close
	// what was built through its own variable.
	built := m
	defer func() {
		if err != nil {
			built.close(context.Background())
		}
	}()

	m.reg, err = registry.New(ctx, st, &registry.Options{Policy: policy, Logger: cfg.log})
	if err != nil {
		return nil, err
	}
	m.breakers = breaker.NewSet(st, &breaker.Options{Logger: cfg.log, OnStateChange: m.obs.breakerChanged})
	if err := m.breakers.Restore(ctx); err != nil {
		cfg.log.Warn("some breaker states could not be restored", "err", err)
	}
	m.stopBreakers = m.breakers.Follow()
	if err := m.obs.start(cfg.metrics, cfg.audit, st, m.reg, m.breakers); err != nil {
		return nil, err
	}
	m.engine = discovery.New(&discovery.Options{
		Available: func(name string) bool { return m.breakers.Lookup(name).State() != breaker.StateOpen },
	})
	m.stopIndex = m.engine.Follow(m.reg)
	m.delegation, err = delegation.New(ctx, m.reg, st, &delegation.Options{
		OnRecord:  m.obs.delegationRecorded,
		Discovery: m.engine,
		Breakers:  m.breakers,
		Policy:    policy,
		PublicURL: cfg.publicURL,
		Retention: cfg.delegationRetention,
		Logger:    cfg.log,
	})
	if err != nil {
		return nil, err
	}
	if !cfg.withRouting {
		return m, nil
	}
	if err := m.openRouting(cfg); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *mesh) sessionsTTL(rc routingConfig) time.Duration {
	if rc.sessionTTL > 0 {
		return rc.sessionTTL
	}
	return session.DefaultTTL
}

// openRouting builds the routing orchestrator: sessions over the store
// with a sweeper, the lexical classifier following the registry (and the
// llm one in front of it when chosen), and the Router dispatching through
// the delegation client with its breakers.
func (m *mesh) openRouting(cfg meshConfig) error {
	rc := cfg.routing
	var err error
	m.sessions, err = session.NewManager(m.store, &session.Options{
		TTL:           rc.sessionTTL,
		MaxTurns:      rc.sessionMaxTurns,
		SweepInterval: sessionSweepInterval,
		Logger:        cfg.log,
	})
	if err != nil {
		return err
	}
	m.lexical = routing.NewLexical(&routing.LexicalOptions{Logger: cfg.log})
	m.stopLex = m.lexical.Follow(m.reg)
	var cls routing.Classifier = m.lexical
	if rc.classifier == "llm" {
		m.llm, err = routing.NewLLM(&routing.LLMOptions{
			BaseURL:  rc.llmBaseURL,
			Model:    rc.llmModel,
			APIKey:   rc.llmAPIKey,
			Fallback: m.lexical,
			Logger:   cfg.log,
		})
		if err != nil {
			return fmt.Errorf("--classifier llm: %w", err)
		}
		m.stopLLM = m.llm.Follow(m.reg)
		cls = m.llm
	}
	m.router, err = routing.New(cls, m.reg, m.delegator(), m.sessions, &routing.RouterOptions{
		OnDecision:           m.obs.routed,
		DisableClarification: !rc.clarification,
		Breakers:             m.breakers,
		Logger:               cfg.log,
	})
	if err != nil {
		return err
	}
	name := rc.classifier
	if name == "" {
		name = "lexical"
	}
	cfg.log.Info("routing ready", "classifier", name, "session_ttl", m.sessionsTTL(rc).String())
	return nil
}

// close drains in-flight delegations until ctx is done, then closes
// everything in reverse order of opening.
func (m *mesh) close(ctx context.Context) error {
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
	if m.delegation != nil {
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
	m.obs.close() // the audit log's last entries, before the store closes
	errs = append(errs, m.store.Close())
	return errors.Join(errs...)
}
