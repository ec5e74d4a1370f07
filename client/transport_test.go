package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

// front is a reverse proxy in front of a mesh. answer sees each request
// with its number (from 1) and either answers it itself (true) or lets it
// through (false).
type front struct {
	ts   *httptest.Server
	hits atomic.Int32
}

func newFront(t *testing.T, m *mesh, answer func(w http.ResponseWriter, r *http.Request, n int) bool) *front {
	t.Helper()
	target, err := url.Parse(m.ts.URL)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	f := &front{}
	f.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(f.hits.Add(1))
		if !answer(w, r, n) {
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(f.ts.Close)
	return f
}

// unavailableFirst answers the first n requests 503 in plain text, as a
// load balancer without a healthy backend does.
func unavailableFirst(n int) func(w http.ResponseWriter, r *http.Request, i int) bool {
	return func(w http.ResponseWriter, r *http.Request, i int) bool {
		if i > n {
			return false
		}
		http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
		return true
	}
}

// resetFirst closes the connection of the first request without a reply.
func resetFirst(w http.ResponseWriter, r *http.Request, i int) bool {
	if i > 1 {
		return false
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
	return true
}

// TestRetrySafeRequests: a GET is retried after 503s of a proxy, up to
// MaxRetries, with no retries when MaxRetries is negative; the proxy's
// plain-text 503 gets a code from its status and matches no library
// sentinel.
func TestRetrySafeRequests(t *testing.T) {
	m := newMesh(t, meshConfig{})
	m.register(agentRecord("finance", "http://127.0.0.1:9/task"))

	f := newFront(t, m, unavailableFirst(2))
	a, err := newClient(t, f.ts.URL, adminToken, nil).Agent(ctxT(t), "finance")
	require.NoError(t, err, "two retries by default")
	assert.Equal(t, "finance", a.Name)
	assert.Equal(t, int32(3), f.hits.Load())

	f = newFront(t, m, unavailableFirst(2))
	_, err = newClient(t, f.ts.URL, adminToken, &client.Options{MaxRetries: -1}).Agent(ctxT(t), "finance")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, int32(1), f.hits.Load(), "negative MaxRetries: no retry")
	assert.Equal(t, http.StatusServiceUnavailable, e.Status)
	assert.Equal(t, "unavailable", e.Code)
	assert.Equal(t, "no healthy upstream", e.Message)
	assert.NotErrorIs(t, err, registry.ErrNotFound)

	f = newFront(t, m, unavailableFirst(5))
	_, err = newClient(t, f.ts.URL, adminToken, &client.Options{MaxRetries: 1}).List(ctxT(t), registry.ListOptions{})
	require.ErrorAs(t, err, &e)
	assert.Equal(t, int32(2), f.hits.Load(), "one retry")

	// Every kind of safe request.
	f = newFront(t, m, func(w http.ResponseWriter, r *http.Request, i int) bool {
		if i%2 == 1 {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return true
		}
		return false
	})
	c := newClient(t, f.ts.URL, adminToken, nil)
	ctx := ctxT(t)
	_, _, err = c.Register(ctx, agentRecord("hr", "http://127.0.0.1:9/task"))
	require.NoError(t, err)
	_, err = c.Heartbeat(ctx, "hr")
	require.NoError(t, err)
	_, err = c.Search(ctx, "budget", nil)
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "hr"))
	require.NoError(t, c.Health(ctx))
	assert.Equal(t, int32(10), f.hits.Load(), "each call once refused, once answered")
}

