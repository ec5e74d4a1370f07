package delegation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// env is a mesh under test: a registry, a record store, a client, and the
// mesh's own HTTP server (for callbacks) at Options.PublicURL.
type env struct {
	t      *testing.T
	reg    *registry.Registry
	store  *memStore
	c      *delegation.Client
	mesh   *httptest.Server
	sleeps *sleepLog
	bg     sync.WaitGroup // agent goroutines (callbacks)
}

// config tweaks newEnv.
type config struct {
	opts  *delegation.Options
	store *memStore
	// now is the client's clock; nil means time.Now.
	now func() time.Time
	// regNow is the registry's clock; nil means time.Now.
	regNow func() time.Time
	// realSleep makes retries really wait; by default the sleeps are
	// recorded and skipped.
	realSleep bool
	// trusted is passed to CallbackHandler.
	trusted func(*http.Request) bool
}

// sleepLog records the backoffs of the client instead of sleeping.
type sleepLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepLog) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newEnv(t *testing.T, opts *delegation.Options) *env {
	return newEnvWith(t, config{opts: opts})
}

func newEnvWith(t *testing.T, cfg config) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, store: cfg.store, sleeps: &sleepLog{}}
	if e.store == nil {
		e.store = newMemStore()
	}
	reg, err := registry.New(ctx, memstore.New(), &registry.Options{SweepInterval: -1, Now: cfg.regNow})
	require.NoError(t, err)
	e.reg = reg

	var handler atomic.Pointer[http.Handler]
	e.mesh = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := handler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "mesh not ready", http.StatusServiceUnavailable)
	}))

	var o delegation.Options
	if cfg.opts != nil {
		o = *cfg.opts
	}
	if o.PublicURL == "" {
		o.PublicURL = e.mesh.URL
	}
	var sleep func(context.Context, time.Duration) error
	if !cfg.realSleep {
		sleep = e.sleeps.sleep
	}
	c, err := delegation.NewWithSeams(ctx, reg, e.store, &o, cfg.now, sleep)
	require.NoError(t, err)
	e.c = c
	mux := http.NewServeMux()
	mux.Handle("POST /v1/delegations/{id}/result", c.CallbackHandler(cfg.trusted))
	var h http.Handler = mux
	handler.Store(&h)

	t.Cleanup(func() {
		e.bg.Wait()
		require.NoError(t, c.Close())
		e.mesh.Close()
		_ = reg.Close()
	})
	return e
}

// register registers a (with a description and http protocol unless set).
func (e *env) register(a registry.Agent) registry.Agent {
	e.t.Helper()
	if a.Description == "" && len(a.Capabilities) == 0 {
		a.Description = "agent " + a.Name
	}
	got, _, err := e.reg.Register(context.Background(), a)
	require.NoError(e.t, err)
	return got
}

// agentServer starts an agent answering with h and registers it as name.
func (e *env) agentServer(name string, h http.HandlerFunc) *httptest.Server {
	e.t.Helper()
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	e.register(registry.Agent{Name: name, Endpoint: srv.URL + "/task"})
	return srv
}

// delegate delegates and requires no error.
func (e *env) delegate(req delegation.Request) delegation.Record {
	e.t.Helper()
	rec, err := e.c.Delegate(context.Background(), req)
	require.NoError(e.t, err)
	return rec
}

// stored waits until the store holds the record in a final status (or
// status want, if given) and returns it.
func (e *env) stored(id string, want ...delegation.Status) delegation.Record {
	e.t.Helper()
	var rec delegation.Record
	require.Eventually(e.t, func() bool {
		r, ok := e.store.get(id)
		rec = r
		if !ok {
			return false
		}
		if len(want) > 0 {
			return r.Status == want[0]
		}
		return r.Status.Final()
	}, 5*time.Second, time.Millisecond, "record %s never reached the store", id)
	return rec
}

// taskRequest is the body of POST /task as an agent sees it.
type taskRequest struct {
	DelegationID string         `json:"delegationId"`
	Task         string         `json:"task"`
	Context      map[string]any `json:"context"`
	CallbackURL  string         `json:"callbackUrl"`
}

func readTask(t *testing.T, r *http.Request) taskRequest {
	var tr taskRequest
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("agent: read body: %v", err)
		return tr
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tr); err != nil {
		t.Errorf("agent: decode body %q: %v", body, err)
	}
	return tr
}

// callBack POSTs body to url and returns the status and body of the reply.
func callBack(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Errorf("callback: %v", err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ok answers 200 with body.
func ok(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

// counter counts an agent's requests.
type counter struct{ n atomic.Int64 }

func (c *counter) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		h(w, r)
	}
}

func (c *counter) get() int { return int(c.n.Load()) }

// loopbackPolicyClient returns a client whose endpoint policy refuses
// private addresses and whose resolver answers every name with 127.0.0.1
// (where the test agent listens), and the count of its lookups: a public
// name that resolves to a loopback address, which the policy must refuse
// at dial time.
func loopbackPolicyClient(t *testing.T) (*http.Client, *counter) {
	t.Helper()
	policy, err := netguard.NewPolicy(netguard.Options{}) // private refused
	require.NoError(t, err)
	lookups := new(counter)
	client := policy.NewClient(&netguard.ClientOptions{
		LookupIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
			lookups.n.Add(1)
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	})
	return client, lookups
}

// assertRefusedAtDialTime checks that rec failed with endpoint_not_allowed
// for a loopback address after a single attempt: a refusal is not retried.
func assertRefusedAtDialTime(t *testing.T, rec delegation.Record) {
	t.Helper()
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeEndpointNotAllowed, rec.Code)
	assert.Contains(t, rec.Error, "loopback")
	assert.Equal(t, 1, rec.Attempts)
}

// recordLog is an OnRecord hook that keeps the records it is told of.
type recordLog struct {
	mu   sync.Mutex
	recs []delegation.Record
}

func (l *recordLog) hook(r delegation.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
}

// statuses returns the status of each record told of, in order.
func (l *recordLog) statuses() []delegation.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]delegation.Status, len(l.recs))
	for i, r := range l.recs {
		out[i] = r.Status
	}
	return out
}

// of returns the records told of with the given id, in order.
func (l *recordLog) of(id string) []delegation.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []delegation.Record
	for _, r := range l.recs {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

// registryForTest returns an empty registry closed at the end of the test.
func registryForTest(t *testing.T) (*registry.Registry, error) {
	reg, err := registry.New(context.Background(), memstore.New(), &registry.Options{SweepInterval: -1})
	if err == nil {
		t.Cleanup(func() { _ = reg.Close() })
	}
	return reg, err
}
