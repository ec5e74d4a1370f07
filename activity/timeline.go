package activity

import (
	"math"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
)

// TimelineMinutes is how many one-minute buckets a [Timeline] keeps: the
// last hour.
const TimelineMinutes = 60

// latencyBins is the number of bins of a minute's latency histogram:
// bin i holds latencies up to latencyBounds[i] ms, each bound 1.25 times
// the one before from 1 ms (the last, about 21 minutes, also holds
// anything longer).
const latencyBins = 64

// latencyBounds are the upper bounds of the histogram's bins, in ms.
var latencyBounds = func() [latencyBins]int64 {
	var b [latencyBins]int64
	b[0] = 1
	for i := 1; i < latencyBins; i++ {
		b[i] = max(b[i-1]+1, int64(math.Ceil(float64(b[i-1])*1.25)))
	}
	return b
}()

// latencyBin returns the bin of a latency of ms milliseconds.
func latencyBin(ms int64) int {
	lo, hi := 0, latencyBins-1
	for lo < hi { // the first bound ≥ ms
		mid := (lo + hi) / 2
		if latencyBounds[mid] >= ms {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Minute is one minute of a [Timeline]: the delegations that ended in it,
// by final status, and their latency percentiles.
type Minute struct {
	// Start is the minute's first instant (UTC).
	Start time.Time `json:"start"`
	// Completed, Failed, Timeout and Canceled count the delegations that
	// ended with that status in the minute; Total is their sum.
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Timeout   int `json:"timeout"`
	Canceled  int `json:"canceled"`
	Total     int `json:"total"`
	// P50Ms and P99Ms are the median and 99th percentile of their
	// latencies in ms, 0 when Total is 0. Each is the upper bound of a
	// histogram bin, capped at the minute's longest latency: at most 25 %
	// above the exact percentile.
	P50Ms int64 `json:"p50_ms"`
	P99Ms int64 `json:"p99_ms"`
	// MaxMs is the minute's longest latency.
	MaxMs int64 `json:"max_ms"`
}

// minute is one bucket of a Timeline: fixed size, whatever the traffic.
type minute struct {
	at     int64 // the minute (Unix seconds / 60) the bucket holds; 0 for none
	counts [4]int
	maxMs  int64
	lat    [latencyBins]uint32
}

// finalStatuses are the statuses a Timeline counts, in Minute's order.
var finalStatuses = [4]delegation.Status{
	delegation.StatusCompleted, delegation.StatusFailed, delegation.StatusTimeout, delegation.StatusCanceled,
}

// Timeline counts the delegations that ended in each of the last
// [TimelineMinutes] minutes, by final status, with a fixed latency
// histogram per minute: its memory is the same for ten delegations a
// minute or ten thousand. Feed it with [Timeline.Observe] (a
// delegation.Options.OnRecord hook); read it with [Timeline.Minutes].
//
// A Timeline is safe for concurrent use. Use [NewTimeline]; a nil
// *Timeline records nothing and reports empty minutes.
type Timeline struct {
	now func() time.Time

	mu      sync.Mutex
	buckets [TimelineMinutes]minute // by minute modulo TimelineMinutes
}

// NewTimeline returns an empty Timeline reading the time from now (nil
// means time.Now).
func NewTimeline(now func() time.Time) *Timeline {
	if now == nil {
		now = time.Now
	}
	return &Timeline{now: now}
}

// Observe counts rec if it has ended (a final status): in the minute of
// its FinishedAt (the clock's time when it has none), with its LatencyMs.
// Records that have not ended, and those that ended more than an hour ago
// or in the future, are ignored. Its signature is
// delegation.Options.OnRecord's.
func (t *Timeline) Observe(rec delegation.Record) {
	if t == nil {
		return
	}
	idx := -1
	for i, s := range finalStatuses {
		if rec.Status == s {
			idx = i
		}
	}
	if idx < 0 {
		return
	}
	now := t.now()
	at := now
	if rec.FinishedAt != nil {
		at = *rec.FinishedAt
	}
	m, cur := unixMinute(at), unixMinute(now)
	if m > cur || m <= cur-TimelineMinutes {
		return
	}
	ms := max(rec.LatencyMs, 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	b := &t.buckets[m%TimelineMinutes]
	if b.at != m {
		*b = minute{at: m}
	}
	b.counts[idx]++
	b.lat[latencyBin(ms)]++
	b.maxMs = max(b.maxMs, ms)
}

// Minutes returns the last [TimelineMinutes] minutes, oldest first, the
// current (partial) minute last; minutes without delegations are there,
// with zero counts.
func (t *Timeline) Minutes() []Minute {
	var now time.Time
	if t == nil {
		now = time.Now()
	} else {
		now = t.now()
	}
	cur := unixMinute(now)
	out := make([]Minute, TimelineMinutes)
	if t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
	}
	for i := range out {
		m := cur - TimelineMinutes + 1 + int64(i)
		out[i].Start = time.Unix(m*60, 0).UTC()
		if t == nil {
			continue
		}
		if b := &t.buckets[m%TimelineMinutes]; b.at == m {
			b.fill(&out[i])
		}
	}
	return out
}

// fill sets the counts and percentiles of out from b.
func (b *minute) fill(out *Minute) {
	out.Completed, out.Failed, out.Timeout, out.Canceled = b.counts[0], b.counts[1], b.counts[2], b.counts[3]
	out.Total = out.Completed + out.Failed + out.Timeout + out.Canceled
	if out.Total == 0 {
		return
	}
	out.MaxMs = b.maxMs
	out.P50Ms = b.quantile(out.Total, 0.50)
	out.P99Ms = b.quantile(out.Total, 0.99)
}

// quantile returns the upper bound of the bin holding the q-quantile of
// the n latencies (the nearest-rank one), capped at the longest.
func (b *minute) quantile(n int, q float64) int64 {
	rank := uint64(math.Ceil(q * float64(n))) // 1-based
	rank = max(rank, 1)
	var seen uint64
	for i, c := range b.lat {
		seen += uint64(c)
		if seen >= rank {
			return min(latencyBounds[i], b.maxMs)
		}
	}
	return b.maxMs
}

func unixMinute(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		return 0
	}
	return s / 60
}