// TestNoRetryOfDelegate: POST /v1/delegate and POST /v1/request are not
// sent again after a 503 or a connection closed after the request was
// sent: the agent got nothing, and the call fails once.
func TestNoRetryOfDelegate(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ag := syncAgent(t)
	m.register(agentRecord("finance", ag.url()))
	req := delegation.Request{Target: "finance", Task: "Budget?"}

	f := newFront(t, m, unavailableFirst(1))
	c := newClient(t, f.ts.URL, adminToken, nil)
	_, err := c.Delegate(ctxT(t), req)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusServiceUnavailable, e.Status)
	assert.Equal(t, int32(1), f.hits.Load(), "a 503 to POST /v1/delegate is not retried")
	assert.Empty(t, ag.got())
	rec, err := c.Delegate(ctxT(t), req)
	require.NoError(t, err, "the proxy lets the next one through")
	assert.Equal(t, delegation.StatusCompleted, rec.Status)

	f = newFront(t, m, unavailableFirst(1))
	_, err = newClient(t, f.ts.URL, adminToken, nil).Route(ctxT(t), routingRequest("budget?"))
	require.Error(t, err)
	assert.Equal(t, int32(1), f.hits.Load(), "nor is POST /v1/request")

	f = newFront(t, m, resetFirst)
	_, err = newClient(t, f.ts.URL, adminToken, nil).Delegate(ctxT(t), req)
	require.ErrorIs(t, err, client.ErrUnreachable, "no response")
	assert.Equal(t, int32(1), f.hits.Load(), "a connection lost after sending is not retried")
	assert.Len(t, ag.got(), 1, "only the delegation that went through")

	f = newFront(t, m, resetFirst)
	_, err = newClient(t, f.ts.URL, adminToken, nil).Agent(ctxT(t), "finance")
	require.NoError(t, err, "a read is retried after a lost connection")
	assert.Equal(t, int32(2), f.hits.Load())
}

// TestDelegateRetriedAfterDialError: a connection refused before anything
// was sent is retried even for POST /v1/delegate.
func TestDelegateRetriedAfterDialError(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ag := syncAgent(t)
	m.register(agentRecord("finance", ag.url()))
	refused := closedAddr(t)
	var dials atomic.Int32
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			return d.DialContext(ctx, network, refused) // the first connection is refused
		}
		return d.DialContext(ctx, network, addr)
	}}}
	c := newClient(t, m.ts.URL, adminToken, &client.Options{HTTPClient: hc})
	rec, err := c.Delegate(ctxT(t), delegation.Request{Target: "finance", Task: "Budget?"})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.Len(t, ag.got(), 1)
	assert.GreaterOrEqual(t, dials.Load(), int32(2))
}

// closedAddr is the address of a TCP port nobody listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestRetryAfter: a 429 is retried after its Retry-After; when that would
// pass the context's deadline, or MaxRetryWait, the 429 is returned at
// once with RetryAfter set.
func TestRetryAfter(t *testing.T) {
	m := newMesh(t, meshConfig{})
	m.register(agentRecord("finance", "http://127.0.0.1:9/task"))
	limited := func(after string, n int) func(w http.ResponseWriter, r *http.Request, i int) bool {
		return func(w http.ResponseWriter, r *http.Request, i int) bool {
			if i > n {
				return false
			}
			w.Header().Set("Retry-After", after)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error": "rate limit exceeded; retry after %s s", "code": "rate_limited"}`, after)
			return true
		}
	}

	f := newFront(t, m, limited("1", 1))
	start := time.Now()
	_, err := newClient(t, f.ts.URL, adminToken, nil).Agent(ctxT(t), "finance")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After was honoured")
	assert.Equal(t, int32(2), f.hits.Load())

	f = newFront(t, m, limited("5", 1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start = time.Now()
	_, err = newClient(t, f.ts.URL, adminToken, nil).Agent(ctx, "finance")
	require.ErrorIs(t, err, client.ErrRateLimited)
	assert.Less(t, time.Since(start), 500*time.Millisecond, "no wait past the deadline")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 5*time.Second, e.RetryAfter)
	assert.Equal(t, "rate_limited", e.ErrorCode())
	assert.Equal(t, int32(1), f.hits.Load())

	f = newFront(t, m, limited("900", 1))
	start = time.Now()
	_, err = newClient(t, f.ts.URL, adminToken, nil).Agent(context.Background(), "finance")
	require.ErrorIs(t, err, client.ErrRateLimited)
	assert.Less(t, time.Since(start), 500*time.Millisecond, "no wait beyond MaxRetryWait")

	// The server's own rate limit.
	rl := newMesh(t, meshConfig{opts: func(o *httpserver.Options) {
		o.RateLimit = httpserver.RateLimit{Requests: 2, Per: time.Minute}
	}})
	c := rl.client(adminToken, nil)
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for range 3 {
		if _, err = c.List(ctx, registry.ListOptions{}); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, client.ErrRateLimited)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusTooManyRequests, e.Status)
	assert.Greater(t, e.RetryAfter, 2*time.Second)
}

