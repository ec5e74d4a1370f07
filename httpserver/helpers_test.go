package httpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
	"github.com/agentmesh/agentmesh/internal/harness/logtest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// Tokens of the test servers.
const (
	adminToken    = "mesh-secret-token"     // Options.Token: every scope
	readToken     = "read-only-secret"      // "reader": read
	registerToken = "register-secret"       // "registrar": register, read (configured by hash)
	delegateToken = "delegate-secret"       // "delegator": delegate, read
	routeToken    = "route-secret-token-xx" // "router": route
)

// The test tokens act for one principal, testPrincipal: what one of them
// creates the others may read and change. (The ownership rules between
// principals are tested in principals_test.go.)
func testTokens() []httpserver.Token {
	return []httpserver.Token{
		{Name: "reader", Token: readToken, Principal: testPrincipal, Scopes: []httpserver.Scope{httpserver.ScopeRead}},
		{Name: "registrar", SHA256: httpserver.HashToken(registerToken), Principal: testPrincipal, Scopes: []httpserver.Scope{httpserver.ScopeRegister, httpserver.ScopeRead}},
		{Name: "delegator", Token: delegateToken, Principal: testPrincipal, Scopes: []httpserver.Scope{httpserver.ScopeDelegate, httpserver.ScopeRead}},
		{Name: "router", Token: routeToken, Principal: testPrincipal, Scopes: []httpserver.Scope{httpserver.ScopeRoute}},
	}
}

// testPrincipal is the principal of testTokens.
const testPrincipal = "team"

// clock is a settable clock for the rate limiters.
type clock = clocktest.Clock

// env is a mesh under test: a registry over a real store, a discovery
// engine following it, a delegation client, and the server on an httptest
// listener.
type env struct {
	t        testing.TB
	store    interface{}
	reg      *registry.Registry
	engine   *discovery.Engine
	breakers *breaker.Set
	del      *delegation.Client
	srv      *httpserver.Server
	ts       *httptest.Server
	clock    *clock
	metrics  *prometheus.Registry
	logs     *logtest.Buffer
}

type envConfig struct {
	bolt bool
	// seed is run on the store before the registry loads it.
	seed func(s registry.Store)
	opts func(o *httpserver.Options)
	// noDelegation leaves the delegation client out.
	noDelegation bool
	// onRegistryWrite is the registry's write hook (the audit of
	// registrations).
	onRegistryWrite func(context.Context, registry.Write)
}

