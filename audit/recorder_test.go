package audit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func newRecorder(t *testing.T, s audit.Store, opts *audit.Options) *audit.Recorder {
	t.Helper()
	r, err := audit.NewRecorder(s, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestRecorderStampsAndLists(t *testing.T) {
	s := memstore.New()
	frozen := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	r := newRecorder(t, s, &audit.Options{Now: func() time.Time { return frozen }})
	for i := range 5 {
		r.Record(audit.Entry{Actor: "ci", Action: audit.ActionAgentRegister, Target: fmt.Sprint("a", i), Outcome: audit.OutcomeSuccess})
	}
	explicit := frozen.Add(-time.Hour)
	r.Record(audit.Entry{Time: explicit, Action: audit.ActionReload, Outcome: audit.OutcomeFailure})

	got, err := r.List(t.Context(), audit.Query{})
	require.NoError(t, err, "List waits for what was recorded before it")
	require.Len(t, got, 6)
	for i := range 5 {
		e := got[i]
		assert.Equal(t, fmt.Sprint("a", 4-i), e.Target, "entries of a frozen clock keep their order, newest first")
		assert.NotEmpty(t, e.ID)
		assert.WithinDuration(t, frozen, e.Time, time.Microsecond, "stamped with the recorder's clock")
		if i > 0 {
			assert.True(t, e.Time.Before(got[i-1].Time), "stamps strictly increase")
		}
	}
	assert.True(t, explicit.Equal(got[5].Time), "an entry's own time is kept")
	assert.Equal(t, audit.ActionReload, got[5].Action)
}

// gate is a store whose AppendAudit blocks until released.
type gate struct {
	*memstore.Store
	release chan struct{}
	calls   chan int
}

func (g *gate) AppendAudit(ctx context.Context, es []audit.Entry) error {
	g.calls <- len(es)
	<-g.release
	return g.Store.AppendAudit(ctx, es)
}

func TestRecorderDropsWhenFullAndNeverBlocks(t *testing.T) {
	g := &gate{Store: memstore.New(), release: make(chan struct{}), calls: make(chan int, 100)}
	r := newRecorder(t, g, &audit.Options{QueueSize: 4, PruneInterval: -1})
	r.Record(audit.Entry{Action: "first"})
	<-g.calls // the writer holds "first" and blocks in the store

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			r.Record(audit.Entry{Action: fmt.Sprint("e", i)})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked on a full queue")
	}
	assert.Equal(t, uint64(16), r.Dropped(), "4 queued, 16 dropped")

	close(g.release)
	require.NoError(t, r.Flush(t.Context()))
	got, err := g.ListAudit(t.Context(), audit.Query{})
	require.NoError(t, err)
	assert.Len(t, got, 5, "the first and the 4 queued are written")
}

type failing struct{ *memstore.Store }

func (failing) AppendAudit(context.Context, []audit.Entry) error { return errors.New("disk full") }

func TestRecorderCountsFailedWrites(t *testing.T) {
	r := newRecorder(t, failing{memstore.New()}, &audit.Options{PruneInterval: -1})
	r.Record(audit.Entry{Action: "a"})
	r.Record(audit.Entry{Action: "b"})
	require.NoError(t, r.Flush(t.Context()))
	assert.Equal(t, uint64(2), r.Failed())
	assert.Zero(t, r.Dropped())
}

func TestRecorderCloseFlushes(t *testing.T) {
	g := &gate{Store: memstore.New(), release: make(chan struct{}), calls: make(chan int, 100)}
	r, err := audit.NewRecorder(g, &audit.Options{PruneInterval: -1})
	require.NoError(t, err)
	for i := range 10 {
		r.Record(audit.Entry{Action: fmt.Sprint("e", i)})
	}
	closed := make(chan struct{})
	go func() { _ = r.Close(); close(closed) }()
	<-g.calls
	close(g.release)
	<-closed
	got, err := g.ListAudit(t.Context(), audit.Query{})
	require.NoError(t, err)
	assert.Len(t, got, 10, "Close writes what was queued")

	r.Record(audit.Entry{Action: "late"})
	assert.Equal(t, uint64(1), r.Dropped(), "an entry recorded after Close is dropped")
	assert.NoError(t, r.Flush(t.Context()))
	assert.NoError(t, r.Close(), "Close is idempotent")
}

func TestRecorderPrunes(t *testing.T) {
	s := memstore.New()
	now := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	var es []audit.Entry
	for i := range 10 {
		at := now.Add(-time.Duration(10-i) * 24 * time.Hour) // 10 … 1 days ago
		es = append(es, audit.Entry{ID: audit.NewID(at), Time: at, Action: "old"})
	}
	require.NoError(t, s.AppendAudit(t.Context(), es))
	r := newRecorder(t, s, &audit.Options{
		Now:           func() time.Time { return now },
		MaxAge:        5*24*time.Hour + time.Minute, // keeps 5 … 1 days ago
		MaxEntries:    3,
		PruneInterval: time.Hour, // and once at start
	})
	require.NoError(t, r.Flush(t.Context())) // the start prune ran before the writer took the marker
	got, err := s.ListAudit(t.Context(), audit.Query{})
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, es[9].ID, got[0].ID)
	assert.Equal(t, es[7].ID, got[2].ID)
}

