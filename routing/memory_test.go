package routing_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/registrytest"
	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

type memClassifier struct{}

func (memClassifier) Classify(context.Context, string) (routing.Classification, error) {
	return routing.Classification{}, nil
}

type memDispatcher struct{}

func (memDispatcher) Delegate(context.Context, delegation.Request) (delegation.Record, error) {
	return delegation.Record{}, nil
}

// heapPerAgent returns the live heap follow adds, divided by n: the heap
// after GC with the agents alone, then with what follow built from them.
func heapPerAgent(n int, follow func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := follow()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// BenchmarkFollowerMemory reports, as B/agent, the heap a Router and a
// Lexical classifier (its agents, not its model: no training runs) keep
// per agent they follow, beyond the registry's own records, which they
// share.
func BenchmarkFollowerMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		g := synthagents.New(1)
		agents := make([]registry.Agent, n)
		for i := range agents {
			agents[i] = g.Agent("", i, 5).Registry()
		}
		b.Run(fmt.Sprintf("router/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(heapPerAgent(n, func() any {
					src := registrytest.NewSource(agents...)
					r, err := routing.New(memClassifier{}, src, memDispatcher{}, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = r.Close() })
					return r
				}), "B/agent")
			}
		})
		b.Run(fmt.Sprintf("lexical/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(heapPerAgent(n, func() any {
					l := routing.NewLexical(nil)
					for _, a := range agents {
						l.Apply(registry.Event{Type: registry.EventPut, Agent: a})
					}
					b.Cleanup(func() { _ = l.Close() })
					return l
				}), "B/agent")
			}
		})
	}
}