// TestCancelledContext: a call's context bounds it — before the request,
// during the request, and during the wait before a retry — and its error
// is the context's, not ErrUnreachable.
func TestCancelledContext(t *testing.T) {
	m := newMesh(t, meshConfig{})
	hold := make(chan struct{})
	slow := newAgent(t, func(w http.ResponseWriter, tk task) {
		select {
		case <-hold:
		case <-time.After(5 * time.Second):
		}
	})
	t.Cleanup(func() { close(hold) }) // before the agent's server closes
	m.register(agentRecord("slow", slow.url()))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.c.Agent(ctx, "slow")
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, m.seen("GET /v1/agents/slow"), "nothing is sent")

	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = m.c.Delegate(ctx, delegation.Request{Target: "slow", Task: "take your time"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, client.ErrUnreachable)
	assert.Less(t, time.Since(start), 3*time.Second)

	f := newFront(t, m, func(w http.ResponseWriter, r *http.Request, i int) bool {
		w.Header().Set("Retry-After", "20")
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return true
	})
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, err = newClient(t, f.ts.URL, adminToken, nil).Agent(ctx, "slow")
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 3*time.Second, "the wait for Retry-After is cancelled")
	assert.Equal(t, int32(1), f.hits.Load())
}

// TestUnreachable: a server that is gone gives errors wrapping
// ErrUnreachable and the cause, naming the call; a connection reset
// before the reply too.
func TestUnreachable(t *testing.T) {
	addr := closedAddr(t)
	c := newClient(t, "http://"+addr, adminToken, &client.Options{MaxRetries: 1})
	_, err := c.Agent(ctxT(t), "finance")
	require.ErrorIs(t, err, client.ErrUnreachable)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	var op *net.OpError
	assert.ErrorAs(t, err, &op)
	assert.Contains(t, err.Error(), "GET /v1/agents/finance")
	assert.Contains(t, err.Error(), "server unreachable")
	var e *client.Error
	assert.False(t, errors.As(err, &e), "no reply, no *Error")

	_, err = c.Delegate(ctxT(t), delegation.Request{Target: "finance", Task: "t"})
	require.ErrorIs(t, err, client.ErrUnreachable)

	// The server closes every connection before replying.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = conn.Read(buf)
			_ = conn.Close()
		}
	}()
	c = newClient(t, "http://"+ln.Addr().String(), adminToken, nil)
	_, err = c.List(ctxT(t), registry.ListOptions{})
	require.ErrorIs(t, err, client.ErrUnreachable)
	_, err = c.Route(ctxT(t), routingRequest("budget?"))
	require.ErrorIs(t, err, client.ErrUnreachable)
}

// TestAuthErrors: 401 and 403 match the package's sentinels.
func TestAuthErrors(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	for _, token := range []string{"", "wrong-token"} {
		_, err := m.client(token, nil).List(ctx, registry.ListOptions{})
		require.ErrorIs(t, err, client.ErrUnauthenticated, "token %q", token)
		assert.NotErrorIs(t, err, client.ErrPermissionDenied)
		var e *client.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, http.StatusUnauthorized, e.Status)
		assert.Equal(t, "unauthenticated", e.Code)
	}
	reader := m.client(readToken, nil)
	_, _, err := reader.Register(ctx, agentRecord("finance", "http://127.0.0.1:9/task"))
	require.ErrorIs(t, err, client.ErrPermissionDenied)
	assert.NotErrorIs(t, err, client.ErrUnauthenticated)
	assert.NotErrorIs(t, err, registry.ErrInvalid)
	_, err = reader.Delegate(ctx, delegation.Request{Target: "finance", Task: "t"})
	require.ErrorIs(t, err, client.ErrPermissionDenied)
	_, err = reader.List(ctx, registry.ListOptions{})
	require.NoError(t, err)
}

