package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/localsock"
	"github.com/agentmesh/agentmesh/internal/redact"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/ui"
)

const serveSynopsis = `agentmesh serve [flags]

Runs the HTTP control plane with MCP Streamable HTTP at /mcp, the
mesh as one A2A agent at /a2a (its card at /.well-known/agent-card.json),
the web dashboard at /ui/, /health and /metrics. Authentication: MESH_TOKEN (one token with every
scope) and/or --tokens-file; with neither, a token is generated and printed
once to stderr. With --tls-cert and --tls-key the port serves HTTPS only.
With no --addr or --port (nor MESH_ADDR, MESH_PORT), $PORT, as PaaS
platforms set it, is the port.`

type serveConfig struct {
	mesh            meshConfig
	addr            string
	port            int
	allowHosts      string
	tokensFile      string
	rateLimit       string
	trustedProxies  string
	corsOrigins     string
	metricsAddr     string
	pprof           pprofConfig
	shutdownTimeout time.Duration
	logLevel        string
	logFormat       string
	agentsDir       string
	routing         bool
	ui              bool
	tls             tlsConfig
	conns           connConfig
}

func serveFlags(cfg *serveConfig, stderr io.Writer) *flags {
	f := newFlags("serve", serveSynopsis, stderr)
	f.String(&cfg.addr, "addr", "MESH_ADDR", ":8766", "listen address")
	f.Int(&cfg.port, "port", "MESH_PORT", 0, "listen port (replaces the port of --addr when set)")
	storeFlags(f, &cfg.mesh)
	f.String(&cfg.agentsDir, "agents", "AGENT_REGISTRY_DIR", "", "YAML agent directory (one agent per *.yaml file); reloaded on change, SIGHUP and POST /v1/admin/reload")
	policyFlags(f, &cfg.mesh, &cfg.allowHosts, false)
	f.String(&cfg.mesh.publicURL, "public-url", "MESH_PUBLIC_URL", "", "public base URL for async callbacks (default http://localhost:<port>, https:// with --tls-cert)")
	f.String(&cfg.tokensFile, "tokens-file", "MESH_TOKENS_FILE", "", "YAML list of {name, token_sha256 | token, scopes}; reloaded on SIGHUP and POST /v1/admin/reload")
	f.String(&cfg.rateLimit, "rate-limit", "MESH_RATE_LIMIT", "off", `request budget per token, e.g. "100/15m"; "off" for none`)
	f.String(&cfg.trustedProxies, "trusted-proxies", "MESH_TRUSTED_PROXIES", "", "reverse proxies (CIDRs or addresses, comma-separated) whose X-Forwarded-For/Forwarded name the client; by default the headers are ignored")
	f.String(&cfg.corsOrigins, "cors-origin", "MESH_CORS_ORIGIN", httpserver.DefaultCORSOrigin, "browser origins allowed by CORS, comma-separated (never *)")
	f.String(&cfg.metricsAddr, "metrics-addr", "MESH_METRICS_ADDR", "", "serve /metrics on this address instead of the main port (plain HTTP, even with --tls-cert)")
	pprofFlags(f, &cfg.pprof)
	retentionFlag(f, &cfg.mesh)
	f.Int(&cfg.mesh.maxAgents, "max-agents", "MESH_MAX_AGENTS", 0, "most agents the registry holds; a registration that would create one more is refused (409 conflict); 0 means no limit")
	f.String(&cfg.mesh.webhook.url, "session-webhook", "MESH_SESSION_WEBHOOK", "", "POST every routing session that ends, as JSON signed with HMAC-SHA256, to this URL (the secret from MESH_SESSION_WEBHOOK_SECRET); set it in the env if the URL holds a token")
	f.Duration(&cfg.shutdownTimeout, "shutdown-timeout", "MESH_SHUTDOWN_TIMEOUT", 15*time.Second, "on SIGTERM/SIGINT, how long in-flight requests and delegations may finish")
	f.String(&cfg.logLevel, "log-level", "MESH_LOG_LEVEL", "info", "debug, info, warn or error")
	f.String(&cfg.logFormat, "log-format", "MESH_LOG_FORMAT", "", "json or text (default: text on a terminal, else json)")
	f.Bool(&cfg.routing, "routing", "MESH_ROUTING", true, "route messages (POST /v1/request, mesh_route, handle_message) to every registered agent, whatever its source; false serves discovery and delegation only")
	f.Bool(&cfg.ui, "ui", "MESH_UI", true, "serve the web dashboard at /ui/ (the page needs no token; the data it shows needs a token with the read scope); false leaves /ui/ out")
	routingFlags(f, &cfg.mesh.routing)
	identityFlags(f, &cfg.mesh.identity)
	tlsFlags(f, &cfg.tls)
	connFlags(f, &cfg.conns)
	return f
}

