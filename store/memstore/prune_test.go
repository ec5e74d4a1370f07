package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// BenchmarkPruneDelegations is the client's prune every 5 s over 100,000
// records: idle (at the bound, nothing old: one pass) and one record
// beyond the bound (two passes, the second through a heap of one).
func BenchmarkPruneDelegations(b *testing.B) {
	const n = 100_000
	s := memstore.New()
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	recs := make([]delegation.Record, n)
	for i := range recs {
		at := base.Add(time.Duration(i) * time.Millisecond)
		recs[i] = delegation.Record{ID: fmt.Sprintf("d-%08d", i), Status: delegation.StatusCompleted,
			CreatedAt: at, UpdatedAt: at, FinishedAt: &at}
	}
	if err := s.PutDelegations(b.Context(), recs); err != nil {
		b.Fatal(err)
	}
	b.Run("idle", func(b *testing.B) {
		for b.Loop() {
			if n, err := s.PruneDelegations(b.Context(), base, n); err != nil || n != 0 {
				b.Fatal(n, err)
			}
		}
	})
	i := n // the next record's number, across the runs of -count
	b.Run("one-beyond", func(b *testing.B) {
		for b.Loop() {
			at := base.Add(time.Duration(i) * time.Millisecond)
			i++
			rec := delegation.Record{ID: fmt.Sprintf("d-%08d", i), Status: delegation.StatusCompleted,
				CreatedAt: at, UpdatedAt: at, FinishedAt: &at}
			if err := s.PutDelegations(b.Context(), []delegation.Record{rec}); err != nil {
				b.Fatal(err)
			}
			if n, err := s.PruneDelegations(b.Context(), base, n); err != nil || n != 1 {
				b.Fatal(n, err)
			}
		}
	})
}
