package delegation_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// secretTask is a task whose text must never show up in a span.
const secretTask = "Pay invoice 4711 of jane.doe@example.com with card 4111 1111 1111 1111"

// tracer is an SDK tracer provider recording every span in memory.
type tracer struct {
	sr *tracetest.SpanRecorder
	tp *sdktrace.TracerProvider
}

func newTracer(t *testing.T) *tracer {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracer{sr: sr, tp: tp}
}

// options are client options tracing into tr, with the W3C propagator.
func (tr *tracer) options() *delegation.Options {
	return &delegation.Options{TracerProvider: tr.tp, Propagator: propagation.TraceContext{}}
}

// spans returns the ended spans called name, in the order they ended.
func (tr *tracer) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.sr.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span called name.
func (tr *tracer) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	s := tr.spans(name)
	require.Len(t, s, 1, "spans called %s", name)
	return s[0]
}

// requireChild checks that child's parent is parent, in parent's trace.
func requireChild(t *testing.T, parent trace.SpanContext, child sdktrace.ReadOnlySpan) {
	t.Helper()
	require.Equal(t, parent.TraceID(), child.SpanContext().TraceID(), "%s: trace id", child.Name())
	require.Equal(t, parent.SpanID(), child.Parent().SpanID(), "%s: parent span", child.Name())
}

