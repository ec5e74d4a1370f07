package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/registry"
)

// Durable registration throughput. Every write is an fsync'd commit; run
//
//	go test -run='^$' -bench=. -benchtime=2s ./store/boltstore
//
// writes/s is acknowledged durable writes per second, writes/commit the
// mean group-commit batch size. The Batch sub-benchmark is bbolt's own
// DB.Batch, for comparison with the group commit.
func BenchmarkRegister(b *testing.B) {
	b.Run("sequential", func(b *testing.B) {
		s := openBench(b)
		benchWriters(b, s, 1, func(ctx context.Context, name string) error { return register(ctx, s, name) })
	})
	for _, writers := range []int{2, 8, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := openBench(b)
			benchWriters(b, s, writers, func(ctx context.Context, name string) error { return register(ctx, s, name) })
		})
	}
	b.Run("writers=8/registry", func(b *testing.B) {
		s := openBench(b)
		reg, err := registry.New(b.Context(), s, &registry.Options{SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer reg.Close()
		benchWriters(b, s, 8, func(ctx context.Context, name string) error {
			_, _, err := reg.Register(ctx, benchAgent(name))
			return err
		})
	})
	b.Run("writers=8/bbolt-Batch", func(b *testing.B) {
		s := openBench(b)
		benchWriters(b, s, 8, func(_ context.Context, name string) error {
			return s.db.Batch(func(tx *bbolt.Tx) error {
				v, err := json.Marshal(benchAgent(name))
				if err != nil {
					return err
				}
				return tx.Bucket(bucketAgents).Put([]byte(name), v)
			})
		})
	})
}

func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "mesh.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// benchAgent is a registration of typical size (about 600 bytes of JSON).
func benchAgent(name string) registry.Agent {
	return registry.Agent{
		Name:         name,
		Description:  "Answers questions about budgets, cost centers and purchase orders for every department.",
		Capabilities: []string{"budget", "cost-center", "purchase-order", "finance"},
		Examples:     []string{"what is the Q3 budget for marketing?", "move 5k from travel to training"},
		Endpoint:     "https://" + name + ".agents.example.com/task",
		Protocol:     registry.ProtocolHTTP,
		Auth:         &registry.Auth{Type: registry.AuthBearer, Token: "0123456789abcdef0123456789abcdef"},
		Labels:       map[string]string{"team": "finance", "env": "prod"},
		TTLSeconds:   60,
	}
}

// register stores a new agent named name directly through the store.
func register(ctx context.Context, s *Store, name string) error {
	return s.UpdateAgent(ctx, name, func(cur *registry.Agent) (*registry.Agent, error) {
		a := benchAgent(name)
		if cur != nil {
			a.RegisteredAt = cur.RegisteredAt
		}
		return &a, nil
	})
}

// benchWriters runs b.N writes of distinct names from the given number of
// goroutines and reports writes/s and writes/commit.
func benchWriters(b *testing.B, s *Store, writers int, write func(ctx context.Context, name string) error) {
	ctx := b.Context()
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("agent-%08d", i)
	}
	var next atomic.Int64
	commits := s.commits.Load()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := write(ctx, names[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	if c := s.commits.Load() - commits; c > 0 {
		b.ReportMetric(float64(b.N)/float64(c), "writes/commit")
	}
}