// TestToken: the token is sent as a bearer token, with the User-Agent,
// and never appears in an error or in the client's printed form — even
// when a server echoes it.
func TestToken(t *testing.T) {
	const secret = "tok-very-secret-6d1f"
	var mu sync.Mutex
	var auth, agentUA []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		agentUA = append(agentUA, r.Header.Get("User-Agent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error": "the token %s is not welcome", "code": "invalid_argument"}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(ts.Close)

	c := newClient(t, ts.URL, secret, nil)
	_, err := c.Agent(ctxT(t), "finance")
	require.ErrorIs(t, err, registry.ErrInvalid)
	assert.NotContains(t, err.Error(), secret)
	assert.Contains(t, err.Error(), "[redacted]")
	mu.Lock()
	assert.Equal(t, []string{"Bearer " + secret}, auth)
	assert.True(t, strings.HasPrefix(agentUA[0], "agentmesh-client/"), agentUA[0])
	mu.Unlock()

	_, err = newClient(t, ts.URL, secret, &client.Options{UserAgent: "my-tool/1.0"}).Agent(ctxT(t), "x")
	require.Error(t, err)
	mu.Lock()
	assert.Equal(t, "my-tool/1.0", agentUA[1])
	mu.Unlock()

	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%s", c)} {
		assert.NotContains(t, s, secret)
	}

	// Errors of every other kind.
	m := newMesh(t, meshConfig{})
	var errs []error
	_, err = m.client(secret, nil).List(ctxT(t), registry.ListOptions{})
	errs = append(errs, err)
	_, err = newClient(t, "http://"+closedAddr(t), secret, nil).Agent(ctxT(t), "x")
	errs = append(errs, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = newClient(t, ts.URL, secret, nil).Delegation(ctx, "x")
	errs = append(errs, err)
	for _, err := range errs {
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secret)
		assert.NotContains(t, fmt.Sprintf("%+v", err), secret)
	}
}

// TestErrorPages: a reply that is not the server's JSON error (a proxy's
// HTML page) gets a code from its status and a message from the status
// text, and selects no library sentinel.
func TestErrorPages(t *testing.T) {
	m := newMesh(t, meshConfig{})
	f := newFront(t, m, func(w http.ResponseWriter, r *http.Request, i int) bool {
		switch r.URL.Path {
		case "/v1/agents/missing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "<html><body><h1>404 Not Found</h1></body></html>")
		case "/v1/agents/teapot":
			w.WriteHeader(http.StatusTeapot)
		case "/v1/agents/forbidden":
			w.WriteHeader(http.StatusForbidden)
		default:
			return false
		}
		return true
	})
	c := newClient(t, f.ts.URL, adminToken, nil)
	_, err := c.Agent(ctxT(t), "missing")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusNotFound, e.Status)
	assert.Equal(t, "not_found", e.Code)
	assert.Equal(t, "not found (HTTP 404)", e.Error())
	assert.NotErrorIs(t, err, registry.ErrNotFound, "a proxy's 404 is not the registry's")

	_, err = c.Agent(ctxT(t), "teapot")
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "invalid_argument", e.Code)
	assert.NotErrorIs(t, err, registry.ErrInvalid)

	_, err = c.Agent(ctxT(t), "forbidden")
	assert.ErrorIs(t, err, client.ErrPermissionDenied, "a bare 403 is a permission problem")
}

// TestUnixSocket: with an HTTPClient whose Transport dials a Unix socket,
// the base URL's host is only a name.
func TestUnixSocket(t *testing.T) {
	m := newMesh(t, meshConfig{})
	dir, err := os.MkdirTemp("", "amc")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "mesh.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: m.ts.Config.Handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", sock)
	}}}
	c := newClient(t, "http://agentmesh", adminToken, &client.Options{HTTPClient: hc})
	require.NoError(t, c.Health(ctxT(t)))
	_, created, err := c.Register(ctxT(t), agentRecord("local", "http://127.0.0.1:9/task"))
	require.NoError(t, err)
	assert.True(t, created)

	require.NoError(t, srv.Close())
	err = c.Health(ctxT(t))
	assert.ErrorIs(t, err, client.ErrUnreachable, "a holder that died is unreachable")
}