func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, clock: clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), logs: &logtest.Buffer{}}

	var (
		rstore registry.Store
		dstore delegation.Store
	)
	if cfg.bolt {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "mesh.db"), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		rstore, dstore, e.store = s, s, s
	} else {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		rstore, dstore, e.store = s, s, s
	}
	if cfg.seed != nil {
		cfg.seed(rstore)
	}
	reg, err := registry.New(ctx, rstore, &registry.Options{SweepInterval: -1, OnWrite: cfg.onRegistryWrite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	e.reg = reg
	e.breakers = breaker.NewSet(nil, nil)
	e.engine = discovery.New(&discovery.Options{Available: func(name string) bool {
		return e.breakers.Get(name).Snapshot().State != breaker.StateOpen
	}})
	stop := e.engine.Follow(reg)
	t.Cleanup(stop)

	var handler atomic.Pointer[httpserver.Server]
	e.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(e.ts.Close)

	var del httpserver.Delegations
	if !cfg.noDelegation {
		c, err := delegation.New(ctx, reg, dstore, &delegation.Options{
			Discovery:        e.engine,
			Breakers:         e.breakers,
			PublicURL:        e.ts.URL,
			WaitPollInterval: 20 * time.Millisecond,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		e.del, del = c, c
	}

	e.metrics = prometheus.NewRegistry()
	opts := &httpserver.Options{
		Token:    adminToken,
		Tokens:   testTokens(),
		Now:      e.clock.Now,
		Metrics:  e.metrics,
		Breakers: e.breakers,
		Logger:   slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if cfg.opts != nil {
		cfg.opts(opts)
	}
	srv, err := httpserver.New(reg, e.engine, del, opts)
	require.NoError(t, err)
	e.srv = srv
	handler.Store(srv)
	return e
}

// newRegistry is a registry over store without TTL sweeps, closed at
// cleanup.
func newRegistry(t testing.TB, store registry.Store) *registry.Registry {
	t.Helper()
	reg, err := registry.New(context.Background(), store, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Err decodes an error body.
func (r *response) Err(t testing.TB) httpserver.ErrorResponse {
	t.Helper()
	var e httpserver.ErrorResponse
	require.NoErrorf(t, json.Unmarshal(r.Body, &e), "error body %q", r.Body)
	require.NotEmpty(t, e.Code, "error body without code: %s", r.Body)
	require.NotEmpty(t, e.Error, "error body without message: %s", r.Body)
	return e
}

// JSON decodes the body into v.
func (r *response) JSON(t testing.TB, v any) {
	t.Helper()
	require.NoErrorf(t, json.Unmarshal(r.Body, v), "body %q", r.Body)
}

// linkRE matches a Link header to the next page of a list.
var linkRE = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// listPage GETs one page of a list route (/v1/agents, /v1/delegations,
// /v1/audit) and returns its items and the URL of the next page, "" when
// its Link header names none. A page must be 200, a JSON array (an empty
// page is [], not null), and carry a well-formed Link or none.
func listPage[T any](t testing.TB, e *env, path, token string) ([]T, string) {
	t.Helper()
	r := e.get(path, token)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var items []T
	r.JSON(t, &items)
	require.NotNil(t, items, "an empty page is [], not null")
	next := ""
	if l := r.Header.Get("Link"); l != "" {
		m := linkRE.FindStringSubmatch(l)
		require.NotNil(t, m, "Link %q", l)
		next = m[1]
	}
	return items, next
}

// req describes a request; Body is JSON-encoded unless it is a string or
// []byte.
type req struct {
	Method string
	Path   string
	Token  string
	Body   any
	Header map[string]string
}

func (e *env) do(r req) *response {
	e.t.Helper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(e.t, err)
		body = bytes.NewReader(data)
	}
	hr, err := http.NewRequest(r.Method, e.ts.URL+r.Path, body)
	require.NoError(e.t, err)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Header {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	resp, err := e.ts.Client().Do(hr)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

func (e *env) get(path, token string) *response {
	e.t.Helper()
	return e.do(req{Method: http.MethodGet, Path: path, Token: token})
}

func (e *env) post(path, token string, body any) *response {
	e.t.Helper()
	return e.do(req{Method: http.MethodPost, Path: path, Token: token, Body: body})
}

// expectError checks an error response's status and code.
func expectError(t *testing.T, r *response, status int, code string) httpserver.ErrorResponse {
	t.Helper()
	require.Equalf(t, status, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	e := r.Err(t)
	require.Equalf(t, code, e.Code, "body: %s", r.Body)
	return e
}

// agentJSON is a minimal valid registration body.
func agentJSON(name, endpoint string, caps ...string) map[string]any {
	if len(caps) == 0 {
		caps = []string{"budget"}
	}
	return map[string]any{
		"name":         name,
		"description":  "The " + name + " agent.",
		"capabilities": caps,
		"endpoint":     endpoint,
	}
}

// register registers an agent with the registrar's token (so the agent
// is testPrincipal's) and fails the test unless it was stored.
func (e *env) register(body map[string]any) registry.Agent {
	e.t.Helper()
	r := e.post("/v1/agents", registerToken, body)
	require.Containsf(e.t, []int{http.StatusCreated, http.StatusOK}, r.Status, "body: %s", r.Body)
	var a registry.Agent
	r.JSON(e.t, &a)
	return a
}

// agentServer is an http agent (POST /task) answering with fn.
func agentServer(t *testing.T, fn http.HandlerFunc) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(fn)
	t.Cleanup(ts.Close)
	return ts
}

// okAgent answers every task with {"result": result}.
func okAgent(t *testing.T, result any) *httptest.Server {
	return agentServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": result})
	})
}

// asyncAgent answers every task with 202 and sends its callback URL to
// urls, where the test reports the outcome as the agent would.
func asyncAgent(t *testing.T, urls chan<- string) *httptest.Server {
	return agentServer(t, func(w http.ResponseWriter, r *http.Request) {
		var task struct {
			CallbackURL string `json:"callbackUrl"`
		}
		_ = json.NewDecoder(r.Body).Decode(&task)
		urls <- task.CallbackURL
		w.WriteHeader(http.StatusAccepted)
	})
}

func readAll(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }

func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
