package boltstore

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/delegation"
)

// soakRecord is a delegation record the size of meshload's: a short task,
// an echoed result.
func soakRecord(i int, at time.Time) delegation.Record {
	id := fmt.Sprintf("d-%08d", i)
	finished := at.Add(3 * time.Millisecond)
	return delegation.Record{
		ID: id, SourceAgent: "meshload", TargetAgent: "echo", Principal: "default",
		Task:   "summarise the quarterly report for the finance team " + id,
		Status: delegation.StatusCompleted, Attempts: 1, LatencyMs: 3,
		Result:    json.RawMessage(`{"echo":"summarise the quarterly report for the finance team ` + id + `"}`),
		CreatedAt: at, UpdatedAt: finished, FinishedAt: &finished,
	}
}

// lastTxID is the id of the last committed write transaction.
func lastTxID(t *testing.T, s *Store) (id int) {
	t.Helper()
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil }))
	return id
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// bucketUse describes where the file's bytes go, bucket by bucket, for
// the test's log.
func bucketUse(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		fmt.Fprintf(&b, "file %d KiB, %d pages of %d B, %d free", tx.Size()>>10, tx.Size()/int64(s.db.Info().PageSize),
			s.db.Info().PageSize, s.db.Stats().FreePageN)
		return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error {
			st := bk.Stats()
			alloc := st.BranchAlloc + st.LeafAlloc
			fmt.Fprintf(&b, "; %s: %d keys, %d KiB in pages (%d leaf, %d overflow), %.0f %% full",
				name, st.KeyN, alloc>>10, st.LeafPageN, st.LeafOverflowN, 100*float64(st.BranchInuse+st.LeafInuse)/float64(max(alloc, 1)))
			return nil
		})
	}))
	return b.String()
}

// A store held at its bounds under sustained writes stops growing: the
// records and audit entries pruned free pages that the writes after them
// reuse, so the file after ten times the bounds in writes is the size it
// had after two.
func TestStoreAtItsBoundsStopsGrowing(t *testing.T) {
	const (
		keep   = 1000 // records and audit entries kept
		batch  = 50   // records written between two prunes
		rounds = 10   // writes: rounds × keep records and as many entries
	)
	path := t.TempDir() + "/mesh.db"
	s, err := Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	ctx := t.Context()
	var warm int64 // the file's size after two rounds
	i := 0
	for round := 1; round <= rounds; round++ {
		for range keep / batch {
			recs := make([]delegation.Record, batch)
			entries := make([]audit.Entry, batch)
			for j := range recs {
				at := testBase.Add(time.Duration(i) * time.Millisecond)
				recs[j] = soakRecord(i, at)
				entries[j] = audit.Entry{ID: audit.NewID(at), Time: at, Actor: "meshload", Principal: "default",
					Action: audit.ActionDelegation, Target: "echo", Outcome: audit.OutcomeSuccess,
					Details: map[string]string{"delegation_id": recs[j].ID}}
				i++
			}
			// A record is written running, then final, as the client does.
			running := make([]delegation.Record, batch)
			for j := range recs {
				running[j] = recs[j]
				running[j].Status, running[j].FinishedAt, running[j].Result = delegation.StatusRunning, nil, nil
			}
			require.NoError(t, s.PutDelegations(ctx, running))
			require.NoError(t, s.PutDelegations(ctx, recs))
			require.NoError(t, s.AppendAudit(ctx, entries))
			_, err := s.PruneDelegations(ctx, time.Time{}, keep)
			require.NoError(t, err)
			_, err = s.PruneAudit(ctx, time.Time{}, keep)
			require.NoError(t, err)
		}
		if round == 2 {
			warm = fileSize(t, path)
			t.Logf("after %d writes: %s", i, bucketUse(t, s))
		}
	}
	t.Logf("after %d writes: %s", i, bucketUse(t, s))
	checkIndexes(t, s)
	recs, err := s.ListDelegations(ctx, delegation.ListFilter{Limit: delegation.MaxListLimit, Offset: keep - 1})
	require.NoError(t, err)
	assert.Len(t, recs, 1, "the store holds its bound of records")
	entries, err := s.ListAudit(ctx, audit.Query{Before: audit.MinID(testBase.Add(time.Duration(i-keep) * time.Millisecond)), Limit: 1})
	require.NoError(t, err)
	assert.Empty(t, entries, "the audit log holds its bound of entries")

	// bbolt grows the file in steps (doubling up to 1 GiB); allow one step
	// of 10 % and a few pages of fragmentation beside it.
	end := fileSize(t, path)
	assert.LessOrEqual(t, end, warm+warm/10+64<<10,
		"the file grew from %d KiB after 2×%d writes to %d KiB after %d×", warm>>10, keep, end>>10, rounds)
}

// A prune with nothing to delete commits nothing: it reads, so that
// pruning every few seconds costs no fsync.
func TestIdlePruneWritesNothing(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	require.NoError(t, s.PutDelegations(ctx, []delegation.Record{
		soakRecord(1, testBase), testRecord("open", delegation.StatusRunning, "a", testBase),
	}))
	at := testBase.Add(time.Second)
	require.NoError(t, s.AppendAudit(ctx, []audit.Entry{{ID: audit.NewID(at), Time: at, Action: "x", Outcome: audit.OutcomeSuccess}}))
	before := lastTxID(t, s)
	for _, keep := range []int{0, 2, 5} {
		n, err := s.PruneDelegations(ctx, testBase, keep)
		require.NoError(t, err)
		assert.Zero(t, n)
		n, err = s.PruneAudit(ctx, testBase, keep)
		require.NoError(t, err)
		assert.Zero(t, n)
	}
	assert.Equal(t, before, lastTxID(t, s), "prunes that deleted nothing committed nothing")
	n, err := s.PruneDelegations(ctx, testBase, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the final record goes")
	after := lastTxID(t, s)
	assert.Equal(t, before+1, after, "the prune that deleted committed once")

	// Beyond the bound with nothing final to delete: nothing again.
	require.NoError(t, s.PutDelegations(ctx, []delegation.Record{testRecord("open2", delegation.StatusRunning, "a", testBase)}))
	after = lastTxID(t, s)
	n, err = s.PruneDelegations(ctx, testBase.Add(time.Hour), 1)
	require.NoError(t, err)
	assert.Zero(t, n, "running records stay")
	assert.Equal(t, after, lastTxID(t, s))
}

// BenchmarkIdlePrune is a prune below the bounds, the client's every 5 s,
// against the empty write transaction it committed before.
func BenchmarkIdlePrune(b *testing.B) {
	s := openTemp(b)
	ctx := b.Context()
	recs := make([]delegation.Record, 1000)
	for i := range recs {
		recs[i] = soakRecord(i, testBase.Add(time.Duration(i)*time.Millisecond))
	}
	require.NoError(b, s.PutDelegations(ctx, recs))
	b.Run("prune", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.PruneDelegations(ctx, testBase, 100_000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("empty-write", func(b *testing.B) {
		for b.Loop() {
			if err := s.updateAlone(func(*bbolt.Tx) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
