package delegation_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// discardExporter is an OTLP-less exporter: the SDK does all its work
// (sampling, recording, batching) and the spans are dropped at the end.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkDelegateTracing measures one synchronous delegation (records in
// memory, a local agent) with tracing off — the defaults: the global
// no-op provider and propagator — and on: an SDK provider sampling every
// span into a batch processor, and the W3C propagator. The difference
// between the two is what tracing costs when it is on; "off" is the
// cost with tracing unset.
func BenchmarkDelegateTracing(b *testing.B) {
	for _, bc := range []struct {
		name string
		on   bool
	}{{"tracing=off", false}, {"tracing=on", true}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			agent := newBenchAgent(b)
			reg := newBenchRegistry(b, registry.Agent{Name: "finance", Description: "budgets", Endpoint: agent.URL + "/task"})
			opts := &delegation.Options{}
			if bc.on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts.TracerProvider, opts.Propagator = tp, propagation.TraceContext{}
			}
			c, err := delegation.New(ctx, reg, memstore.New(), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			req := delegation.Request{Target: "finance", Task: "Get budget and cost center for Engineering"}
			for range 200 { // warm up connections and pools
				if _, err := c.Delegate(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec, err := c.Delegate(ctx, req)
				if err != nil || rec.Status != delegation.StatusCompleted {
					b.Fatal(err, rec.Error)
				}
			}
		})
	}
}
