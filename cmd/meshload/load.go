package main

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// outcome is what one request did.
type outcome struct {
	key   string // "200", "ok", "error: timeout", ...
	bytes int
	ok    bool
	// kind names the kind of request in a run that mixes several
	// ("discover", "delegate", ...); the report then has a summary per
	// kind. Empty in single-kind runs.
	kind string
}

// opFunc performs request number i (0, 1, 2, ... across all workers).
type opFunc func(ctx context.Context, i int) outcome

// plan says how long a run lasts.
type plan struct {
	concurrency int
	// count > 0 runs exactly count requests; else the run lasts duration
	// after warmup.
	count    int
	duration time.Duration
	warmup   time.Duration
	// serverCPU, if not nil, returns the CPU time the server has used so
	// far; the report then has the server's CPU time over the measured
	// part of the run.
	serverCPU func() time.Duration
}

// workerStats is what one worker saw; it is merged at the end.
type workerStats struct {
	h        histogram
	outcomes map[string]uint64
	errors   uint64
	bytes    uint64
	kinds    map[string]*kindStats
}

// kindStats is what one worker saw of one kind of request.
type kindStats struct {
	h        histogram
	outcomes map[string]uint64
	errors   uint64
}

// kind returns the stats of kind k, creating them.
func (st *workerStats) kind(k string) *kindStats {
	ks := st.kinds[k]
	if ks == nil {
		ks = &kindStats{outcomes: make(map[string]uint64)}
		if st.kinds == nil {
			st.kinds = make(map[string]*kindStats)
		}
		st.kinds[k] = ks
	}
	return ks
}

// runLoad runs a closed loop: concurrency workers, each issuing its next
// request as soon as the previous one is answered. newOp is called once per
// worker, on that worker's goroutine, to build its client state. Requests
// that start during the warm-up are made but not recorded.
func runLoad(ctx context.Context, p plan, newOp func(worker int) opFunc) *Report {
	c := max(p.concurrency, 1)
	var next atomic.Int64
	stats := make([]workerStats, c)
	start := time.Now()
	measureFrom := start
	if p.count <= 0 {
		measureFrom = start.Add(p.warmup)
	}
	deadline := measureFrom.Add(p.duration)

	// CPU times are sampled when the measured part begins.
	type cpuSample struct{ client, server time.Duration }
	sample := func() cpuSample {
		s := cpuSample{client: cpuTime()}
		if p.serverCPU != nil {
			s.server = p.serverCPU()
		}
		return s
	}
	cpu0 := make(chan cpuSample, 1)
	if measureFrom.After(start) {
		t := time.AfterFunc(p.warmup, func() { cpu0 <- sample() })
		defer t.Stop()
	} else {
		cpu0 <- sample()
	}

	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			op := newOp(w)
			st := &stats[w]
			st.outcomes = make(map[string]uint64)
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if p.count > 0 && i >= p.count {
					return
				}
				t0 := time.Now()
				if p.count <= 0 && !t0.Before(deadline) {
					return
				}
				out := op(ctx, i)
				elapsed := time.Since(t0)
				if t0.Before(measureFrom) || ctx.Err() != nil && !out.ok {
					continue // warm-up, or cut short by an interrupt
				}
				st.h.record(elapsed)
				st.outcomes[out.key]++
				st.bytes += uint64(max(out.bytes, 0))
				if !out.ok {
					st.errors++
				}
				if out.kind != "" {
					ks := st.kind(out.kind)
					ks.h.record(elapsed)
					ks.outcomes[out.key]++
					if !out.ok {
						ks.errors++
					}
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()
	cpuEnd := sample()
	var cpuStart cpuSample
	select {
	case cpuStart = <-cpu0:
	default: // interrupted during the warm-up
		cpuStart = cpuEnd
	}

	r := &Report{Concurrency: c, Outcomes: map[string]uint64{}, GOMAXPROCS: runtime.GOMAXPROCS(0), hist: new(histogram)}
	for i := range stats {
		st := &stats[i]
		r.hist.merge(&st.h)
		for k, v := range st.outcomes {
			r.Outcomes[k] += v
		}
		r.Errors += st.errors
		r.BytesIn += st.bytes
		for k, ks := range st.kinds {
			kr := r.kind(k)
			kr.hist.merge(&ks.h)
			for o, v := range ks.outcomes {
				kr.Outcomes[o] += v
			}
			kr.Errors += ks.errors
		}
	}
	r.Seconds = end.Sub(measureFrom).Seconds()
	r.ClientCPUSeconds = (cpuEnd.client - cpuStart.client).Seconds()
	r.ServerCPUSeconds = (cpuEnd.server - cpuStart.server).Seconds()
	r.summarize()
	return r
}