// pruneCounter is a store that remembers the most entries it held right
// after an append, and counts its prunes.
type pruneCounter struct {
	*memstore.Store
	mu     sync.Mutex
	most   int
	prunes int
}

func (p *pruneCounter) AppendAudit(ctx context.Context, es []audit.Entry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.Store.AppendAudit(ctx, es); err != nil {
		return err
	}
	p.most = max(p.most, p.held(ctx))
	return nil
}

func (p *pruneCounter) PruneAudit(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prunes++
	return p.Store.PruneAudit(ctx, olderThan, keep)
}

// held counts the stored entries; p.mu is held.
func (p *pruneCounter) held(ctx context.Context) int {
	n := 0
	q := audit.Query{Limit: audit.MaxListLimit}
	for {
		page, err := p.Store.ListAudit(ctx, q)
		if err != nil || len(page) == 0 {
			return n
		}
		n += len(page)
		q.Before = page[len(page)-1].ID
	}
}

// The count bound is applied as entries are written, not only every
// PruneInterval: under a sustained stream of entries the store never
// holds more than MaxEntries plus MaxEntries/100 and one batch.
func TestRecorderPrunesAsItWrites(t *testing.T) {
	s := &pruneCounter{Store: memstore.New()}
	const maxEntries = 500 // prunes after every 5 entries written
	r := newRecorder(t, s, &audit.Options{MaxEntries: maxEntries, PruneInterval: time.Hour, FlushDelay: time.Millisecond})
	for i := range 10 * maxEntries {
		r.Record(audit.Entry{Action: "x", Target: fmt.Sprint(i), Outcome: audit.OutcomeSuccess})
		if i%100 == 99 {
			require.NoError(t, r.Flush(t.Context()))
		}
	}
	require.NoError(t, r.Close())
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.LessOrEqual(t, s.most, maxEntries+maxEntries/100+512, "the store held too many entries")
	assert.Greater(t, s.most, maxEntries, "the bound is reached")
	assert.Greater(t, s.prunes, 10*maxEntries/(maxEntries/100+512), "prunes keep up with the writes")

	// A negative PruneInterval never prunes, by count either.
	none := &pruneCounter{Store: memstore.New()}
	r = newRecorder(t, none, &audit.Options{MaxEntries: 10, PruneInterval: -1, FlushDelay: -1})
	for range 100 {
		r.Record(audit.Entry{Action: "x", Outcome: audit.OutcomeSuccess})
	}
	require.NoError(t, r.Close())
	none.mu.Lock()
	defer none.mu.Unlock()
	assert.Zero(t, none.prunes)
	assert.Equal(t, 100, none.most)
}