// TestConcurrentUse: one Client serves many goroutines at once.
func TestConcurrentUse(t *testing.T) {
	m := newMesh(t, meshConfig{})
	m.register(agentRecord("finance", syncAgent(t).url(), "budget"))
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Go(func() {
			name := fmt.Sprintf("agent-%d", i)
			if _, _, err := m.c.Register(ctx, agentRecord(name, "http://127.0.0.1:9/task")); err != nil {
				errs <- err
			}
			if _, err := m.c.Search(ctx, "budget", nil); err != nil {
				errs <- err
			}
			if _, err := m.c.Delegate(ctx, delegation.Request{Target: "finance", Task: name}); err != nil {
				errs <- err
			}
			for _, err := range m.c.Agents(ctx, registry.ListOptions{Limit: 5}) {
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLostReply: Cancel and CloseSession are retried after an attempt
// that did its work on the server but whose reply was lost, and the retry
// reports what that attempt left (delegation.ErrFinal,
// session.ErrNotActive); ResumeSession, which must not run twice, is sent
// once, after a lost reply as after a 503.
func TestLostReply(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	m.register(agentRecord("reports", asyncAgent(t, make(chan struct{})).url(), "report"))
	m.register(agentRecord("finance", syncAgent(t).url(), "budget"))
	rec, err := m.c.Delegate(ctx, delegation.Request{Target: "reports", Task: "never answered", Async: true})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusAccepted, rec.Status)
	resp, err := m.c.Route(ctx, routing.Request{Input: "What is the budget?", UserID: "u1"})
	require.NoError(t, err)
	require.NotEmpty(t, resp.SessionID)

	// The first request is served by the mesh; its reply never leaves the
	// front, which closes the connection instead.
	var (
		mu     sync.Mutex
		served []int
	)
	lostFirst := func(w http.ResponseWriter, r *http.Request, i int) bool {
		if i > 1 {
			return false
		}
		rr := httptest.NewRecorder()
		m.ts.Config.Handler.ServeHTTP(rr, r)
		mu.Lock()
		served = append(served, rr.Code)
		mu.Unlock()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return true
	}

	f := newFront(t, m, lostFirst)
	_, err = newClient(t, f.ts.URL, adminToken, nil).Cancel(ctx, rec.ID)
	require.ErrorIs(t, err, delegation.ErrFinal, "the retry finds the delegation cancelled")
	assert.Equal(t, int32(2), f.hits.Load())
	got, err := m.c.Delegation(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, got.Status)

	f = newFront(t, m, lostFirst)
	_, err = newClient(t, f.ts.URL, adminToken, nil).CloseSession(ctx, resp.SessionID)
	require.ErrorIs(t, err, session.ErrNotActive, "the retry finds the session closed")
	assert.Equal(t, int32(2), f.hits.Load())

	f = newFront(t, m, lostFirst)
	_, err = newClient(t, f.ts.URL, adminToken, nil).ResumeSession(ctx, resp.SessionID)
	require.ErrorIs(t, err, client.ErrUnreachable)
	assert.Equal(t, int32(1), f.hits.Load(), "a resume whose reply was lost is not sent again")
	mu.Lock()
	assert.Equal(t, []int{http.StatusOK, http.StatusOK, http.StatusOK}, served, "each first attempt did its work")
	mu.Unlock()

	f = newFront(t, m, unavailableFirst(1))
	_, err = newClient(t, f.ts.URL, adminToken, nil).ResumeSession(ctx, resp.SessionID)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusServiceUnavailable, e.Status)
	assert.Equal(t, int32(1), f.hits.Load(), "nor after a 503")
}
