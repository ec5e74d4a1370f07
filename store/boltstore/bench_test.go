package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/delegation"
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
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("agent-%08d", i)
	}
	runWriters(b, s, writers, 1, "writes", func(ctx context.Context, start, _ int) error {
		return write(ctx, names[start])
	})
}

// runWriters has writers goroutines make the b.N writes of a benchmark
// between them, each call of write taking the next batch of them (items
// start to end-1), and reports unit/s and unit/commit (the mean per
// fsync'd transaction).
func runWriters(b *testing.B, s *Store, writers, batch int, unit string, write func(ctx context.Context, start, end int) error) {
	ctx := b.Context()
	var next atomic.Int64
	commits := s.commits.Load()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				end := int(next.Add(int64(batch)))
				start := end - batch
				if start >= b.N {
					return
				}
				if err := write(ctx, start, min(end, b.N)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
	if c := s.commits.Load() - commits; c > 0 {
		b.ReportMetric(float64(b.N)/float64(c), unit+"/commit")
	}
}

// Durable delegation record throughput: 8 goroutines writing one record
// per PutDelegations call (the delegation client's async path and its
// background writer), and batches of 32. Run
//
//	go test -run='^$' -bench=PutDelegations -benchtime=2s ./store/boltstore
//
// records/s is acknowledged durable records per second, records/commit
// the mean number of records per fsync'd transaction.
func BenchmarkPutDelegations(b *testing.B) {
	for _, c := range []struct {
		name           string
		writers, batch int
	}{
		{"sequential", 1, 1},
		{"writers=8", 8, 1},
		{"writers=32", 32, 1},
		{"writers=8/batch=32", 8, 32},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := openBench(b)
			benchPutDelegations(b, s, c.writers, c.batch)
		})
	}
}

// benchRecord is a finished delegation record of typical size (about 800
// bytes of JSON).
func benchRecord(i int, status delegation.Status, target string, created time.Time) delegation.Record {
	finished := created.Add(1234 * time.Millisecond)
	r := delegation.Record{
		ID:          benchID(i),
		SourceAgent: "orchestrator",
		TargetAgent: target,
		Task:        "Get the budget and the cost center of the Engineering department for the third quarter, with the open purchase orders.",
		Status:      status,
		LatencyMs:   1234,
		Attempts:    1,
		Depth:       1,
		CreatedAt:   created,
		UpdatedAt:   created,
	}
	if status.Final() {
		r.Result = json.RawMessage(`{"department":"Engineering","budget":1250000,"currency":"EUR","costCenter":"CC-4711","openPurchaseOrders":[{"id":"PO-1","amount":12000},{"id":"PO-2","amount":3400}],"note":"figures as of the last close"}`)
		r.UpdatedAt = finished
		r.FinishedAt = &finished
	}
	return r
}

// benchID returns the ID of the i-th benchmark record: a random-looking
// version 4 UUID, as the delegation client's were before its version 7
// ids (benchOrderedID), so that records land all over the records bucket.
func benchID(i int) string {
	x := uint64(i)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", x>>32, x>>16&0xffff, x>>4&0xfff, i>>12&0xfff, i&0xffffffffffff)
}

// benchPutDelegations runs b.N record writes from writers goroutines,
// batch records per call, and reports records/s and records/commit.
func benchPutDelegations(b *testing.B, s *Store, writers, batch int) {
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	recs := make([]delegation.Record, b.N)
	for i := range recs {
		recs[i] = benchRecord(i, delegation.StatusCompleted, "finance", created.Add(time.Duration(i)*time.Millisecond))
	}
	runWriters(b, s, writers, batch, "records", func(ctx context.Context, start, end int) error {
		return s.PutDelegations(ctx, recs[start:end])
	})
}