func TestNilRecorder(t *testing.T) {
	var r *audit.Recorder
	r.Record(audit.Entry{Action: "x"})
	assert.Zero(t, r.Dropped())
	assert.Zero(t, r.Failed())
	assert.NoError(t, r.Flush(t.Context()))
	assert.NoError(t, r.Close())
}

func TestRecorderConcurrent(t *testing.T) {
	s := memstore.New()
	r := newRecorder(t, s, &audit.Options{QueueSize: 100_000, PruneInterval: -1})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				r.Record(audit.Entry{Actor: fmt.Sprint("w", w), Action: fmt.Sprint(i)})
				if i%50 == 0 {
					_, err := r.List(t.Context(), audit.Query{Limit: 3})
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, r.Flush(t.Context()))
	var all []audit.Entry
	q := audit.Query{Limit: audit.MaxListLimit}
	for {
		page, err := s.ListAudit(t.Context(), q)
		require.NoError(t, err)
		all = append(all, page...)
		if len(page) < q.Limit {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	assert.Len(t, all, 1600)
	assert.Zero(t, r.Dropped())
}

func TestNewIDOrder(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Unix(1, 0),
		time.Date(2025, 1, 1, 0, 0, 0, 999_999_999, time.UTC),
		time.Date(2025, 1, 1, 1, 0, 1, 0, time.FixedZone("X", 3600)), // 00:00:01 UTC
	}
	for i := 1; i < len(times); i++ {
		a, b := audit.NewID(times[i-1]), audit.NewID(times[i])
		assert.Less(t, a, b, "%v before %v", times[i-1], times[i])
		assert.Less(t, audit.MinID(times[i]), b)
		assert.Less(t, a, audit.MinID(times[i]))
		assert.Len(t, b, 32)
	}
}

// counting is a store that counts AppendAudit calls.
type counting struct {
	*memstore.Store
	mu    sync.Mutex
	calls int
}

func (c *counting) AppendAudit(ctx context.Context, es []audit.Entry) error {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Store.AppendAudit(ctx, es)
}

func (c *counting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// A trickle of entries is written in one store call per FlushDelay; List
// does not wait for the delay.
func TestRecorderGathersWithinFlushDelay(t *testing.T) {
	s := &counting{Store: memstore.New()}
	r := newRecorder(t, s, &audit.Options{FlushDelay: time.Hour, PruneInterval: -1})
	for i := range 20 {
		r.Record(audit.Entry{Action: audit.ActionAgentRegister, Target: fmt.Sprint("a", i), Outcome: audit.OutcomeSuccess})
	}
	start := time.Now()
	got, err := r.List(t.Context(), audit.Query{})
	require.NoError(t, err)
	assert.Len(t, got, 20)
	assert.Less(t, time.Since(start), time.Minute, "List ends the gathering")
	assert.Equal(t, 1, s.count(), "one store call for the whole trickle")

	short := &counting{Store: memstore.New()}
	r2 := newRecorder(t, short, &audit.Options{FlushDelay: 20 * time.Millisecond, PruneInterval: -1})
	r2.Record(audit.Entry{Action: audit.ActionReload, Outcome: audit.OutcomeSuccess})
	require.Eventually(t, func() bool { return short.count() == 1 }, 5*time.Second, 5*time.Millisecond,
		"an entry is written once the delay passes, without a Flush")
	r2.Record(audit.Entry{Action: audit.ActionReload, Outcome: audit.OutcomeSuccess})
	require.NoError(t, r2.Close())
	assert.Equal(t, 2, short.count(), "Close writes what is gathering")
	got, err = short.ListAudit(t.Context(), audit.Query{Limit: 10})
	require.NoError(t, err)
	assert.Len(t, got, 2)
}

func TestQueryPageLimit(t *testing.T) {
	assert.Equal(t, audit.DefaultListLimit, audit.Query{}.PageLimit())
	assert.Equal(t, audit.DefaultListLimit, audit.Query{Limit: -5}.PageLimit())
	assert.Equal(t, 7, audit.Query{Limit: 7}.PageLimit())
	assert.Equal(t, audit.MaxListLimit, audit.Query{Limit: audit.MaxListLimit + 1}.PageLimit())
}
