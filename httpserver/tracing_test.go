package httpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// tracedMesh is a whole mesh — registry, discovery, delegation client,
// router over sessions, HTTP server — with every part tracing through tp
// and propagating with prop (both nil: the defaults, tracing off), and one
// http agent, "finance", that records the headers it receives.
type tracedMesh struct {
	url     string
	mu      sync.Mutex
	headers []http.Header
}

const (
	tracedToken = "trace-test-token"
	// tracedInput is user text that must not reach any span.
	tracedInput = "What is the budget of jane.doe@example.com?"
)

func newTracedMesh(t *testing.T, tp trace.TracerProvider, prop propagation.TextMapPropagator) *tracedMesh {
	t.Helper()
	ctx := context.Background()
	m := &tracedMesh{}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.headers = append(m.headers, r.Header.Clone())
		m.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":"42k EUR"}`)
	}))
	t.Cleanup(agent.Close)

	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := newRegistry(t, store)
	_, _, err := reg.Register(ctx, registry.Agent{Name: "finance", Description: "Budgets.", Endpoint: agent.URL + "/task", IsDefault: true})
	require.NoError(t, err)
	engine := discovery.New(nil)
	t.Cleanup(engine.Follow(reg))
	del, err := delegation.New(ctx, reg, store, &delegation.Options{TracerProvider: tp, Propagator: prop})
	require.NoError(t, err)
	t.Cleanup(func() { _ = del.Close() })
	sessions, err := session.NewManager(store, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sessions.Close() })
	router, err := routing.New(financeClassifier{}, reg, del, sessions, &routing.RouterOptions{TracerProvider: tp})
	require.NoError(t, err)
	t.Cleanup(func() { _ = router.Close() })
	srv, err := httpserver.New(reg, engine, del, &httpserver.Options{
		Token: tracedToken, Router: router, Sessions: sessions,
		TracerProvider: tp, Propagator: prop,
	})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	m.url = ts.URL
	return m
}

// financeClassifier sends everything to finance, confidently.
type financeClassifier struct{}

func (financeClassifier) Classify(context.Context, string) (routing.Classification, error) {
	return routing.Classification{AgentID: "finance", Confidence: 0.95, DetectedLanguage: "en"}, nil
}

// post sends body to path with the token and the extra headers hdr.
func (m *tracedMesh) post(t *testing.T, path string, body any, hdr http.Header) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, m.url+path, strings.NewReader(string(data)))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tracedToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (m *tracedMesh) agentHeaders() []http.Header {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]http.Header(nil), m.headers...)
}

func recorded() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	sr := tracetest.NewSpanRecorder()
	return sr, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
}

// byName returns the ended spans by name (each name must occur once).
func byName(t *testing.T, sr *tracetest.SpanRecorder) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	m := make(map[string]sdktrace.ReadOnlySpan)
	for _, s := range sr.Ended() {
		require.NotContains(t, m, s.Name(), "span %s twice", s.Name())
		m[s.Name()] = s
	}
	return m
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// requireTree checks that each span of the path is the parent of the
// next one, in one trace.
func requireTree(t *testing.T, spans map[string]sdktrace.ReadOnlySpan, path ...string) {
	t.Helper()
	for i := 1; i < len(path); i++ {
		parent, child := spans[path[i-1]], spans[path[i]]
		require.NotNil(t, parent, "no span %s", path[i-1])
		require.NotNil(t, child, "no span %s", path[i])
		require.Equal(t, parent.SpanContext().TraceID(), child.SpanContext().TraceID(), child.Name())
		require.Equal(t, parent.SpanContext().SpanID(), child.Parent().SpanID(), "%s under %s", child.Name(), parent.Name())
	}
}

// agentParent decodes the traceparent an agent received.
func agentParent(t *testing.T, h http.Header) trace.SpanContext {
	t.Helper()
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, h.Get("Traceparent"))
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
	require.True(t, sc.IsValid())
	return sc
}

