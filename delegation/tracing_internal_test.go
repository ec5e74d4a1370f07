package delegation

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/registry"
)

// BenchmarkTracingInstrumentation isolates what the tracing code of one
// delegation costs — the delegation span, one attempt span and the
// injection into the request's headers — with tracing off (the global
// no-op provider and propagator) and on (an SDK provider that samples
// everything and drops the spans at the end).
func BenchmarkTracingInstrumentation(b *testing.B) {
	on := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(dropProcessor{}))
	for _, bc := range []struct {
		name string
		tp   trace.TracerProvider
		prop propagation.TextMapPropagator
	}{
		{"tracing=off", nil, nil},
		{"tracing=on", on, propagation.TraceContext{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &Client{tracer: tracing.Tracer(bc.tp, tracerName)}
			prop := tracing.Propagator(bc.prop)
			p := &plan{agent: registry.Agent{Name: "finance", Protocol: registry.ProtocolHTTP}}
			req := &Request{Target: "finance", Task: "Get budget and cost center for Engineering"}
			rec := Record{ID: "3f1c9a52", TargetAgent: "finance", Status: StatusCompleted, Attempts: 1, Depth: 1}
			ctx := context.Background()
			h := make(http.Header, 4)
			b.ReportAllocs()
			for b.Loop() {
				dctx, span := c.startDelegate(ctx, req)
				actx, attempt := c.startAttempt(dctx, p, rec.ID, 1)
				tracing.Inject(actx, prop, h)
				endAttempt(attempt, Reply{}, nil)
				endDelegate(span, &rec, nil)
			}
		})
	}
}

// dropProcessor ends the SDK's work at OnEnd: no export.
type dropProcessor struct{}

func (dropProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropProcessor) Shutdown(context.Context) error                  { return nil }
func (dropProcessor) ForceFlush(context.Context) error                { return nil }
