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

	r := &Report{Concurrency: c, Outcomes: map[string]uint64{}, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	var h histogram
	for i := range stats {
		st := &stats[i]
		h.merge(&st.h)
		for k, v := range st.outcomes {
			r.Outcomes[k] += v
		}
		r.Errors += st.errors
		r.BytesIn += st.bytes
	}
	r.Requests = h.n
	elapsed := end.Sub(measureFrom)
	r.Seconds = elapsed.Seconds()
	if elapsed > 0 {
		r.RequestsPerSecond = float64(h.n) / elapsed.Seconds()
	}
	r.Latency = latencyOf(&h)
	r.ClientCPUSeconds = (cpuEnd.client - cpuStart.client).Seconds()
	r.ServerCPUSeconds = (cpuEnd.server - cpuStart.server).Seconds()
	return r
}