// A routed request is one trace (docs/OPERATIONS.md#tracing) — the HTTP request's server span
// (continuing the caller's traceparent), routing.route, classify, gate and
// dispatch, the delegation and the agent call — and the agent receives a
// traceparent naming the agent call's span.
func TestTracingRoutedRequestSpanTree(t *testing.T) {
	sr, tp := recorded()
	m := newTracedMesh(t, tp, propagation.TraceContext{})
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	resp := m.post(t, "/v1/request", map[string]any{"input": tracedInput, "user_id": "u1"}, http.Header{
		"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"},
		"Tracestate":  {"vendor=opaque"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	spans := byName(t, sr)
	requireTree(t, spans, "POST /v1/request", "routing.route", "routing.dispatch", "delegation.delegate", "delegation.attempt")
	requireTree(t, spans, "routing.route", "routing.classify")
	requireTree(t, spans, "routing.route", "routing.gate")

	server := spans["POST /v1/request"]
	assert.Equal(t, callerTrace, server.SpanContext().TraceID().String(), "the caller's trace is continued")
	assert.Equal(t, callerSpan, server.Parent().SpanID().String())
	assert.True(t, server.Parent().IsRemote())
	assert.Equal(t, "vendor=opaque", server.SpanContext().TraceState().String())
	assert.Equal(t, trace.SpanKindServer, server.SpanKind())
	a := attrsOf(server)
	assert.Equal(t, "POST", a["http.request.method"].AsString())
	assert.Equal(t, "/v1/request", a["http.route"].AsString())
	assert.Equal(t, "/v1/request", a["url.path"].AsString())
	assert.Equal(t, "http", a["url.scheme"].AsString())
	assert.Equal(t, int64(200), a["http.response.status_code"].AsInt64())
	assert.Equal(t, resp.Header.Get("X-Request-Id"), a["agentmesh.request.id"].AsString())
	assert.Equal(t, codes.Unset, server.Status().Code)

	assert.Equal(t, "finance", attrsOf(spans["routing.classify"])["agentmesh.routing.classified_agent"].AsString())
	assert.Equal(t, "route", attrsOf(spans["routing.gate"])["agentmesh.routing.decision"].AsString())
	assert.Equal(t, "finance", attrsOf(spans["delegation.attempt"])["agentmesh.agent.name"].AsString())

	hs := m.agentHeaders()
	require.Len(t, hs, 1)
	sc := agentParent(t, hs[0])
	assert.Equal(t, callerTrace, sc.TraceID().String())
	assert.Equal(t, spans["delegation.attempt"].SpanContext().SpanID(), sc.SpanID())
	assert.Equal(t, "vendor=opaque", hs[0].Get("Tracestate"), "tracestate travels with the trace")

	for _, s := range sr.Ended() {
		for _, kv := range s.Attributes() {
			assert.NotContains(t, kv.Value.Emit(), "jane.doe", "%s: %s", s.Name(), kv.Key)
			assert.NotContains(t, kv.Value.Emit(), "budget of", "%s: %s", s.Name(), kv.Key)
			assert.NotContains(t, kv.Value.Emit(), tracedToken, "%s: %s", s.Name(), kv.Key)
		}
	}
}

// A plain delegation without a traceparent starts a trace: the server
// span, the delegation, the attempt, and the agent in the same trace.
// Unrouted requests are named by method alone; 4xx are not errors, 5xx
// would be.
func TestTracingDelegateRequest(t *testing.T) {
	sr, tp := recorded()
	m := newTracedMesh(t, tp, propagation.TraceContext{})
	resp := m.post(t, "/v1/delegate?x=secret-query", map[string]any{"targetName": "finance", "task": tracedInput}, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	spans := byName(t, sr)
	requireTree(t, spans, "POST /v1/delegate", "delegation.delegate", "delegation.attempt")
	server := spans["POST /v1/delegate"]
	assert.False(t, server.Parent().IsValid(), "a new trace")
	assert.Equal(t, "/v1/delegate", attrsOf(server)["url.path"].AsString(), "the path, never the query")
	sc := agentParent(t, m.agentHeaders()[0])
	assert.Equal(t, server.SpanContext().TraceID(), sc.TraceID())

	sr.Reset()
	req, _ := http.NewRequest(http.MethodGet, m.url+"/v1/nowhere", nil)
	req.Header.Set("Authorization", "Bearer "+tracedToken)
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	r.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, m.url+"/v1/agents", nil)
	r, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	r.Body.Close()
	var unrouted, unauth sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "GET":
			unrouted = s
		case "GET /v1/agents":
			unauth = s
		}
	}
	require.NotNil(t, unrouted, "a request no route matched is named by its method")
	assert.NotContains(t, attrsOf(unrouted), attribute.Key("http.route"))
	assert.Equal(t, int64(404), attrsOf(unrouted)["http.response.status_code"].AsInt64())
	require.NotNil(t, unauth)
	assert.Equal(t, int64(401), attrsOf(unauth)["http.response.status_code"].AsInt64())
	assert.Equal(t, codes.Unset, unauth.Status().Code, "a 4xx is the client's error, not the server's")
}

// With no provider and no propagator configured (nor installed
// globally), an incoming traceparent is not extracted and the agent gets
// no trace header: the no-op global propagator neither extracts nor
// injects.
func TestTracingOffServer(t *testing.T) {
	m := newTracedMesh(t, nil, nil)
	resp := m.post(t, "/v1/delegate", map[string]any{"targetName": "finance", "task": "t"}, http.Header{
		"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	hs := m.agentHeaders()
	require.Len(t, hs, 1)
	assert.Empty(t, hs[0].Get("Traceparent"))
	assert.Empty(t, hs[0].Get("Tracestate"))
}

// BenchmarkServeTracing measures one authenticated GET /v1/agents/{name}
// through the server in process (no listener), with tracing off — the
// defaults: the global no-op provider and propagator — and on: an SDK
// provider sampling every span into a batch processor whose exporter drops
// them, and the W3C propagator, with a traceparent on every request.
func BenchmarkServeTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "tracing=off"
		if on {
			name = "tracing=on"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			reg := newRegistry(b, memstore.New())
			_, _, err := reg.Register(ctx, registry.Agent{Name: "finance", Description: "Budgets.", Endpoint: "https://agents.example.com/task"})
			require.NoError(b, err)
			eng := discovery.New(nil)
			b.Cleanup(eng.Follow(reg))
			opts := &httpserver.Options{Token: adminToken}
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(dropExporter{}))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts.TracerProvider, opts.Propagator = tp, propagation.TraceContext{}
			}
			srv, err := httpserver.New(reg, eng, nil, opts)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodGet, "/v1/agents/finance", nil)
				r.Header.Set("Authorization", "Bearer "+adminToken)
				r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// dropExporter drops every span it is given.
type dropExporter struct{}

func (dropExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropExporter) Shutdown(context.Context) error                             { return nil }
