package routing

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/delegation"
)

// tracedRouterEnv is newRouterEnv with a router tracing into a recorder.
func tracedRouterEnv(t *testing.T) (*routerEnv, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return newRouterEnv(t, envConfig{router: &RouterOptions{TracerProvider: tp}}), sr
}

// ended returns the spans recorded since the last Reset, by name (the
// last one of each name).
func ended(sr *tracetest.SpanRecorder) map[string]sdktrace.ReadOnlySpan {
	m := make(map[string]sdktrace.ReadOnlySpan)
	for _, s := range sr.Ended() {
		m[s.Name()] = s
	}
	return m
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func requireParent(t *testing.T, parent, child sdktrace.ReadOnlySpan) {
	t.Helper()
	require.NotNil(t, parent)
	require.NotNil(t, child)
	require.Equal(t, parent.SpanContext().TraceID(), child.SpanContext().TraceID(), child.Name())
	require.Equal(t, parent.SpanContext().SpanID(), child.Parent().SpanID(), "%s under %s", child.Name(), parent.Name())
}

// requireNoInput fails if a span quotes input.
func requireNoInput(t *testing.T, sr *tracetest.SpanRecorder, input string) {
	t.Helper()
	for _, s := range sr.Ended() {
		assert.NotContains(t, s.Status().Description, input, s.Name())
		for _, kv := range s.Attributes() {
			assert.NotContains(t, kv.Value.Emit(), input, "%s: %s", s.Name(), kv.Key)
		}
	}
}

// Tracing (docs/OPERATIONS.md#tracing): a routed request is a routing.route
// span in the caller's trace with classify, gate and dispatch under it, and
// the dispatcher's work (the delegation) under dispatch; decisions, agents
// and confidence are attributes, the input only by its length.
func TestTracingRoutedRequest(t *testing.T) {
	e, sr := tracedRouterEnv(t)
	caller := sdktrace.NewTracerProvider() // a separate provider: only its context matters
	ctx, parent := caller.Tracer("test").Start(context.Background(), "caller")
	input := "What is the budget for Engineering? Ask jane.doe@example.com"
	resp, err := e.router.Handle(ctx, Request{Input: input, UserID: "alice"})
	parent.End()
	require.NoError(t, err)
	require.Equal(t, "finance", resp.AgentID)

	s := ended(sr)
	route, cls, gate, disp := s["routing.route"], s["routing.classify"], s["routing.gate"], s["routing.dispatch"]
	require.NotNil(t, route)
	assert.Equal(t, parent.SpanContext().TraceID(), route.SpanContext().TraceID())
	assert.Equal(t, parent.SpanContext().SpanID(), route.Parent().SpanID())
	requireParent(t, route, cls)
	requireParent(t, route, gate)
	requireParent(t, route, disp)
	assert.True(t, !cls.EndTime().After(gate.StartTime()) && !gate.EndTime().After(disp.StartTime()),
		"classify, then gate, then dispatch")

	a := spanAttrs(route)
	assert.Equal(t, resp.RequestID, a["agentmesh.request.id"].AsString())
	assert.Equal(t, int64(len(input)), a["agentmesh.task.length"].AsInt64())
	assert.Equal(t, "route", a["agentmesh.routing.decision"].AsString())
	assert.Equal(t, "confidence", a["agentmesh.routing.reason"].AsString())
	assert.Equal(t, "finance", a["agentmesh.agent.name"].AsString())
	assert.Equal(t, resp.DelegationID, a["agentmesh.delegation.id"].AsString())
	a = spanAttrs(cls)
	assert.Equal(t, "finance", a["agentmesh.routing.classified_agent"].AsString())
	assert.Equal(t, 0.9, a["agentmesh.routing.confidence"].AsFloat64())
	assert.False(t, a["agentmesh.routing.ambiguous"].AsBool())
	assert.Equal(t, "en", a["agentmesh.routing.language"].AsString())
	a = spanAttrs(gate)
	assert.Equal(t, "route", a["agentmesh.routing.decision"].AsString())
	assert.Equal(t, "finance", a["agentmesh.agent.name"].AsString())
	assert.True(t, a["agentmesh.routing.clarification"].AsBool())
	a = spanAttrs(disp)
	assert.Equal(t, "finance", a["agentmesh.agent.name"].AsString())
	assert.False(t, a["agentmesh.routing.fallback"].AsBool())
	for _, sp := range []sdktrace.ReadOnlySpan{route, cls, gate, disp} {
		assert.Equal(t, codes.Unset, sp.Status().Code, sp.Name())
	}
	requireNoInput(t, sr, "budget for Engineering")
	requireNoInput(t, sr, "jane.doe")

	// The next message bypasses classification: no classify or gate span.
	sr.Reset()
	resp = e.handle(Request{Input: "and next year?", UserID: "alice"})
	s = ended(sr)
	assert.Nil(t, s["routing.classify"])
	assert.Nil(t, s["routing.gate"])
	requireParent(t, s["routing.route"], s["routing.dispatch"])
	assert.Equal(t, "session", spanAttrs(s["routing.dispatch"])["agentmesh.routing.reason"].AsString())
}

// The dispatcher runs under the dispatch span; a fallback is marked; a
// request no agent could take, and a classifier failure, are errors with
// their codes.
func TestTracingRoutingFallbackAndErrors(t *testing.T) {
	e, sr := tracedRouterEnv(t)
	e.finance.fail.Store(true)
	resp := e.handle(Request{Input: "budget please"})
	require.Equal(t, "helpdesk", resp.AgentID)
	s := ended(sr)
	disp := s["routing.dispatch"]
	a := spanAttrs(disp)
	assert.True(t, a["agentmesh.routing.fallback"].AsBool())
	assert.Equal(t, "helpdesk", a["agentmesh.agent.name"].AsString())
	assert.Equal(t, "fallback", spanAttrs(s["routing.route"])["agentmesh.routing.decision"].AsString())

	// The dispatcher sees the dispatch span as its context's span.
	sr.Reset()
	var seen trace.SpanContext
	router, err := New(e.cls, e.reg, seeDispatcher{func(ctx context.Context) {
		seen = trace.SpanContextFromContext(ctx)
	}, e.del}, nil, &RouterOptions{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = router.Close() })
	_, err = router.Handle(e.ctx, Request{Input: "budget please"})
	require.NoError(t, err)
	disp = ended(sr)["routing.dispatch"]
	assert.Equal(t, disp.SpanContext().SpanID(), seen.SpanID())

	// Nobody can take it: the route span is an error.
	sr.Reset()
	e.helpdesk.fail.Store(true)
	_, err = e.router.Handle(e.ctx, Request{Input: "budget please"})
	require.ErrorIs(t, err, ErrUnavailable)
	s = ended(sr)
	for _, name := range []string{"routing.route", "routing.dispatch"} {
		assert.Equal(t, codes.Error, s[name].Status().Code, name)
		assert.Equal(t, "unavailable", s[name].Status().Description, name)
		assert.Equal(t, "unavailable", spanAttrs(s[name])["error.type"].AsString(), name)
	}

	// A classifier failure: classify is an error, the request falls back.
	sr.Reset()
	e.helpdesk.fail.Store(false)
	e.cls.setErr(errors.New("llm down: budget please"))
	resp = e.handle(Request{Input: "budget please"})
	assert.Equal(t, ReasonClassifierError, resp.Reason)
	cls := ended(sr)["routing.classify"]
	assert.Equal(t, codes.Error, cls.Status().Code)
	assert.Equal(t, "classifier_error", cls.Status().Description)
	requireNoInput(t, sr, "budget please")
}

// seeDispatcher is a Dispatcher that reports its context to see, then
// delegates through d.
type seeDispatcher struct {
	see func(ctx context.Context)
	d   Dispatcher
}

func (s seeDispatcher) Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error) {
	s.see(ctx)
	return s.d.Delegate(ctx, req)
}
