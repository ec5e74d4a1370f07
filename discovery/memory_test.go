package discovery_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/harness/registrytest"
	"github.com/agentmesh/agentmesh/registry"
)

// BenchmarkFollowMemory reports, as B/agent, the heap an engine that
// follows a registry keeps per agent beyond the registry's own records
// (which it shares): the live heap after GC with the records alone, then
// with the engine built from them, divided by the agents. "snapshot"
// indexes them as the registry's snapshot (a mesh opening its store),
// "events" one registration event at a time (a mesh being filled).
func BenchmarkFollowMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		agents := benchCorpus(n)
		measure := func(b *testing.B, build func() (*discovery.Engine, func())) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				e, stop := build()
				if got := e.Len(); got != n {
					b.Fatalf("indexed %d agents, want %d", got, n)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/agent")
				stop()
			}
		}
		b.Run(fmt.Sprintf("snapshot/n=%d", n), func(b *testing.B) {
			measure(b, func() (*discovery.Engine, func()) {
				e := discovery.New(nil)
				return e, e.Follow(registrytest.NewSource(agents...))
			})
		})
		b.Run(fmt.Sprintf("events/n=%d", n), func(b *testing.B) {
			measure(b, func() (*discovery.Engine, func()) {
				src := registrytest.NewSource()
				e := discovery.New(nil)
				stop := e.Follow(src)
				for _, a := range agents {
					src.Emit(registry.Event{Type: registry.EventPut, Agent: a, Created: true})
				}
				return e, stop
			})
		})
	}
}
