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

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/etcdstore"
	"github.com/agentmesh/agentmesh/store/sealstore"
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
	// Router) over every agent of the registry, whatever its source.
	// `serve --routing=false` turns it off.
	withRouting bool
	// metrics is where the metrics of docs/OPERATIONS.md are registered (`serve`);
	// nil means none (the stdio MCP server).
	metrics *prometheus.Registry
	// audit keeps the audit log in the store (`serve`).
	audit bool
	// identity is the identity flags; identities the resolution built
	// from them once per process (newIdentities), nil for none.
	identity   identityConfig
	identities *identities
	// etcdEndpoints are the etcd client URLs of --store etcd,
	// comma-separated (--etcd-endpoints).
	etcdEndpoints string
	// etcd is how the etcd client authenticates: TLS and a user.
	etcd etcdAuthConfig
	// maxAgents caps the registry (--max-agents); 0 means no cap.
	maxAgents int
	// lockTimeout is how long opening the bbolt file waits for its lock;
	// 0 means boltstore's default (1 s).
	lockTimeout time.Duration
	// delegationRetention is how long finished delegation records are
	// kept (--delegation-retention); 0 means the default, 7 days.
	delegationRetention time.Duration
	// webhook posts every session that ends (`serve --session-webhook`).
	webhook webhookConfig
	// secrets is where the key ring sealing the agents' credentials
	// comes from (seal.go); secretKeys the ring loadSecretKeys read from
	// it once per process, nil for credentials in clear.
	secrets    secretConfig
	secretKeys *sealstore.Keyring
}

// routingConfig configures the routing orchestrator.
type routingConfig struct {
	classifier      string // lexical | llm
	llmBaseURL      string
	llmModel        string
	llmAPIKey       string // AGENTMESH_LLM_API_KEY only, never a flag
	sessionTTL      time.Duration
	sessionMaxTurns int
	clarification   bool
}

// privateHint ends the refusal of a private endpoint: the flag that allows
// them.
const privateHint = "set --allow-private-endpoints to allow"

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
	f.String(&cfg.etcd.caFile, "etcd-ca", "MESH_ETCD_CA", "", "PEM CA certificates verifying the etcd servers (TLS to etcd; default the system roots)")
	f.String(&cfg.etcd.certFile, "etcd-cert", "MESH_ETCD_CERT", "", "PEM client certificate presented to etcd, with --etcd-key")
	f.String(&cfg.etcd.keyFile, "etcd-key", "MESH_ETCD_KEY", "", "PEM private key of --etcd-cert")
	f.String(&cfg.etcd.username, "etcd-username", "MESH_ETCD_USERNAME", "", "etcd user (etcd auth enabled); the password is read from MESH_ETCD_PASSWORD only")
	secretFlags(f, &cfg.secrets)
}

// policyFlags declares the endpoint policy flags of both servers;
// allowPrivate is the default of --allow-private-endpoints.
func policyFlags(f *flags, cfg *meshConfig, allowHosts *string, allowPrivate bool) {
	f.Bool(&cfg.allowPrivate, "allow-private-endpoints", "MESH_ALLOW_PRIVATE_ENDPOINTS", allowPrivate, "allow agent endpoints on loopback and private networks")
	f.String(allowHosts, "allow-endpoint-hosts", "MESH_ALLOW_ENDPOINT_HOSTS", "", "host names, *.suffix wildcards or CIDRs allowed even when private, comma-separated")
}

// retentionFlag declares --delegation-retention, a flag of both
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

// mesh is the library as agentmesh.Open wires it, with what the binary
// adds: the observer feeding the metrics and the audit log from the
// library's hooks, and the etcd store, which Open leaves to its caller.
// Stop it with close, not with the Mesh's own Close.
type mesh struct {
	*agentmesh.Mesh
	obs  *observer // metrics and audit log (observe.go)
	etcd *etcdstore.Store
	// events is the feed of GET /v1/events (the dashboard's live
	// updates): the registry's changes, breaker transitions and finished
	// delegations. stopEvents ends the registry's subscription.
	events     *httpserver.Events
	stopEvents func()
	// breakerLog is the breakers' recent transitions, per agent, for GET
	// /v1/agents/{name}/breaker (the dashboard's agent page).
	breakerLog *activity.Breakers
	// activity is the recent routing decisions and the delegations per
	// minute, for the dashboard's Routing page and charts (activity.go).
	activity *dashboardActivity
}