// Listing at 100,000 records (the most records a mesh keeps,
// docs/API.md#delegations): the newest 50, unfiltered and with each kind of
// filter, from a store whose statuses are skewed the way a mesh's are (90%
// completed, 0.1% running). Run
//
//	go test -run='^$' -bench=ListDelegations ./store/boltstore
//
// The scan-* sub-benchmarks list the way the store would without its
// status index (walking by_created and reading each record's header), for
// comparison.
func BenchmarkListDelegations(b *testing.B) {
	const n = 100_000
	s := openBench(b)
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	fillDelegations(b, s, n, func(i int) delegation.Record {
		return benchRecord(i, benchStatus(i), fmt.Sprintf("agent-%02d", i%50), created.Add(time.Duration(i)*time.Millisecond))
	})
	if info, err := os.Stat(s.path); err == nil {
		b.Logf("%d records, file %.1f MiB", n, float64(info.Size())/(1<<20))
	}
	// Read every page once, as a long-running server would have: the
	// numbers are then those of a warm page cache.
	if err := s.view(func(tx *bbolt.Tx) error { return touch(tx.Bucket(bucketDelegations)) }); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		f     delegation.ListFilter
		empty bool // the filter matches nothing: the whole range is walked
	}{
		{"newest", delegation.ListFilter{}, false},
		{"status=completed", delegation.ListFilter{Status: delegation.StatusCompleted}, false},
		{"status=failed", delegation.ListFilter{Status: delegation.StatusFailed}, false},
		{"status=running", delegation.ListFilter{Status: delegation.StatusRunning}, false},
		{"statuses=running,accepted", delegation.ListFilter{Statuses: []delegation.Status{delegation.StatusRunning, delegation.StatusAccepted}}, false},
		{"target", delegation.ListFilter{Target: "agent-07"}, false},
		{"target+status=failed", delegation.ListFilter{Target: "agent-07", Status: delegation.StatusFailed}, false},
		{"target+status=accepted", delegation.ListFilter{Target: "agent-45", Status: delegation.StatusAccepted}, false},
		{"target+status=none", delegation.ListFilter{Target: "agent-07", Status: delegation.StatusRunning}, true},
		{"status=completed/offset=10000", delegation.ListFilter{Status: delegation.StatusCompleted, Offset: 10_000}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				recs, err := s.ListDelegations(b.Context(), c.f)
				if err != nil {
					b.Fatal(err)
				}
				if (len(recs) == 0) != c.empty {
					b.Fatalf("%d records", len(recs))
				}
			}
		})
	}
	for _, status := range []delegation.Status{delegation.StatusFailed, delegation.StatusRunning} {
		b.Run("scan-status="+string(status), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				recs, err := listByScan(s, status, delegation.DefaultListLimit)
				if err != nil {
					b.Fatal(err)
				}
				if len(recs) == 0 {
					b.Fatal("no records")
				}
			}
		})
	}
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i = (i + 7919) % n
			if _, err := s.GetDelegation(b.Context(), benchID(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prune-oldest-1000", func(b *testing.B) {
		// Prune the 1000 oldest records by age (995 of them are final),
		// then put them back untimed.
		oldest := make([]delegation.Record, 1000)
		for i := range oldest {
			oldest[i] = benchRecord(i, benchStatus(i), fmt.Sprintf("agent-%02d", i%50), created.Add(time.Duration(i)*time.Millisecond))
		}
		cutoff := created.Add(1000*time.Millisecond + 1234*time.Millisecond) // after the 1000th would finish
		for b.Loop() {
			pruned, err := s.PruneDelegations(b.Context(), cutoff, 0)
			if err != nil || pruned != 995 {
				b.Fatalf("pruned %d: %v", pruned, err)
			}
			b.StopTimer()
			if err := s.PutDelegations(b.Context(), oldest); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// benchStatus returns the status of the i-th benchmark record: 90%
// completed, 8% failed, 1% timeout, 0.5% canceled, 0.4% accepted, 0.1%
// running.
func benchStatus(i int) delegation.Status {
	switch p := i % 1000; {
	case p < 900:
		return delegation.StatusCompleted
	case p < 980:
		return delegation.StatusFailed
	case p < 990:
		return delegation.StatusTimeout
	case p < 995:
		return delegation.StatusCanceled
	case p < 999:
		return delegation.StatusAccepted
	}
	return delegation.StatusRunning
}

// listByScan lists the newest records with the given status the way the
// store would without its status index: walking by_created and reading
// each record's header.
func listByScan(s *Store, status delegation.Status, limit int) ([]delegation.Record, error) {
	var out []delegation.Record
	err := s.view(func(tx *bbolt.Tx) error {
		d, err := delegationBucketsOf(tx)
		if err != nil {
			return err
		}
		c := d.byCreated.Cursor()
		for k, _ := c.Last(); k != nil && len(out) < limit; k, _ = c.Prev() {
			id := k[timeKeyLen:]
			v := d.records.Get(id)
			keys, _, err := decodeHeader(id, v)
			if err != nil {
				return err
			}
			if keys.status != string(status) {
				continue
			}
			var rec delegation.Record
			if err := decodeRecord(id, v, &rec); err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// Record writes into a store that already holds 50,000 records, with the
// delegation client's version 7 ids (time-ordered: a record lands at the
// end of the records bucket) against random version 4 ids (a record lands
// on any of its leaf pages, which each commit then writes out). Run
//
//	go test -run='^$' -bench=PutDelegationsIDs -benchtime=20000x ./store/boltstore
//
// pagewrites/commit is bbolt's writes to the file a commit (a page, or a
// node that spans pages, or the meta page); pages/record the records
// bucket's leaf pages at the end, per record.
func BenchmarkPutDelegationsIDs(b *testing.B) {
	const fill = 50_000
	for _, c := range []struct {
		name string
		id   func(i int) string
	}{
		{"v4", benchID},
		{"v7", benchOrderedID},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := openBench(b)
			created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
			record := func(i int) delegation.Record {
				r := benchRecord(i, delegation.StatusCompleted, "finance", created.Add(time.Duration(i)*time.Millisecond))
				r.ID = c.id(i)
				return r
			}
			fillDelegations(b, s, fill, record)
			recs := make([]delegation.Record, b.N)
			for i := range recs {
				recs[i] = record(fill + i)
			}
			writes := func() int64 { st := s.db.Stats(); return st.TxStats.GetWrite() }
			before, commits := writes(), s.commits.Load()
			runWriters(b, s, 8, 4, "records", func(ctx context.Context, start, end int) error {
				return s.PutDelegations(ctx, recs[start:end])
			})
			if n := s.commits.Load() - commits; n > 0 {
				b.ReportMetric(float64(writes()-before)/float64(n), "pagewrites/commit")
			}
			err := s.db.View(func(tx *bbolt.Tx) error {
				d, err := delegationBucketsOf(tx)
				if err != nil {
					return err
				}
				st := d.records.Stats()
				b.ReportMetric(float64(st.LeafPageN+st.LeafOverflowN)/float64(st.KeyN), "pages/record")
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchOrderedID returns the ID of the i-th benchmark record as a version
// 7 UUID: its first 48 bits grow with i, as a version 7 id's millisecond
// timestamp grows with time.
func benchOrderedID(i int) string {
	ms := uint64(1_750_000_000_000 + i)
	return fmt.Sprintf("%08x-%04x-7%s", ms>>16, ms&0xffff, benchID(i)[15:])
}

// fillDelegations writes records 0 to n-1 of record into s, 1000 to a
// call.
func fillDelegations(b *testing.B, s *Store, n int, record func(i int) delegation.Record) {
	b.Helper()
	batch := make([]delegation.Record, 0, 1000)
	for i := range n {
		batch = append(batch, record(i))
		if len(batch) == cap(batch) || i == n-1 {
			if err := s.PutDelegations(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}