// runServe runs `agentmesh serve` until ctx is cancelled (a signal).
func runServe(ctx context.Context, args []string, env func(string) string, stderr io.Writer) int {
	var cfg serveConfig
	f := serveFlags(&cfg, stderr)
	if err := f.parse(args, env); err != nil {
		return usageError(stderr, err)
	}
	if f.fs.NArg() > 0 {
		return usageError(stderr, fmt.Errorf("serve takes no arguments, got %q", f.fs.Args()))
	}
	if err := applyPORT(&cfg, f, env); err != nil {
		return usageError(stderr, err)
	}
	if err := cfg.mesh.checkRetention(); err != nil {
		return usageError(stderr, err)
	}
	if cfg.mesh.maxAgents < 0 {
		return usageError(stderr, fmt.Errorf("--max-agents must be 0 (no limit) or more, got %d", cfg.mesh.maxAgents))
	}
	if err := cfg.tls.check(); err != nil {
		return usageError(stderr, err)
	}
	if err := cfg.conns.check(); err != nil {
		return usageError(stderr, err)
	}
	if err := cfg.pprof.check(); err != nil {
		return usageError(stderr, err)
	}
	log, err := newLogger(stderr, cfg.logLevel, cfg.logFormat, "json")
	if err != nil {
		return usageError(stderr, err)
	}
	if err := serve(ctx, cfg, env, log, stderr); err != nil {
		log.Error("agentmesh serve failed", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg serveConfig, env func(string) string, log *slog.Logger, stderr io.Writer) error {
	addr := cfg.addr
	if cfg.port != 0 {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = ""
		}
		addr = net.JoinHostPort(host, strconv.Itoa(cfg.port))
	}
	limit, err := httpserver.ParseRateLimit(cfg.rateLimit)
	if err != nil {
		return fmt.Errorf("--rate-limit: %w", err)
	}
	trusted, err := httpserver.ParseTrustedProxies(cfg.trustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	tokens, err := readTokens(cfg.tokensFile)
	if err != nil {
		return err
	}
	meshToken := env("MESH_TOKEN")
	if meshToken == "" && len(tokens) == 0 {
		meshToken = httpserver.GenerateToken()
		fmt.Fprintf(stderr, "agentmesh: no MESH_TOKEN or --tokens-file given; generated a token for this run (shown once):\n\n    %s\n\n", meshToken)
	}

	var tlsSrv *serverTLS // nil for plain HTTP
	if cfg.tls.enabled() {
		if tlsSrv, err = newServerTLS(cfg.tls); err != nil {
			return err
		}
		if cfg.tls.clientCA != "" && cfg.tokensFile == "" {
			log.Warn("--tls-client-ca without --tokens-file: no client certificate names a token, so none authenticates")
		}
	}

	stopTracing, err := setupTracing(ctx, env, log)
	if err != nil {
		return err
	}
	defer stopTracing() // last: flushes the spans of the shutdown too
	stopPprof, err := startPprof(cfg.pprof, log)
	if err != nil {
		return err
	}
	defer stopPprof(context.Background())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	cfg.mesh.allowHosts = splitList(cfg.allowHosts)
	if cfg.mesh.publicURL == "" {
		scheme := "http://"
		if tlsSrv != nil {
			scheme = "https://"
		}
		cfg.mesh.publicURL = scheme + "localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	cfg.mesh.log = log
	// One registry for the HTTP metrics and the mesh's, with
	// the Go runtime and process collectors; the audit log in the store.
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.mesh.metrics, cfg.mesh.audit = promReg, true
	cfg.mesh.webhook.secret = env("MESH_SESSION_WEBHOOK_SECRET")
	if err := cfg.mesh.webhook.check(); err != nil {
		return err
	}
	cfg.mesh.withRouting = cfg.routing
	cfg.mesh.routing.llmAPIKey = env("AGENTMESH_LLM_API_KEY")
	cfg.mesh.etcd.password = env("MESH_ETCD_PASSWORD")
	if cfg.mesh.secretKeys, err = loadSecretKeys(cfg.mesh, env); err != nil {
		return err
	}
	if cfg.mesh.identities, err = newIdentities(cfg.mesh.identity, cfg.mesh, promReg, log); err != nil {
		return err
	}
	shared := cfg.mesh.store == "" || cfg.mesh.store == "bolt"
	shared = shared && localsock.Supported()
	var m *mesh
	if shared {
		if cfg.mesh.db, err = absDBPath(cfg.mesh.db); err != nil {
			return err
		}
		m, err = openSharedMesh(ctx, cfg.mesh)
	} else {
		m, err = openMesh(ctx, cfg.mesh)
	}
	if err != nil {
		return err
	}
	// The calls of the other agentmesh processes on this store arrive on
	// its socket with a token of their own (local.go).
	var extra []httpserver.Token
	var localSecret string
	if shared {
		localSecret = httpserver.GenerateToken()
		extra = append(extra, localToken(localSecret))
	}
	var agents *registry.DirWatcher // nil without --agents
	if cfg.agentsDir != "" {
		if agents, err = watchAgents(ctx, m, cfg.agentsDir, env, log); err != nil {
			m.close(context.Background())
			return err
		}
		defer agents.Close()
	}

	// A reload (SIGHUP, POST /v1/admin/reload) reloads the agent
	// directory, the tokens, the identities file and the TLS certificate;
	// each is all-or-nothing on its own.
	var reloadMu sync.Mutex
	var lastTokensErr error
	var srv *httpserver.Server
	reload := func(ctx context.Context) (any, error) {
		reloadMu.Lock()
		defer reloadMu.Unlock()
		report := map[string]any{}
		var agentsErr error
		if agents != nil {
			report["agents"], agentsErr = agents.Reload(ctx)
		}
		list, err := readTokens(cfg.tokensFile)
		if err == nil {
			err = srv.SetTokens(append(list, extra...))
		}
		lastTokensErr = err
		if err == nil {
			report["tokens"] = len(list)
		}
		var identitiesErr error
		if cfg.mesh.identity.file != "" {
			report["identities"], identitiesErr = cfg.mesh.identities.reload()
		}
		var tlsErr error
		if tlsSrv != nil {
			report["tls"], tlsErr = tlsSrv.reload()
		}
		return report, errors.Join(agentsErr, err, identitiesErr, tlsErr)
	}
	opts := &httpserver.Options{
		Token:          meshToken,
		Tokens:         append(tokens, extra...),
		RateLimit:      limit,
		TrustedProxies: trusted,
		CertIdentity:   cfg.tls.certIdentity(),
		CORSOrigins:    splitList(cfg.corsOrigins),
		PublicURL:      cfg.mesh.publicURL,
		Logger:         log,
		NoMetricsRoute: cfg.metricsAddr != "",
		Metrics:        promReg,
		MetricsToken:   cfg.conns.metricsToken,
		Audit:          m.obs.auditLog(),
		StorePing:      httpserver.PingStore(m.Store()),
		Ready:          m.ready,
		Breakers:       m.Breakers(),
		Reload:         reload,
		CardClient:     m.Policy().NewClient(nil), // POST /v1/agents/import
		AgentCard:      a2acard.MeshCard(cfg.mesh.publicURL, buildinfo.Version()),
		Events:         m.events,     // GET /v1/events
		BreakerHistory: m.breakerLog, // GET /v1/agents/{name}/breaker
		// GET /v1/routing/decisions, /v1/stats/delegations, /v1/stats/sessions
		Activity: m.activityOptions(),
		LastReloadError: func() error {
			reloadMu.Lock()
			defer reloadMu.Unlock()
			var agentsErr error
			if agents != nil {
				agentsErr = agents.LastError()
			}
			return errors.Join(agentsErr, lastTokensErr, cfg.mesh.identities.lastError(), tlsSrv.lastError())
		},
	}
	if m.Router() != nil { // a nil *routing.Router must not become a non-nil interface
		opts.Router, opts.Sessions = m.Router(), m.Sessions()
	}
	if cfg.ui {
		opts.UI = ui.Handler()
	}
	srv, err = httpserver.New(m.Registry(), m.searcher(), m.delegator(), opts)
	if err != nil {
		m.close(context.Background())
		return err
	}
	if err := mountMCP(srv, m, splitList(cfg.corsOrigins), log); err != nil {
		m.close(context.Background())
		return err
	}
	if err := mountA2A(srv, m, log); err != nil {
		m.close(context.Background())
		return err
	}

	var local *localServer
	if shared {
		path, err := localsock.Path(cfg.mesh.db)
		if err == nil {
			info := holderInfo{PID: os.Getpid(), Mode: "serve", Version: buildinfo.Version()}
			local, err = serveLocal(path, srv, localSecret, info, nil, log)
		}
		if err != nil {
			m.close(context.Background())
			return fmt.Errorf("local mesh socket: %w", err)
		}
		log.Info("serving the local mesh", "socket", path)
	}

	// Requests see baseCtx, cancelled when the grace period is over, so
	// long-polls do not hold the shutdown past it.
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	var handler http.Handler = srv
	if tlsSrv != nil {
		handler = hsts(srv)
	}
	apiConns, metricsConns, err := cfg.conns.limiters(trusted, promReg, log)
	if err != nil {
		m.close(context.Background())
		return err
	}
	hs := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       cfg.conns.readTimeout,
		IdleTimeout:       2 * time.Minute,
		ConnState:         apiConns.ConnState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	// The event streams would hold the shutdown until its deadline.
	hs.RegisterOnShutdown(m.events.Close)
	servers := []*http.Server{hs}
	serveErr := make(chan error, 2)
	watchCtx, stopWatch := context.WithCancel(ctx) // the certificate files' watch
	defer stopWatch()
	var watching sync.WaitGroup
	if tlsSrv != nil {
		// Plain HTTP on this port gets Go's 400 "Client sent an HTTP
		// request to an HTTPS server"; nothing is served without TLS.
		hs.TLSConfig = tlsSrv.config
		watching.Go(func() { tlsSrv.watch(watchCtx, m.obs, log) })
		go func() { serveErr <- hs.ServeTLS(apiConns.Listener(ln), "", "") }()
	} else {
		go func() { serveErr <- hs.Serve(apiConns.Listener(ln)) }()
	}
	if cfg.metricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.metricsAddr)
		if err != nil {
			hs.Close()
			m.close(context.Background())
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		ms := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: cfg.conns.readTimeout,
			ConnState: metricsConns.ConnState}
		servers = append(servers, ms)
		go func() { serveErr <- ms.Serve(metricsConns.Listener(mln)) }()
		log.Info("metrics listening", "addr", mln.Addr().String())
	}
	log.Info("agentmesh serving", "addr", ln.Addr().String(), "public_url", cfg.mesh.publicURL,
		"allow_private_endpoints", cfg.mesh.allowPrivate, "tls", tlsSrv != nil)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var failure error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			_, err := reload(ctx)
			m.obs.reloaded("signal", err)
			if err != nil {
				log.Error("reload failed; the previous agents, tokens, identities and TLS certificate stay in service", "err", err)
			} else {
				log.Info("reloaded")
			}
		case err := <-serveErr:
			failure = err
			break loop
		}
	}

	stopWatch()
	watching.Wait()
	log.Info("shutting down", "grace", cfg.shutdownTimeout.String())
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			if err := s.Shutdown(graceCtx); err != nil {
				cancelBase()
				s.Close()
			}
		})
	}
	if local != nil {
		wg.Go(func() { local.close(graceCtx) })
	}
	wg.Go(func() {
		if err := m.Delegation().Shutdown(graceCtx); err != nil {
			log.Warn("delegations still running at the end of the grace period were interrupted")
		}
	})
	wg.Wait()
	_ = srv.Close() // the held-back audit counts, before the audit log closes
	if agents != nil {
		agents.Close() // before the registry closes
	}
	if err := m.close(graceCtx); err != nil {
		log.Error("closing the store failed", "err", err)
		failure = errors.Join(failure, err)
	}
	log.Info("stopped")
	return failure
}

