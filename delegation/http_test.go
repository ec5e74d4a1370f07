package delegation_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// The request (docs/AGENTS.md#the-request): the request of the http
// transport, headers and body.
func TestHTTPRequestContract(t *testing.T) {
	e := newEnv(t, nil)
	type seen struct {
		method, path string
		header       http.Header
		body         taskRequest
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Method, r.URL.Path, r.Header.Clone(), readTask(t, r)}
		_, _ = io.WriteString(w, `{"result":"ok"}`)
	}))
	defer srv.Close()
	e.register(registry.Agent{Name: "finance", Endpoint: srv.URL + "/task",
		Auth: &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}})

	rec := e.delegate(delegation.Request{
		Target: "finance", Task: "Get budget for Engineering", SourceAgent: "hr-agent",
		Context: map[string]any{"tenant": "acme"},
	})
	require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
	s := <-got
	assert.Equal(t, http.MethodPost, s.method)
	assert.Equal(t, "/task", s.path)
	assert.Equal(t, "application/json", s.header.Get("Content-Type"))
	assert.Equal(t, rec.ID, s.header.Get("X-Mesh-Delegation-Id"))
	assert.Equal(t, "agentmesh/"+buildinfo.Version(), s.header.Get("User-Agent"))
	assert.Equal(t, "Bearer s3cret", s.header.Get("Authorization"))
	assert.Equal(t, rec.ID, s.body.DelegationID)
	assert.Equal(t, "Get budget for Engineering", s.body.Task)
	assert.Equal(t, map[string]any{"tenant": "acme", "depth": 1.0, "chain": []any{"hr-agent"}}, s.body.Context)
	assert.True(t, strings.HasPrefix(s.body.CallbackURL, e.mesh.URL+"/v1/delegations/"+rec.ID+"/result?token="),
		"a sync delegation carries a callback URL too, for an agent that answers 202: %q", s.body.CallbackURL)
	token := tokenOf(t, s.body.CallbackURL)
	sum := sha256.Sum256([]byte(token))
	assert.Equal(t, sum[:], e.stored(rec.ID).SecretHash, "only the SHA-256 of the secret is stored")
	assert.Empty(t, rec.SecretHash, "read paths never return the secret hash")
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, rec.ID, "a version 7 UUID")
	assert.Equal(t, 1, rec.Depth)
	assert.Equal(t, 1, rec.Attempts)
	assert.Equal(t, "hr-agent", rec.SourceAgent)
	assert.Equal(t, "finance", rec.TargetAgent)
	assert.NotNil(t, rec.FinishedAt)
}

// The request (docs/AGENTS.md#the-request): auth type header sends
// <headerName>: <token>.
func TestHTTPHeaderAuth(t *testing.T) {
	e := newEnv(t, nil)
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	e.register(registry.Agent{Name: "a", Endpoint: srv.URL,
		Auth: &registry.Auth{Type: registry.AuthHeader, HeaderName: "X-Api-Key", Token: "k3y"}})
	e.delegate(delegation.Request{Target: "a", Task: "t"})
	h := <-got
	assert.Equal(t, "k3y", h.Get("X-Api-Key"))
	assert.Empty(t, h.Get("Authorization"))
}

// The reply (docs/AGENTS.md#the-reply): 200 → completed, result = body.result
// if the body is a JSON object with that key, else the whole JSON body;
// non-JSON → string.
func TestHTTPResultInterpretation(t *testing.T) {
	e := newEnv(t, nil)
	for i, tc := range []struct{ body, want string }{
		{`{"result":{"budget":42}}`, `{"budget":42}`},
		{`{"result":"done","other":1}`, `"done"`},
		{`{"result":null}`, `null`},
		{`{"answer":7}`, `{"answer":7}`},
		{`[1,2,3]`, `[1,2,3]`},
		{`  42 `, `42`},
		{`"just a string"`, `"just a string"`},
		{`plain text answer`, `"plain text answer"`},
		{`{"result": broken`, `"{\"result\": broken"`},
		{``, `""`},
	} {
		name := fmt.Sprintf("agent%d", i)
		e.agentServer(name, ok(tc.body))
		rec := e.delegate(delegation.Request{Target: name, Task: "t"})
		require.Equal(t, delegation.StatusCompleted, rec.Status, "body %q: %s", tc.body, rec.Error)
		assert.JSONEq(t, tc.want, string(rec.Result), "body %q", tc.body)
	}
}

