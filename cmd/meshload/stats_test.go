package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	// Bucket ranges tile [0, 2^64) in order, without gaps or overlaps.
	var next uint64
	for i := range histBuckets {
		lo, hi := bucketRange(i)
		if lo != next || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d", i, lo, hi, next)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		// Relative width at most 1/64 past the exact range.
		if lo >= linearLimit && float64(hi-lo+1)/float64(lo) > 1.0/subCount {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its values", i, lo, hi, subCount)
		}
		next = hi + 1
	}
	if next != 0 { // wrapped around: the last bucket ends at 2^64-1
		t.Fatalf("the buckets end at %d, not at the largest uint64", next-1)
	}
}

func TestPercentileExact(t *testing.T) {
	// Values below 128 ns are kept exactly, so percentiles are the nearest
	// rank of the data.
	var h histogram
	for v := 1; v <= 100; v++ {
		h.record(time.Duration(v))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {1, 1}, {50, 50}, {90, 90}, {99, 99}, {99.5, 100}, {100, 100}} {
		if got := h.percentile(c.p); got != c.want {
			t.Errorf("p%v = %d, want %d", c.p, got, c.want)
		}
	}
	if h.mean() != 50 { // 50.5 truncated
		t.Errorf("mean = %d, want 50", h.mean())
	}
}

func TestPercentileWithinBucketError(t *testing.T) {
	// Latency-like data (log-normal around 1 ms, 5 µs to 2 s): every
	// reported percentile is at or above the exact one and within 1/64.
	r := rand.New(rand.NewPCG(1, 2))
	var h histogram
	var exact []time.Duration
	for range 100_000 {
		d := time.Duration(float64(time.Millisecond) * math.Exp(r.NormFloat64()*1.5))
		d = min(max(d, 5*time.Microsecond), 2*time.Second)
		h.record(d)
		exact = append(exact, d)
	}
	slices.Sort(exact)
	for _, p := range []float64{1, 10, 50, 90, 99, 99.9, 100} {
		rank := int(math.Ceil(p / 100 * float64(len(exact))))
		want := exact[max(rank, 1)-1]
		got := h.percentile(p)
		if got < want || float64(got-want) > float64(want)/subCount {
			t.Errorf("p%v = %v, exact %v: off by more than 1/%d", p, got, want, subCount)
		}
	}
	if got := time.Duration(h.max); got != exact[len(exact)-1] {
		t.Errorf("max = %v, want %v", got, exact[len(exact)-1])
	}
}

func TestMergeEqualsRecordingTogether(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var all, a, b histogram
	for i := range 10_000 {
		d := time.Duration(r.Int64N(int64(50 * time.Millisecond)))
		all.record(d)
		if i%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	var m histogram
	m.merge(&a)
	m.merge(&histogram{}) // merging an empty histogram changes nothing
	m.merge(&b)
	if m.counts != all.counts || m.n != all.n || m.min != all.min || m.max != all.max {
		t.Fatal("merged histogram differs from the one recorded in one go")
	}
	for _, p := range []float64{50, 90, 99} {
		if m.percentile(p) != all.percentile(p) {
			t.Errorf("p%v differs after merge", p)
		}
	}
}

func TestEmptyAndNegative(t *testing.T) {
	var h histogram
	if h.percentile(99) != 0 || h.mean() != 0 {
		t.Error("an empty histogram must report 0")
	}
	h.record(-time.Second) // a clock step backwards counts as 0
	if h.n != 1 || h.max != 0 || h.percentile(50) != 0 {
		t.Errorf("negative duration: n=%d max=%d p50=%d", h.n, h.max, h.percentile(50))
	}
	h.record(time.Duration(1<<63 - 1)) // the largest duration has a bucket
	if got := h.percentile(100); got != time.Duration(1<<63-1) {
		t.Errorf("p100 = %d, want the largest duration", got)
	}
}
