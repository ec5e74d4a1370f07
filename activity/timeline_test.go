package activity

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
)

// clock is a settable clock for the tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func finished(status delegation.Status, ms int64, at time.Time) delegation.Record {
	return delegation.Record{Status: status, LatencyMs: ms, FinishedAt: &at}
}

func TestTimelineCountsByMinuteAndStatus(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 2, 10, 30, 10, 0, time.UTC)}
	tl := NewTimeline(c.now)
	now := c.now()
	tl.Observe(finished(delegation.StatusCompleted, 10, now))
	tl.Observe(finished(delegation.StatusCompleted, 20, now))
	tl.Observe(finished(delegation.StatusFailed, 30, now))
	tl.Observe(finished(delegation.StatusTimeout, 40, now.Add(-time.Minute)))
	tl.Observe(finished(delegation.StatusCanceled, 50, now.Add(-59*time.Minute)))
	// Not counted: not ended, ended more than an hour ago, in the future.
	tl.Observe(delegation.Record{Status: delegation.StatusRunning})
	tl.Observe(delegation.Record{Status: delegation.StatusAccepted})
	tl.Observe(finished(delegation.StatusCompleted, 1, now.Add(-61*time.Minute)))
	tl.Observe(finished(delegation.StatusCompleted, 1, now.Add(2*time.Minute)))
	// No FinishedAt: the clock's minute.
	tl.Observe(delegation.Record{Status: delegation.StatusFailed, LatencyMs: 5})

	m := tl.Minutes()
	require.Len(t, m, TimelineMinutes)
	last := m[TimelineMinutes-1]
	assert.Equal(t, time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC), last.Start)
	assert.Equal(t, Minute{Start: last.Start, Completed: 2, Failed: 2, Total: 4, P50Ms: 12, P99Ms: 30, MaxMs: 30}, last) // 10 ms is in the bin (9, 12]
	assert.Equal(t, 1, m[TimelineMinutes-2].Timeout)
	assert.Equal(t, int64(40), m[TimelineMinutes-2].P50Ms)
	assert.Equal(t, 1, m[0].Canceled)
	assert.Equal(t, time.Date(2026, 12, 2, 9, 31, 0, 0, time.UTC), m[0].Start)
	total := 0
	for _, x := range m {
		total += x.Total
	}
	assert.Equal(t, 6, total)

	// An hour later the old buckets are gone, even though nothing
	// overwrote them.
	c.add(time.Hour)
	for _, x := range tl.Minutes() {
		assert.Zero(t, x.Total, x.Start)
	}
	// A bucket reused for a new minute starts empty.
	tl.Observe(finished(delegation.StatusCompleted, 7, c.now()))
	last = tl.Minutes()[TimelineMinutes-1]
	assert.Equal(t, 1, last.Total)
	assert.Equal(t, 1, last.Completed)
	assert.Equal(t, int64(7), last.P99Ms)
}

// The percentiles are within the histogram's 25 % of the exact ones.
func TestTimelinePercentilesAreWithinTheBinError(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		tl := NewTimeline(c.now)
		n := 1 + rng.IntN(3000)
		lat := make([]int64, n)
		for i := range lat {
			lat[i] = int64(rng.ExpFloat64() * 200)
			tl.Observe(finished(delegation.StatusCompleted, lat[i], c.now()))
		}
		slices.Sort(lat)
		exact := func(q float64) int64 {
			r := int(float64(n)*q + 0.999999999)
			return lat[max(r, 1)-1]
		}
		m := tl.Minutes()[TimelineMinutes-1]
		require.Equal(t, n, m.Total)
		for _, x := range []struct {
			got int64
			q   float64
		}{{m.P50Ms, 0.5}, {m.P99Ms, 0.99}} {
			want := exact(x.q)
			assert.GreaterOrEqual(t, x.got, want, "q=%v n=%d", x.q, n)
			assert.LessOrEqual(t, float64(x.got), float64(max(want, 1))*1.25+1, "q=%v n=%d", x.q, n)
		}
		assert.Equal(t, lat[n-1], m.MaxMs)
	}
}

func TestLatencyBins(t *testing.T) {
	assert.Equal(t, int64(1), latencyBounds[0])
	for i := 1; i < latencyBins; i++ {
		assert.Greater(t, latencyBounds[i], latencyBounds[i-1])
		assert.LessOrEqual(t, float64(latencyBounds[i]), float64(latencyBounds[i-1])*1.25+1)
	}
	assert.Greater(t, latencyBounds[latencyBins-1], int64(20*time.Minute/time.Millisecond))
	for _, ms := range []int64{0, 1, 2, 3, 99, 100, 101, 12345, 1 << 40} {
		b := latencyBin(ms)
		if b < latencyBins-1 {
			assert.LessOrEqual(t, ms, latencyBounds[b], ms)
		}
		if b > 0 {
			assert.Greater(t, ms, latencyBounds[b-1], ms)
		}
	}
}

func TestNilTimelineIsInert(t *testing.T) {
	var tl *Timeline
	tl.Observe(finished(delegation.StatusCompleted, 1, time.Now()))
	m := tl.Minutes()
	require.Len(t, m, TimelineMinutes)
	assert.Zero(t, m[TimelineMinutes-1].Total)
}

func TestTimelineConcurrentUse(t *testing.T) {
	tl := NewTimeline(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				tl.Observe(delegation.Record{Status: delegation.StatusCompleted, LatencyMs: int64(i)})
				if i%100 == 0 {
					_ = tl.Minutes()
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, m := range tl.Minutes() {
		total += m.Total
	}
	assert.Equal(t, 8000, total) // unless the minute turned meanwhile: both sides are in the hour
}

func BenchmarkTimelineObserve(b *testing.B) {
	tl := NewTimeline(nil)
	now := time.Now()
	rec := delegation.Record{Status: delegation.StatusCompleted, LatencyMs: 120, FinishedAt: &now}
	b.ReportAllocs()
	for b.Loop() {
		tl.Observe(rec)
	}
}

func BenchmarkTimelineMinutes(b *testing.B) {
	tl := NewTimeline(nil)
	now := time.Now()
	for i := range 10000 {
		at := now.Add(-time.Duration(i%60) * time.Minute)
		tl.Observe(delegation.Record{Status: delegation.StatusCompleted, LatencyMs: int64(i % 5000), FinishedAt: &at})
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = tl.Minutes()
	}
}
