package delegation_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// countingStore counts the writes of the group commit: PutDelegations
// calls (one bbolt commit, two fdatasyncs each) and the records they
// carry.
type countingStore struct {
	delegation.Store
	puts, records atomic.Int64
}

func (s *countingStore) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	s.puts.Add(1)
	s.records.Add(int64(len(recs)))
	return s.Store.PutDelegations(ctx, recs)
}

// BenchmarkDelegateStoreWrites counts the store writes synchronous
// delegations cost, records in bbolt, at concurrency 1 and 8: commits and
// records written per delegation (before the running record's hold and
// the commit's linger: 2 records and about one commit a delegation at
// concurrency 1).
func BenchmarkDelegateStoreWrites(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("concurrency=%d", workers), func(b *testing.B) {
			ctx := context.Background()
			agent := newBenchAgent(b)
			bs, err := boltstore.Open(filepath.Join(b.TempDir(), "mesh.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = bs.Close() })
			st := &countingStore{Store: bs}
			reg := newBenchRegistry(b, registry.Agent{Name: "finance", Description: "budgets", Endpoint: agent.URL + "/task"})
			client, err := delegation.New(ctx, reg, st, &delegation.Options{HTTPClient: (*netguard.Policy)(nil).NewClient(nil)})
			if err != nil {
				b.Fatal(err)
			}
			m := &benchMesh{client: client}
			for range 50 {
				m.delegate(b)
			}
			var wg sync.WaitGroup
			next := make(chan struct{}, workers)
			b.ResetTimer()
			for range workers {
				wg.Go(func() {
					for range next {
						if err := m.try(); err != nil {
							b.Error(err)
						}
					}
				})
			}
			puts, records := st.puts.Load(), st.records.Load()
			for b.Loop() {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			b.StopTimer()
			if err := client.Close(); err != nil { // writes what is queued
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.puts.Load()-puts)/float64(b.N), "commits/op")
			b.ReportMetric(float64(st.records.Load()-records)/float64(b.N), "records/op")
		})
	}
}
