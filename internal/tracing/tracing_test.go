package tracing

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// countingPropagator is the W3C propagator, counting its Inject calls.
type countingPropagator struct {
	propagation.TraceContext
	injects int
}

func (p *countingPropagator) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	p.injects++
	p.TraceContext.Inject(ctx, c)
}

var remote = trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{0x4b, 0xf9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
	SpanID:     trace.SpanID{0, 0xf0, 0x67, 1, 2, 3, 4, 5},
	TraceFlags: trace.FlagsSampled,
	Remote:     true,
}))

func TestInject(t *testing.T) {
	p := &countingPropagator{}
	h := http.Header{}
	Inject(context.Background(), p, h)
	assert.Empty(t, h)
	assert.Zero(t, p.injects, "no span context: the propagator is not called")

	Inject(remote, p, h)
	assert.Equal(t, "00-4bf90102030405060708090a0b0c0d0e-00f0670102030405-01", h.Get("Traceparent"))
	assert.Equal(t, 1, p.injects)
}

func TestInjectCopy(t *testing.T) {
	p := propagation.TraceContext{}
	h := http.Header{"User-Agent": {"x"}}
	same := InjectCopy(context.Background(), p, h)
	assert.Equal(t, http.Header{"User-Agent": {"x"}}, same)

	out := InjectCopy(remote, p, h)
	assert.NotEmpty(t, out.Get("Traceparent"))
	assert.Equal(t, "x", out.Get("User-Agent"))
	assert.Empty(t, h.Get("Traceparent"), "the request's own header is not modified")
	assert.NotEmpty(t, InjectCopy(remote, p, nil).Get("Traceparent"))
}

func TestDefaultsAreTheGlobals(t *testing.T) {
	assert.Equal(t, otel.GetTextMapPropagator(), Propagator(nil))
	p := propagation.TraceContext{}
	assert.Equal(t, p, Propagator(p))

	// The global provider, with nothing installed, is a no-op.
	_, span := Tracer(nil, "test").Start(context.Background(), "x")
	assert.False(t, span.IsRecording())
	assert.False(t, span.SpanContext().IsValid())
}

func TestFail(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	_, span := Tracer(tp, "test").Start(context.Background(), "x")
	Fail(span, "agent_error")
	span.End()
	require.Len(t, sr.Ended(), 1)
	s := sr.Ended()[0]
	assert.Equal(t, codes.Error, s.Status().Code)
	assert.Equal(t, "agent_error", s.Status().Description)
	assert.Equal(t, []any{"error.type", "agent_error"}, []any{string(s.Attributes()[0].Key), s.Attributes()[0].Value.AsString()})
	assert.Equal(t, "test", s.InstrumentationScope().Name)
	assert.NotEmpty(t, s.InstrumentationScope().Version)
}