// readTokens reads the tokens file; an empty path means none.
func readTokens(path string) ([]httpserver.Token, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tokens-file: %w", err)
	}
	list, err := httpserver.ParseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("--tokens-file %s: %w", path, err)
	}
	return list, nil
}

// newLogger builds the process logger on w: every string it logs passes
// through redact.String. format "" means text on a terminal,
// else def.
func newLogger(w io.Writer, level, format, def string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: must be debug, info, warn or error", level)
	}
	if format == "" {
		format = def
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(redact.NewHandler(slog.NewJSONHandler(w, opts))), nil
	case "text":
		return slog.New(redact.NewHandler(slog.NewTextHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("--log-format %q: must be json or text", format)
}

func usageError(stderr io.Writer, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "agentmesh:", err)
	return 2
}

// watchAgents loads the agent directory into the registry and watches it
// for changes. Routing needs a fallback, so the directory must have exactly
// one default agent. A directory that does not load is a startup error;
// each of its problems is logged.
func watchAgents(ctx context.Context, m *mesh, dir string, env func(string) string, log *slog.Logger) (*registry.DirWatcher, error) {
	w, err := registry.NewDirWatcher(ctx, m.Registry(), dir, &registry.WatchOptions{
		LookupEnv:      lookupEnv(env),
		RequireDefault: true,
		Logger:         log,
		OnReload:       func(_ registry.ReloadReport, err error) { m.obs.reloaded("file", err) },
	})
	var de *registry.DirError
	if errors.As(err, &de) {
		for _, p := range de.Problems {
			log.Error("agent directory problem", "problem", p.String())
		}
		return nil, fmt.Errorf("--agents %s: %s", dir, plural(len(de.Problems), "problem"))
	}
	if err != nil {
		return nil, fmt.Errorf("--agents %s: %w", dir, err)
	}
	return w, nil
}