// The reply (docs/AGENTS.md#the-reply): any status other than 200/202 →
// failed "agent returned <status>: <first 1 KiB of body>", not retried unless
// 429/502/503/504.
func TestHTTPErrorStatus(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("x", 3000)
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{500, "boom", "agent returned 500: boom"},
		{404, "no such task", "agent returned 404: no such task"},
		{400, long, "agent returned 400: " + long[:1024]},
		{201, "created", "agent returned 201: created"},
		{204, "", "agent returned 204: "},
	} {
		var calls counter
		name := fmt.Sprintf("agent%d", tc.status)
		e.agentServer(name, calls.wrap(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.body)
		}))
		rec := e.delegate(delegation.Request{Target: name, Task: "t"})
		assert.Equal(t, delegation.StatusFailed, rec.Status)
		assert.Equal(t, delegation.CodeAgentError, rec.Code)
		assert.Equal(t, tc.want, rec.Error)
		assert.Equal(t, 1, rec.Attempts, "status %d is never retried", tc.status)
		assert.Equal(t, 1, calls.get())
	}
	assert.Empty(t, e.sleeps.all())
}

// Redirects (docs/AGENTS.md#when-your-agent-is-slow-or-fails): outbound
// requests never follow redirects; a 3xx is a failure.
func TestHTTPRedirectIsFailure(t *testing.T) {
	e := newEnv(t, nil)
	var followed counter
	target := httptest.NewServer(followed.wrap(ok(`{"result":"should not be here"}`)))
	defer target.Close()
	for _, status := range []int{301, 302, 307, 308} {
		name := fmt.Sprintf("redirector%d", status)
		e.agentServer(name, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, status)
		})
		rec := e.delegate(delegation.Request{Target: name, Task: "t"})
		assert.Equal(t, delegation.StatusFailed, rec.Status)
		assert.Equal(t, delegation.CodeAgentError, rec.Code)
		assert.True(t, strings.HasPrefix(rec.Error, fmt.Sprintf("agent returned %d: ", status)), rec.Error)
		assert.Equal(t, 1, rec.Attempts)
	}
	assert.Zero(t, followed.get(), "a redirect was followed")
}

// Bad input: a 10 MB reply → response_too_large, with and without
// Content-Length.
func TestHTTPReplyTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	big := strings.Repeat("a", 10<<20)
	e.agentServer("sized", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(big)+2))
		_, _ = io.WriteString(w, `"`+big+`"`)
	})
	e.agentServer("chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 10; i++ {
			_, _ = io.WriteString(w, big[:1<<20])
			w.(http.Flusher).Flush()
		}
	})
	e.agentServer("justfits", ok(`"`+strings.Repeat("b", delegation.MaxResultBytes-2)+`"`))
	for _, name := range []string{"sized", "chunked"} {
		rec := e.delegate(delegation.Request{Target: name, Task: "t"})
		assert.Equal(t, delegation.StatusFailed, rec.Status, name)
		assert.Equal(t, delegation.CodeResponseTooLarge, rec.Code, name)
		assert.Contains(t, rec.Error, "over the limit of 4194304 bytes")
		assert.Empty(t, rec.Result)
		assert.Equal(t, 1, rec.Attempts)
	}
	rec := e.delegate(delegation.Request{Target: "justfits", Task: "t"})
	assert.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
	assert.Len(t, rec.Result, delegation.MaxResultBytes)
}