// attrs returns the attributes of s as a map.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// requireNoText fails if any span's name, attributes or status quotes one of
// texts (spans carry lengths only, never task or reply text:
// docs/OPERATIONS.md#tracing).
func (tr *tracer) requireNoText(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range tr.sr.Ended() {
		for _, text := range texts {
			require.NotContains(t, s.Name(), text)
			require.NotContains(t, s.Status().Description, text, s.Name())
			for _, kv := range s.Attributes() {
				require.NotContains(t, kv.Value.Emit(), text, "%s: attribute %s", s.Name(), kv.Key)
			}
			for _, ev := range s.Events() {
				for _, kv := range ev.Attributes {
					require.NotContains(t, kv.Value.Emit(), text, "%s: event %s", s.Name(), ev.Name)
				}
			}
		}
	}
}

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-9a-f]$`)

// remoteParent decodes the traceparent (and tracestate) of h as the W3C
// propagator does, after checking its format.
func remoteParent(t *testing.T, h http.Header) trace.SpanContext {
	t.Helper()
	tp := h.Get("Traceparent")
	require.Regexp(t, traceparentRE, tp, "traceparent header")
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
	require.True(t, sc.IsValid() && sc.IsRemote(), "traceparent %q", tp)
	return sc
}

// headerLog records the headers of every request an agent receives.
type headerLog struct {
	mu  sync.Mutex
	all []http.Header
}

func (l *headerLog) add(h http.Header) {
	l.mu.Lock()
	l.all = append(l.all, h.Clone())
	l.mu.Unlock()
}

func (l *headerLog) get() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.all...)
}

// Tracing (docs/OPERATIONS.md#tracing): a delegation is a span with one
// client span per attempt under it, in the caller's trace; the agent gets a
// traceparent naming the attempt's span, and no span carries the task's text.
func TestTracingDelegationHTTP(t *testing.T) {
	tr := newTracer(t)
	e := newEnv(t, tr.options())
	var got headerLog
	e.agentServer("billing", func(w http.ResponseWriter, r *http.Request) {
		got.add(r.Header)
		ok(`{"result":"paid"}`)(w, r)
	})

	ctx, caller := tr.tp.Tracer("test").Start(context.Background(), "caller")
	rec, err := e.c.Delegate(ctx, delegation.Request{Target: "billing", Task: secretTask, Context: map[string]any{"depth": 1}})
	caller.End()
	require.NoError(t, err)
	require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)

	del := tr.one(t, "delegation.delegate")
	att := tr.one(t, "delegation.attempt")
	requireChild(t, caller.SpanContext(), del)
	requireChild(t, del.SpanContext(), att)
	assert.Equal(t, trace.SpanKindInternal, del.SpanKind())
	assert.Equal(t, trace.SpanKindClient, att.SpanKind())
	assert.Equal(t, codes.Unset, del.Status().Code)
	assert.Equal(t, codes.Unset, att.Status().Code)

	a := attrs(del)
	assert.Equal(t, "billing", a["agentmesh.agent.name"].AsString())
	assert.Equal(t, rec.ID, a["agentmesh.delegation.id"].AsString())
	assert.Equal(t, "completed", a["agentmesh.delegation.status"].AsString())
	assert.Equal(t, int64(1), a["agentmesh.delegation.attempt"].AsInt64())
	assert.Equal(t, int64(2), a["agentmesh.delegation.depth"].AsInt64())
	assert.Equal(t, int64(len(secretTask)), a["agentmesh.task.length"].AsInt64())
	assert.False(t, a["agentmesh.delegation.async"].AsBool())
	a = attrs(att)
	assert.Equal(t, "billing", a["agentmesh.agent.name"].AsString())
	assert.Equal(t, "http", a["agentmesh.agent.protocol"].AsString())
	assert.Equal(t, rec.ID, a["agentmesh.delegation.id"].AsString())
	assert.Equal(t, int64(1), a["agentmesh.delegation.attempt"].AsInt64())
	assert.Equal(t, "completed", a["agentmesh.delegation.status"].AsString())

	hs := got.get()
	require.Len(t, hs, 1)
	sc := remoteParent(t, hs[0])
	assert.Equal(t, caller.SpanContext().TraceID(), sc.TraceID(), "the agent joins the caller's trace")
	assert.Equal(t, att.SpanContext().SpanID(), sc.SpanID(), "the agent's parent is the attempt span")
	assert.True(t, sc.IsSampled())
	tr.requireNoText(t, secretTask, "jane.doe", "4111")
}

// Each retry is a span of its own, with its number, the agent's status
// and whether it could be retried; the failed delegation's span is an
// error with the record's code, and each attempt's request names its own
// span as the parent. A refused request is an error span with no attempt.
func TestTracingRetriesAndFailures(t *testing.T) {
	tr := newTracer(t)
	e := newEnv(t, tr.options())
	var got headerLog
	var n int
	var mu sync.Mutex
	e.agentServer("flaky", func(w http.ResponseWriter, r *http.Request) {
		got.add(r.Header)
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			http.Error(w, "busy: "+secretTask, http.StatusServiceUnavailable)
			return
		}
		http.Error(w, "broken: "+secretTask, http.StatusInternalServerError)
	})

	rec := e.delegate(delegation.Request{Target: "flaky", Task: secretTask})
	require.Equal(t, delegation.StatusFailed, rec.Status)
	require.Equal(t, 2, rec.Attempts)

	del := tr.one(t, "delegation.delegate")
	assert.Equal(t, codes.Error, del.Status().Code)
	assert.Equal(t, "agent_error", del.Status().Description)
	a := attrs(del)
	assert.Equal(t, "failed", a["agentmesh.delegation.status"].AsString())
	assert.Equal(t, "agent_error", a["agentmesh.delegation.code"].AsString())
	assert.Equal(t, "agent_error", a["error.type"].AsString())
	assert.Equal(t, int64(2), a["agentmesh.delegation.attempt"].AsInt64())

	atts := tr.spans("delegation.attempt")
	require.Len(t, atts, 2)
	hs := got.get()
	require.Len(t, hs, 2)
	for i, want := range []struct {
		status    int64
		retryable bool
	}{{503, true}, {500, false}} {
		s := atts[i]
		requireChild(t, del.SpanContext(), s)
		a := attrs(s)
		assert.Equal(t, int64(i+1), a["agentmesh.delegation.attempt"].AsInt64())
		assert.Equal(t, want.status, a["http.response.status_code"].AsInt64())
		assert.Equal(t, want.retryable, a["agentmesh.delegation.retryable"].AsBool())
		assert.Equal(t, "agent_error", a["agentmesh.delegation.code"].AsString())
		assert.Equal(t, codes.Error, s.Status().Code)
		assert.Equal(t, s.SpanContext().SpanID(), remoteParent(t, hs[i]).SpanID(), "attempt %d", i+1)
	}
	tr.requireNoText(t, secretTask, "busy", "broken")

	// Refused before any attempt: an error span, no attempt span.
	tr.sr.Reset()
	_, err := e.c.Delegate(context.Background(), delegation.Request{Target: "nobody", Task: secretTask})
	require.ErrorIs(t, err, delegation.ErrNotFound)
	del = tr.one(t, "delegation.delegate")
	assert.Equal(t, "not_found", del.Status().Description)
	assert.Equal(t, "nobody", attrs(del)["agentmesh.agent.name"].AsString())
	assert.Empty(t, tr.spans("delegation.attempt"))
	tr.requireNoText(t, secretTask)
}

// Tracing (docs/OPERATIONS.md#tracing): every request of an MCP delegation
// carries the trace context: the handshake and the tools/call, whose parent
// is the attempt's span.
func TestTracingDelegationMCP(t *testing.T) {
	tr := newTracer(t)
	e := newEnv(t, tr.options())
	var got headerLog
	methods := make(chan string, 16)
	s := mcp.NewServer(&mcp.Implementation{Name: "hr", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "handle_message", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var rpc struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &rpc)
		if rpc.Method == "tools/call" {
			got.add(r.Header)
		}
		methods <- r.Method + " " + rpc.Method
		if r.Method == http.MethodPost {
			assert.NotEmpty(t, r.Header.Get("Traceparent"), "%s %s without traceparent", r.Method, rpc.Method)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.register(registry.Agent{Name: "hr", Endpoint: srv.URL, Protocol: registry.ProtocolMCP})

	rec := e.delegate(delegation.Request{Target: "hr", Task: secretTask})
	require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)

	del := tr.one(t, "delegation.delegate")
	att := tr.one(t, "delegation.attempt")
	requireChild(t, del.SpanContext(), att)
	assert.Equal(t, "mcp", attrs(att)["agentmesh.agent.protocol"].AsString())
	hs := got.get()
	require.Len(t, hs, 1, "one tools/call")
	sc := remoteParent(t, hs[0])
	assert.Equal(t, att.SpanContext().TraceID(), sc.TraceID())
	assert.Equal(t, att.SpanContext().SpanID(), sc.SpanID())
	assert.Contains(t, drain(methods), "POST tools/call")
	tr.requireNoText(t, secretTask)
}

// drain returns what ch holds now, joined.
func drain(ch chan string) string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return strings.Join(out, ", ")
		}
	}
}

// Tracing (docs/OPERATIONS.md#tracing): the A2A transport sends the trace
// context with SendMessage and with every GetTask of a task it polls.
func TestTracingDelegationA2A(t *testing.T) {
	tr := newTracer(t)
	e := newEnv(t, tr.options())
	release := make(chan struct{})
	a := newA2ATestAgent(t, workUntil(release), a2aAgentOpts{returnImmediately: true})
	time.AfterFunc(150*time.Millisecond, func() { close(release) })
	e.register(a.record("finance"))

	rec := e.delegate(delegation.Request{Target: "finance", Task: secretTask})
	require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)

	att := tr.one(t, "delegation.attempt")
	requireChild(t, tr.one(t, "delegation.delegate").SpanContext(), att)
	assert.Equal(t, "a2a", attrs(att)["agentmesh.agent.protocol"].AsString())
	reqs := a.allRequests()
	require.GreaterOrEqual(t, len(reqs), 2, "SendMessage and at least one GetTask")
	assert.Equal(t, "SendMessage", reqs[0].method)
	for _, r := range reqs {
		sc := remoteParent(t, r.header)
		assert.Equal(t, att.SpanContext().TraceID(), sc.TraceID(), r.method)
		assert.Equal(t, att.SpanContext().SpanID(), sc.SpanID(), r.method)
	}
	tr.requireNoText(t, secretTask)
}

// With no provider and no propagator configured (and none installed
// globally), the client uses the OpenTelemetry API's no-ops: the global
// propagator injects nothing, so agents get no trace header even when the
// caller's context carries a trace; no transport adds one. A client given
// only a propagator (a host that forwards traces without recording them)
// passes the caller's trace context through unchanged, since the no-op
// tracer's spans carry their parent's context.
func TestTracingOff(t *testing.T) {
	// What the no-op global propagator does: no fields, no headers.
	h := http.Header{}
	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	}))
	otel.GetTextMapPropagator().Inject(remote, propagation.HeaderCarrier(h))
	require.Empty(t, otel.GetTextMapPropagator().Fields())
	require.Empty(t, h)

	for _, tc := range []struct {
		name string
		opts *delegation.Options
		want bool // a traceparent is sent
	}{
		{"nothing configured", nil, false},
		{"propagator only", &delegation.Options{Propagator: propagation.TraceContext{}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			var got headerLog
			e.agentServer("plain", func(w http.ResponseWriter, r *http.Request) {
				got.add(r.Header)
				ok(`{"result":1}`)(w, r)
			})
			mcpSeen := make(chan http.Header, 8)
			s := mcp.NewServer(&mcp.Implementation{Name: "m", Version: "1"}, nil)
			s.AddTool(&mcp.Tool{Name: "handle_message", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
				})
			mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
			msrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mcpSeen <- r.Header.Clone()
				mh.ServeHTTP(w, r)
			}))
			t.Cleanup(msrv.Close)
			e.register(registry.Agent{Name: "mcpagent", Endpoint: msrv.URL, Protocol: registry.ProtocolMCP})
			a2aAgent := newA2ATestAgent(t, replyMessage(a2a.NewTextPart("ok")), a2aAgentOpts{})
			e.register(a2aAgent.record("a2aagent"))

			for _, ctx := range []context.Context{context.Background(), remote} {
				for _, name := range []string{"plain", "mcpagent", "a2aagent"} {
					rec, err := e.c.Delegate(ctx, delegation.Request{Target: name, Task: "t"})
					require.NoError(t, err)
					require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
				}
			}
			var all []http.Header
			all = append(all, got.get()...)
			for _, r := range a2aAgent.allRequests() {
				all = append(all, r.header)
			}
			close(mcpSeen)
			for h := range mcpSeen {
				all = append(all, h)
			}
			sent := 0
			for i, h := range all {
				if h.Get("Traceparent") == "" {
					assert.Empty(t, h.Get("Tracestate"), "request %d", i)
					continue
				}
				sent++
				sc := remoteParent(t, h)
				assert.Equal(t, trace.SpanContextFromContext(remote).TraceID(), sc.TraceID(), "only the caller's trace passes through")
				assert.Equal(t, trace.SpanContextFromContext(remote).SpanID(), sc.SpanID(), "no span of the mesh's own")
			}
			if tc.want {
				// One request per delegation with a traced caller: the
				// MCP session was opened by the untraced first round.
				assert.Equal(t, 3, sent)
			} else {
				assert.Zero(t, sent, "no trace header with tracing off")
			}
		})
	}
}