// openMesh opens the mesh cfg describes: the store it names (the bbolt
// file by default), and routing when cfg.withRouting is set.
func openMesh(ctx context.Context, cfg meshConfig) (*mesh, error) {
	if err := cfg.routing.check(); err != nil {
		return nil, err
	}
	policy, err := netguard.NewPolicy(netguard.Options{AllowPrivate: cfg.allowPrivate, AllowHosts: cfg.allowHosts, Hint: privateHint})
	if err != nil {
		return nil, fmt.Errorf("--allow-endpoint-hosts: %w", err)
	}
	m := &mesh{obs: &observer{log: cfg.log}, events: httpserver.NewEvents(nil), stopEvents: func() {},
		breakerLog: activity.NewBreakers(nil)}
	m.activity = newDashboardActivity(m.events)
	opts := &agentmesh.Options{
		LockTimeout:     cfg.lockTimeout,
		MaxAgents:       cfg.maxAgents,
		Policy:          policy,
		SecretKeys:      cfg.secretKeys,
		PublicURL:       cfg.publicURL,
		Retention:       cfg.delegationRetention,
		Observe:         m.observe(cfg),
		OnRegistryWrite: m.obs.registryWrote,
		OnBreakerChange: m.breakerChanged,
		OnRecord:        m.delegationRecorded,
		Logger:          cfg.log,
	}
	switch cfg.store {
	case "", "bolt":
		if opts.Path, err = dbPath(cfg.db); err != nil {
			return nil, err
		}
	case "memory":
		cfg.log.Warn("memory store: nothing is persisted")
	case "etcd":
		if m.etcd, err = openEtcd(ctx, cfg); err != nil {
			return nil, err
		}
		opts.Store = m.etcd
	default:
		return nil, fmt.Errorf("--store %q: must be bolt, memory or etcd", cfg.store)
	}
	if cfg.withRouting {
		opts.Routing = m.routingOptions(cfg.routing)
		if ids := cfg.identities; ids != nil {
			opts.Routing.Identity, opts.Routing.OnIdentityFailure = ids.resolver, ids.failed
		}
	}
	if m.Mesh, err = agentmesh.Open(ctx, opts); err != nil {
		if m.obs.webhook != nil {
			_ = m.obs.webhook.Close()
		}
		if m.etcd != nil {
			_ = m.etcd.Close()
		}
		return nil, err
	}
	_, m.stopEvents = m.Registry().Subscribe(m.registryChanged)
	return m, nil
}

// breakerChanged is agentmesh.Options.OnBreakerChange: audited, kept in
// the agent's breaker history and published to the event feed.
func (m *mesh) breakerChanged(name string, from, to breaker.State) {
	m.obs.breakerChanged(name, from, to)
	m.breakerLog.Record(name, from, to)
	_ = m.events.Publish("breaker.changed", map[string]string{"name": name, "from": from.String(), "to": to.String()}, "")
}

// delegationRecorded is agentmesh.Options.OnRecord: observed, and a
// finished delegation published to the event feed for its principal (and
// admins), who alone may read its record.
func (m *mesh) delegationRecorded(rec delegation.Record) {
	m.obs.delegationRecorded(rec)
	m.activity.delegationEnded(rec)
	if rec.Status.Final() {
		_ = m.events.Publish("delegation.finished", map[string]string{"id": rec.ID, "targetAgent": rec.TargetAgent, "status": string(rec.Status)}, rec.Principal)
	}
}