// Bad input: an agent answering garbage instead of HTTP → bad_response;
// garbage inside a 200 is a string result (docs/AGENTS.md#the-reply).
func TestHTTPGarbage(t *testing.T) {
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				_, _ = conn.Read(buf)
				_, _ = io.WriteString(conn, "\x00\x01 this is not HTTP at all\r\n\r\n")
			}()
		}
	}()
	e.register(registry.Agent{Name: "garbage", Endpoint: "http://" + ln.Addr().String() + "/task"})
	rec := e.delegate(delegation.Request{Target: "garbage", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeBadResponse, rec.Code, rec.Error)
	assert.Equal(t, 1, rec.Attempts, "the request reached the agent: not retried")

	e.agentServer("binary", ok("\xff\xfe\x00garbage"))
	rec = e.delegate(delegation.Request{Target: "binary", Task: "t"})
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.JSONEq(t, `"\ufffd\u0000garbage"`, string(rec.Result))
}

// Bad input: an agent that is down (connection refused) → retried twice,
// then failed agent_unreachable, attempts 3.
func TestHTTPAgentDown(t *testing.T) {
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	e.register(registry.Agent{Name: "down", Endpoint: "http://" + addr + "/task"})

	rec := e.delegate(delegation.Request{Target: "down", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentUnreachable, rec.Code)
	assert.Equal(t, "cannot connect to the agent: connection refused", rec.Error)
	assert.NotContains(t, rec.Error, "127.0.0.1", "the address is not repeated")
	assert.Equal(t, 3, rec.Attempts)
	assert.Len(t, e.sleeps.all(), 2)
}

// Outbound calls (docs/SECURITY.md#outbound-calls-ssrf), at dial time: a name
// that resolves to a private address with the policy on →
// endpoint_not_allowed, never retried, agent not called.
func TestHTTPEndpointPolicyAtDialTime(t *testing.T) {
	var calls counter
	srv := httptest.NewServer(calls.wrap(ok(`{"result":1}`)))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	client, lookups := loopbackPolicyClient(t)
	e := newEnv(t, &delegation.Options{HTTPClient: client})
	e.register(registry.Agent{Name: "sneaky", Endpoint: fmt.Sprintf("http://agent.example.com:%d/task", port)})

	rec := e.delegate(delegation.Request{Target: "sneaky", Task: "t"})
	assertRefusedAtDialTime(t, rec)
	assert.Zero(t, calls.get(), "the refused address was contacted")
	assert.Equal(t, 1, lookups.get())
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): a DNS failure is
// retried like a refused connection.
func TestHTTPDNSFailureRetried(t *testing.T) {
	var lookups counter
	client := (*netguard.Policy)(nil).NewClient(&netguard.ClientOptions{
		LookupIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
			lookups.n.Add(1)
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
	})
	e := newEnv(t, &delegation.Options{HTTPClient: client})
	e.register(registry.Agent{Name: "ghost", Endpoint: "http://ghost.example.com/task"})
	rec := e.delegate(delegation.Request{Target: "ghost", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentUnreachable, rec.Code)
	assert.Equal(t, "cannot connect to the agent: the host name does not resolve", rec.Error)
	assert.Equal(t, 3, rec.Attempts)
	assert.Equal(t, 3, lookups.get())
}

// Bad input: a slow agent → timeout at the deadline, never a hang, not
// retried; the agent's request is cancelled.
func TestHTTPSlowAgentTimesOut(t *testing.T) {
	e := newEnv(t, nil)
	var calls counter
	gone := make(chan struct{}, 1)
	e.agentServer("slow", calls.wrap(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client leaving
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	}))
	start := time.Now()
	rec := e.delegate(delegation.Request{Target: "slow", Task: "t", Timeout: 150 * time.Millisecond})
	elapsed := time.Since(start)
	assert.Equal(t, delegation.StatusTimeout, rec.Status)
	assert.Equal(t, delegation.CodeTimeout, rec.Code)
	assert.Equal(t, "no reply within 150ms", rec.Error)
	assert.Less(t, elapsed, 2*time.Second)
	assert.GreaterOrEqual(t, elapsed, 150*time.Millisecond)
	assert.Equal(t, 1, rec.Attempts)
	assert.Equal(t, 1, calls.get())
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's request was not cancelled")
	}
}

