package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// Tokens of the test meshes.
const (
	adminToken    = "admin-token-4e7b1c9d"    // Options.Token: every scope
	readToken     = "read-token-93ab51f0"     // "reader": read
	delegateToken = "delegate-token-c2d87e11" // "delegator": delegate only
)

// mesh is a live agentmesh server: a registry over memstore, a discovery
// engine following it, circuit breakers, a delegation client, sessions
// and a router, served by httpserver on an httptest listener.
type mesh struct {
	t        *testing.T
	store    *memstore.Store
	reg      *registry.Registry
	del      *delegation.Client
	breakers *breaker.Set
	ts       *httptest.Server
	// c is a client of ts with the admin token.
	c *client.Client

	mu       sync.Mutex
	requests []string // "METHOD /path?query" of every request the server got
}

type meshConfig struct {
	// seed runs on the store before the registry loads it.
	seed func(s registry.Store)
	// opts adjusts the server's options.
	opts func(o *httpserver.Options)
}

func newMesh(t *testing.T, cfg meshConfig) *mesh {
	t.Helper()
	ctx := context.Background()
	m := &mesh{t: t, store: memstore.New()}
	t.Cleanup(func() { _ = m.store.Close() })
	if cfg.seed != nil {
		cfg.seed(m.store)
	}
	reg, err := registry.New(ctx, m.store, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	m.reg = reg
	m.breakers = breaker.NewSet(nil, nil)
	engine := discovery.New(&discovery.Options{Available: func(name string) bool {
		return m.breakers.Get(name).Snapshot().State != breaker.StateOpen
	}})
	t.Cleanup(engine.Follow(reg))

	var handler atomic.Pointer[httpserver.Server]
	m.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.requests = append(m.requests, r.Method+" "+r.URL.RequestURI())
		m.mu.Unlock()
		handler.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(m.ts.Close)

	m.del, err = delegation.New(ctx, reg, m.store, &delegation.Options{
		Discovery:        engine,
		Breakers:         m.breakers,
		PublicURL:        m.ts.URL,
		WaitPollInterval: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.del.Close() })

	sessions, err := session.NewManager(m.store, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sessions.Close() })
	router, err := routing.New(keywords{"budget": "finance", "broken": "broken"}, reg, m.del, sessions,
		&routing.RouterOptions{Breakers: m.breakers})
	require.NoError(t, err)
	t.Cleanup(func() { _ = router.Close() })

	opts := &httpserver.Options{
		Token: adminToken,
		Tokens: []httpserver.Token{
			{Name: "reader", Token: readToken, Scopes: []httpserver.Scope{httpserver.ScopeRead}},
			{Name: "delegator", Token: delegateToken, Scopes: []httpserver.Scope{httpserver.ScopeDelegate}},
		},
		Breakers:   m.breakers,
		Router:     router,
		Sessions:   sessions,
		CardClient: &http.Client{Timeout: 5 * time.Second},
	}
	if cfg.opts != nil {
		cfg.opts(opts)
	}
	srv, err := httpserver.New(reg, engine, m.del, opts)
	require.NoError(t, err)
	handler.Store(srv)
	m.c = m.client(adminToken, nil)
	return m
}

// client returns a client of the mesh with token and opts (nil: defaults).
func (m *mesh) client(token string, opts *client.Options) *client.Client {
	return newClient(m.t, m.ts.URL, token, opts)
}

func newClient(t *testing.T, url, token string, opts *client.Options) *client.Client {
	t.Helper()
	var o client.Options
	if opts != nil {
		o = *opts
	}
	o.Token = token
	c, err := client.New(url, &o)
	require.NoError(t, err)
	return c
}

// seen returns the requests the server got whose "METHOD /path" starts
// with prefix.
func (m *mesh) seen(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.requests {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// keywords is a routing classifier: the agent of the first keyword in the
// text, with confidence 0.9; else no agent, at 0.1.
type keywords map[string]string

func (k keywords) Classify(_ context.Context, text string) (routing.Classification, error) {
	lower := strings.ToLower(text)
	for kw, agent := range k {
		if strings.Contains(lower, kw) {
			return routing.Classification{AgentID: agent, Confidence: 0.9, IntentSummary: kw, DetectedLanguage: "en", Entities: map[string]any{}}, nil
		}
	}
	return routing.Classification{Confidence: 0.1, DetectedLanguage: "en", Entities: map[string]any{}}, nil
}

// task is what an agent gets in POST /task.
type task struct {
	DelegationID string         `json:"delegationId"`
	Task         string         `json:"task"`
	Context      map[string]any `json:"context"`
	CallbackURL  string         `json:"callbackUrl"`
	// Authorization is the header the mesh sent.
	Authorization string `json:"-"`
}

// agent is a live http agent (POST /task) recording what it got.
type agent struct {
	ts *httptest.Server

	mu    sync.Mutex
	tasks []task
}

func (a *agent) url() string { return a.ts.URL + "/task" }

func (a *agent) got() []task {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]task(nil), a.tasks...)
}

// newAgent starts an agent whose handler answers each task.
func newAgent(t *testing.T, answer func(w http.ResponseWriter, tk task)) *agent {
	t.Helper()
	a := &agent{}
	a.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tk task
		if err := json.NewDecoder(r.Body).Decode(&tk); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		tk.Authorization = r.Header.Get("Authorization")
		a.mu.Lock()
		a.tasks = append(a.tasks, tk)
		a.mu.Unlock()
		answer(w, tk)
	}))
	t.Cleanup(a.ts.Close)
	return a
}

// syncAgent answers every task at once with {"result": {"echo": task}}.
func syncAgent(t *testing.T) *agent {
	return newAgent(t, func(w http.ResponseWriter, tk task) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"echo": tk.Task}})
	})
}

// failingAgent answers every task with HTTP 500.
func failingAgent(t *testing.T) *agent {
	return newAgent(t, func(w http.ResponseWriter, tk task) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
}

// asyncAgent accepts every task (202) and, once release is closed, POSTs
// {"status": "completed", "result": {"echo": task}} to its callbackUrl.
func asyncAgent(t *testing.T, release <-chan struct{}) *agent {
	t.Helper()
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { close(done) }) // runs first
	return newAgent(t, func(w http.ResponseWriter, tk task) {
		if tk.CallbackURL == "" {
			http.Error(w, "no callbackUrl", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		wg.Go(func() {
			select {
			case <-release:
			case <-done:
				return
			}
			body, _ := json.Marshal(map[string]any{"status": "completed", "result": map[string]any{"echo": tk.Task}})
			resp, err := http.Post(tk.CallbackURL, "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
			}
		})
	})
}

// register registers an agent through the mesh's client and fails the
// test unless it was stored.
func (m *mesh) register(a registry.Agent) registry.Agent {
	m.t.Helper()
	stored, _, err := m.c.Register(context.Background(), a)
	require.NoError(m.t, err)
	return stored
}

// agentRecord is a valid agent record.
func agentRecord(name, endpoint string, caps ...string) registry.Agent {
	if len(caps) == 0 {
		caps = []string{"budget"}
	}
	return registry.Agent{Name: name, Description: "The " + name + " agent.", Capabilities: caps, Endpoint: endpoint}
}

// ctxT is a context for one test call.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
