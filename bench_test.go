package agentmesh_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
)

var overheadStore = flag.String("overhead-store", "memory", "store of BenchmarkRoutingOverhead: memory or bolt")

// BenchmarkRoutingOverhead compares a discovery-only mesh — agents
// registered and discovered, no message routed — with routing on and off:
// registration and discovery over 2,000 agents, on the memory store by
// default, where no disk write hides the classifier's cost, or on a bbolt
// file (-overhead-store bolt). With routing on, a classifier not in use
// does not retrain on registrations: what routing adds is following the
// registry (a copy of each changed record for the classifier and one for
// the router).
//
//	go test -run XXX -bench RoutingOverhead -count 5 .
//	go test -run XXX -bench RoutingOverhead -count 5 . -overhead-store bolt
func BenchmarkRoutingOverhead(b *testing.B) {
	const seeded = 2000
	g := synthagents.New(1)
	for _, routed := range []bool{false, true} {
		ctx := context.Background()
		opts := &agentmesh.Options{}
		if *overheadStore == "bolt" {
			opts.Path = filepath.Join(b.TempDir(), "mesh.db")
		}
		if routed {
			opts.Routing = &agentmesh.RoutingOptions{}
		}
		m, err := agentmesh.Open(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		for i := range seeded {
			if _, _, err := m.Registry().Register(ctx, g.Agent("", i, 0).Registry()); err != nil {
				b.Fatal(err)
			}
		}
		if routed {
			if err := m.Lexical().Sync(ctx); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC() // the seeding's garbage is not the benchmark's
		name := fmt.Sprintf("routing=%v", map[bool]string{false: "off", true: "on"}[routed])
		b.Run(name+"/register", func(b *testing.B) {
			// New descriptions of the seeded agents: every registration
			// changes what the classifier would learn, the registry stays
			// the same size.
			i := 0
			for b.Loop() {
				a := g.Agent("", i%seeded, 0).Registry()
				a.Description += fmt.Sprintf(" Revision %d.", i)
				if _, _, err := m.Registry().Register(ctx, a); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(name+"/discover", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := m.Engine().Search(g.Query(i%1000), nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