// The caller's ctx bounds the delegation too: cancelling it makes the
// record canceled; its deadline makes it timeout.
func TestHTTPCallerContext(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	rec, err := e.c.Delegate(ctx, delegation.Request{Target: "slow", Task: "t"})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusTimeout, rec.Status)
	assert.Equal(t, "no reply before the caller's deadline", rec.Error)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	rec, err = e.c.Delegate(ctx, delegation.Request{Target: "slow", Task: "t"})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, rec.Status)
	assert.Equal(t, delegation.CodeCanceled, rec.Code)

	_, err = e.c.Delegate(ctx, delegation.Request{Target: "slow", Task: "t"})
	assert.ErrorIs(t, err, context.Canceled, "a done ctx refuses before anything")
}

func TestHTTPTransportDirect(t *testing.T) {
	// The transport alone: its errors are *TransportError.
	tr := delegation.NewHTTPTransport(nil)
	_, err := tr.Send(context.Background(), registry.Agent{Name: "x", Endpoint: "http://127.0.0.1:1/task"},
		delegation.Message{DelegationID: "id", Task: "t"})
	var te *delegation.TransportError
	require.True(t, errors.As(err, &te))
	assert.True(t, te.Retryable)
	assert.Equal(t, delegation.CodeAgentUnreachable, te.Code)
	assert.Equal(t, delegation.CodeAgentUnreachable, delegation.Code(err))

	_, err = tr.Send(context.Background(), registry.Agent{Name: "x", Endpoint: "http://[::1"},
		delegation.Message{DelegationID: "id", Task: "t"})
	require.True(t, errors.As(err, &te))
	assert.False(t, te.Retryable)
	var ue *url.Error
	assert.True(t, errors.As(err, &ue))
}

// An agent whose error reply echoes its request headers does not expose
// its own token on the record every reader sees.
func TestHTTPErrorBodyMasksTheAgentsToken(t *testing.T) {
	e := newEnv(t, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, "refused; you sent Authorization: %s and X-Api-Key=%s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	}))
	defer srv.Close()
	e.register(registry.Agent{Name: "echoer", Endpoint: srv.URL,
		Auth: &registry.Auth{Type: registry.AuthBearer, Token: "agent-secret-0123"}})
	rec := e.delegate(delegation.Request{Target: "echoer", Task: "t"})
	require.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentError, rec.Code)
	assert.Contains(t, rec.Error, "agent returned 403")
	assert.NotContains(t, rec.Error, "agent-secret-0123")
	assert.Contains(t, rec.Error, "[redacted]")
	assert.NotContains(t, fmt.Sprint(e.stored(rec.ID)), "agent-secret-0123", "nor is it stored")
}

// A name that does not resolve says so without the resolver's address.
func TestHTTPAgentNameDoesNotResolve(t *testing.T) {
	e := newEnv(t, nil)
	e.register(registry.Agent{Name: "nowhere", Endpoint: "http://agent.invalid/task"})
	rec := e.delegate(delegation.Request{Target: "nowhere", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentUnreachable, rec.Code, rec.Error)
	assert.Contains(t, []string{
		"cannot connect to the agent: the host name does not resolve",
		"cannot connect to the agent: the host name lookup failed",
		"cannot connect to the agent: the host name lookup timed out",
	}, rec.Error)
	assert.NotRegexp(t, `\d+\.\d+\.\d+\.\d+|:53\b`, rec.Error, "no address or resolver")
}
