package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/localsock"
	"github.com/agentmesh/agentmesh/mcpserver"
)

// mountMCP serves the MCP tools over Streamable HTTP at /mcp, behind the
// HTTP server's authentication; each tool call needs the scope of its tool.
// Browsers from the CORS origins may call it cross-origin.
func mountMCP(srv *httpserver.Server, m *mesh, origins []string, log *slog.Logger) error {
	server, err := mcpserver.New(m.Registry(), m.searcher(), m.delegator(), &mcpserver.Options{
		Logger: log,
		Router: m.mcpRouter(),
		Authorize: func(ctx context.Context, req *mcp.CallToolRequest) error {
			id, ok := httpserver.IdentityFrom(ctx)
			if !ok {
				return errors.New("no authenticated caller")
			}
			scope := httpserver.Scope(mcpserver.RequiredScope(req.Params.Name))
			if scope != "" && !id.Has(scope) {
				m.obs.toolRefused(ctx, "mcp "+req.Params.Name, scope)
				return fmt.Errorf("token %q lacks the %s scope", id.Name, scope)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	h, err := mcpserver.HTTPHandler(server, &mcpserver.HTTPOptions{TrustedOrigins: origins, Logger: log})
	if err != nil {
		return err
	}
	return srv.Handle("/mcp", h, "")
}

const stdioSynopsis = `agentmesh [flags]

With no sub-command, agentmesh is an MCP server on stdio: point an MCP client
(Claude Desktop, an IDE, an agent) at this command. Only protocol goes to
stdout; logs go to stderr. Private endpoints (local agents) are allowed by
default in this mode.

Every agentmesh started on the same store file is the same mesh: one of them
holds the file and serves it to the others on a Unix socket next to it, and
another takes over within a second when it exits. With --server (MESH_URL),
the tools are those of a running agentmesh serve instead (token from
MESH_TOKEN), and no store is opened.`

// stdioConfig is the configuration of the stdio MCP server.
type stdioConfig struct {
	mesh       meshConfig
	allowHosts string
	logLevel   string
	server     string // --server: remote mode
	pprof      pprofConfig
}

// stdioFlags defines the flags of the stdio MCP server.
func stdioFlags(cfg *stdioConfig, stderr io.Writer) *flags {
	f := newFlags("agentmesh", stdioSynopsis, stderr)
	storeFlags(f, &cfg.mesh)
	f.String(&cfg.server, "server", "MESH_URL", "", "base URL of a running agentmesh serve: serve its tools (remote mode, token from MESH_TOKEN) instead of opening a store")
	policyFlags(f, &cfg.mesh, &cfg.allowHosts, true)
	f.String(&cfg.mesh.publicURL, "public-url", "MESH_PUBLIC_URL", "", "public base URL for async callbacks (default: a loopback listener of this mesh, http://127.0.0.1:<port>)")
	f.String(&cfg.logLevel, "log-level", "MESH_LOG_LEVEL", "warn", "debug, info, warn or error (logs go to stderr)")
	retentionFlag(f, &cfg.mesh)
	routingFlags(f, &cfg.mesh.routing)
	identityFlags(f, &cfg.mesh.identity)
	pprofFlags(f, &cfg.pprof)
	return f
}

// runStdio serves the MCP tools on stdin/stdout until the client
// disconnects or ctx is cancelled.
func runStdio(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	var sc stdioConfig
	f := stdioFlags(&sc, stderr)
	if err := f.parse(args, env); err != nil {
		return usageError(stderr, err)
	}
	if f.fs.NArg() > 0 {
		return usageError(stderr, fmt.Errorf("unknown command %q (see agentmesh help)", f.fs.Arg(0)))
	}
	cfg := sc.mesh
	if err := cfg.checkRetention(); err != nil {
		return usageError(stderr, err)
	}
	if err := sc.pprof.check(); err != nil {
		return usageError(stderr, err)
	}
	log, err := newLogger(stderr, sc.logLevel, "text", "text")
	if err != nil {
		return usageError(stderr, err)
	}
	cfg.allowHosts = splitList(sc.allowHosts)
	cfg.log = log
	stopTracing, err := setupTracing(ctx, env, log)
	if err != nil {
		log.Error("agentmesh: cannot start", "err", err)
		return 1
	}
	defer stopTracing()
	stopPprof, err := startPprof(sc.pprof, log)
	if err != nil {
		log.Error("agentmesh: cannot start", "err", err)
		return 1
	}
	defer stopPprof(context.Background())
	cfg.withRouting = true // a local tool with a handful of agents: mesh_route and handle_message are on
	cfg.routing.llmAPIKey = env("AGENTMESH_LLM_API_KEY")
	cfg.etcd.password = env("MESH_ETCD_PASSWORD")
	if sc.server == "" { // a local mesh writes the store
		if cfg.secretKeys, err = loadSecretKeys(cfg, env); err != nil {
			log.Error("agentmesh: cannot start", "err", err)
			return 1
		}
	}
	if cfg.identities, err = newIdentities(cfg.identity, cfg, nil, log); err != nil {
		log.Error("agentmesh: cannot start", "err", err)
		return 1
	}

	// stop ends the mesh's own work once the MCP session is over.
	meshCtx, stop := context.WithCancel(ctx)
	defer stop()
	var b backend
	switch {
	case sc.server != "":
		c, err := client.New(sc.server, &client.Options{Token: env("MESH_TOKEN")})
		if err != nil {
			return usageError(stderr, fmt.Errorf("--server: %w", err))
		}
		b = remote{c}
		log.Info("remote mode", "server", sc.server)
	case (cfg.store == "" || cfg.store == "bolt") && localsock.Supported():
		l, err := newLocalMesh(cfg)
		if err == nil {
			err = l.start(meshCtx)
		}
		if err != nil {
			log.Error("agentmesh: cannot start", "err", err)
			return 1
		}
		defer func() { stop(); <-l.done }()
		b = l.sw
	default:
		m, err := openMesh(ctx, cfg)
		if err != nil {
			log.Error("agentmesh: cannot start", "err", err)
			return 1
		}
		defer m.close(context.Background())
		b = inproc{m}
	}
	growPipes(stdin, stdout)
	server, transport, err := mcpserver.NewStdio(b, stdioSearcher(b), b, &mcpserver.Options{Logger: log, Router: b}, stdin, stdout)
	if err != nil {
		log.Error("agentmesh: cannot start", "err", err)
		return 1
	}
	if err := server.Run(ctx, transport); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		log.Error("agentmesh: MCP session ended", "err", err)
		return 1
	}
	return 0
}

// stdioSearcher is the searcher of the stdio tools: b, with the engine's
// own encoding of the results when the mesh is this process's, so that
// mesh_discover answers the bytes the engine encodes for the HTTP API
// instead of building them from results (docs/MCP.md#performance).
func stdioSearcher(b backend) discovery.Searcher {
	if in, ok := b.(inproc); ok {
		return encodingBackend{b, in.m.Engine()}
	}
	return b
}

// encodingBackend is a backend whose searches the engine also encodes.
type encodingBackend struct {
	backend
	engine *discovery.Engine
}

var _ discovery.JSONTextSearcher = encodingBackend{}

func (e encodingBackend) AppendSearchJSON(dst []byte, query string, q *discovery.Query) ([]byte, error) {
	return e.engine.AppendSearchJSON(dst, query, q)
}

func (e encodingBackend) AppendSearchJSONText(dst, text []byte, query string, q *discovery.Query) ([]byte, []byte, error) {
	return e.engine.AppendSearchJSONText(dst, text, query, q)
}

// mcpRouter is the router for the MCP tools mesh_route and handle_message,
// or nil (no routing tools) when routing is off: a nil *routing.Router
// must not become a non-nil interface.
func (m *mesh) mcpRouter() mcpserver.Router {
	if m.Router() == nil {
		return nil
	}
	return m.Router()
}