// registryChanged publishes the registry's changes to the event feed
// (not heartbeats: the dashboard refreshes ages on its own).
func (m *mesh) registryChanged(ev registry.Event) {
	var typ string
	switch {
	case ev.Type == registry.EventPut && ev.Created:
		typ = "agent.registered"
	case ev.Type == registry.EventPut:
		typ = "agent.updated"
	case ev.Type == registry.EventDelete:
		typ = "agent.removed"
	default:
		return
	}
	_ = m.events.Publish(typ, map[string]string{"name": ev.Agent.Name}, "")
}

// openEtcd opens the etcd store of --store etcd.
func openEtcd(ctx context.Context, cfg meshConfig) (*etcdstore.Store, error) {
	endpoints := splitList(cfg.etcdEndpoints)
	if len(endpoints) == 0 {
		return nil, errors.New("--store etcd needs --etcd-endpoints (MESH_ETCD_ENDPOINTS)")
	}
	opts, err := cfg.etcd.options(endpoints)
	if err != nil {
		return nil, err
	}
	if opts.Password != "" && opts.TLS == nil && !allHTTPS(endpoints) {
		cfg.log.Warn("the etcd password is sent in clear: give --etcd-ca or https:// endpoints for TLS to etcd")
	}
	opts.Logger = cfg.log
	s, err := etcdstore.Open(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cfg.log.Info("store opened", "store", "etcd", "endpoints", endpoints, "prefix", etcdstore.DefaultPrefix)
	return s, nil
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

// observe is agentmesh.Options.Observe: the metrics and the audit log
// start once the registry and the breakers exist, and write their last
// entries when everything else has stopped.
func (m *mesh) observe(cfg meshConfig) func(context.Context, *agentmesh.Mesh) (func(), error) {
	return func(_ context.Context, core *agentmesh.Mesh) (func(), error) {
		if err := m.obs.start(cfg.metrics, cfg.audit, core.Store(), core.Registry(), core.Breakers()); err != nil {
			m.obs.close()
			return nil, err
		}
		if err := m.obs.startSessionEvents(cfg.metrics, cfg.webhook, core.Policy(), cfg.withRouting); err != nil {
			m.obs.close()
			return nil, err
		}
		return m.obs.close, nil
	}
}

// routingOptions are the routing options of rc: the router dispatches
// through the audited delegation client, and its decisions are observed.
func (m *mesh) routingOptions(rc routingConfig) *agentmesh.RoutingOptions {
	ro := &agentmesh.RoutingOptions{
		SessionTTL:           rc.sessionTTL,
		SessionMaxTurns:      rc.sessionMaxTurns,
		DisableClarification: !rc.clarification,
		Dispatcher: func(c *delegation.Client) routing.Dispatcher {
			return auditedDelegations{Client: c, obs: m.obs}
		},
		OnDecision:     m.routed, // observed and kept for the dashboard (activity.go)
		OnSessionClose: m.obs.sessionClosed,
	}
	if rc.classifier == "llm" {
		ro.LLM = &routing.LLMOptions{BaseURL: rc.llmBaseURL, Model: rc.llmModel, APIKey: rc.llmAPIKey}
	}
	return ro
}

// close drains in-flight delegations until ctx is done, then closes
// everything in reverse order of opening, then delivers the session
// events still queued for the webhook until ctx is done, the etcd store
// last.
func (m *mesh) close(ctx context.Context) error {
	m.stopEvents()
	m.events.Close()
	err := m.Shutdown(ctx)
	m.obs.drainWebhook(ctx)
	if m.etcd != nil {
		err = errors.Join(err, m.etcd.Close())
	}
	return err
}

// errLearning is what /health/ready waits for while the router learns its
// first agents.
var errLearning = errors.New("the router is still learning the agents")

// ready is httpserver.Options.Ready: the store is open and the registry
// loaded once the mesh exists; with routing on, the router must also have
// learned its agents.
func (m *mesh) ready(context.Context) error {
	if lex := m.Lexical(); lex != nil && !lex.Ready() {
		return errLearning
	}
	return nil
}
