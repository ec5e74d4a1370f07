package main

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// histogram records durations in log-linear buckets: exact below 128 ns,
// then 64 buckets per power of two, so a reported percentile is within
// 1/64 (1.6%) of the true value whatever the range. Memory is fixed (about
// 30 KiB); recording is a few instructions and needs no lock, so each worker
// keeps its own and they are merged at the end. The zero value is empty and
// ready to use.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    float64 // nanoseconds
	min    uint64
	max    uint64
}

const (
	subBits     = 6
	subCount    = 1 << subBits // buckets per power of two
	linearLimit = 2 * subCount // values below it have a bucket each
	histBuckets = linearLimit + (64-subBits-1)*subCount
)

// bucketOf returns the bucket of v (nanoseconds).
func bucketOf(v uint64) int {
	if v < linearLimit {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1 // ≥ 1; v>>shift is in [64, 128)
	return linearLimit + (shift-1)*subCount + int(v>>shift) - subCount
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < linearLimit {
		return uint64(i), uint64(i)
	}
	shift := (i-linearLimit)/subCount + 1
	top := uint64((i-linearLimit)%subCount + subCount)
	lo = top << shift
	return lo, lo + (1 << shift) - 1
}

// record adds one observation; negative durations count as 0.
func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// merge adds o's observations to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// percentile returns the value at or below which p percent (0–100) of the
// observations fall (nearest rank), as the largest value of its bucket
// clamped to the observed min and max: never below the true value and at
// most 1/64 above it. An empty histogram gives 0.
func (h *histogram) percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketRange(i)
			return time.Duration(min(max(hi, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// mean returns the average observation.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Report is the result of one run, as printed with -json.
type Report struct {
	Mode        string `json:"mode"`
	Target      string `json:"target"`
	Concurrency int    `json:"concurrency"`
	// Seconds is the measured wall time (warm-up excluded).
	Seconds  float64 `json:"seconds"`
	Requests uint64  `json:"requests"`
	// Errors counts the requests that failed: a transport error, an
	// unexpected HTTP status or an MCP error.
	Errors            uint64  `json:"errors"`
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	Latency           Latency `json:"latency"`
	// Outcomes counts requests by outcome: the HTTP status ("200"), an
	// MCP outcome ("ok", "tool_error", "rpc_error"), or a transport error
	// class ("error: timeout").
	Outcomes map[string]uint64 `json:"outcomes"`
	// BytesIn is the total size of the response bodies.
	BytesIn uint64 `json:"bytesIn"`
	// ClientCPUSeconds is the CPU time (user + system) the load generator
	// itself used during the run: on a machine it shares with the server,
	// the server had the rest.
	ClientCPUSeconds float64 `json:"clientCpuSeconds"`
	// ServerCPUSeconds is the CPU time the server used during the run,
	// when meshload started the server itself and can read it (mcp-stdio
	// on Linux); else 0 and left out.
	ServerCPUSeconds float64 `json:"serverCpuSeconds,omitempty"`
	GOMAXPROCS       int     `json:"gomaxprocs"`
	// Kinds summarizes each kind of request of a run that mixes several
	// (-mode mixed, soak), by kind name.
	Kinds map[string]*KindReport `json:"kinds,omitempty"`
	// VsDirect compares a delegate (or floor) run with the direct run at
	// the same concurrency just before it (-mode delegate, floor).
	VsDirect *Comparison `json:"vsDirect,omitempty"`
	// DiskLimit is what -mode fsync derives from its p50.
	DiskLimit *DiskLimit `json:"diskLimit,omitempty"`

	hist *histogram // every recorded latency, to merge reports
}

// KindReport is the summary of one kind of request in a [Report].
type KindReport struct {
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
	// Share is the kind's fraction of the run's requests (0–1).
	Share    float64           `json:"share"`
	Latency  Latency           `json:"latency"`
	Outcomes map[string]uint64 `json:"outcomes"`

	hist *histogram
}

// Comparison is a delegation through the mesh (or, for -mode floor, the
// same request through a bare reverse proxy) against a direct POST to the
// same agent at the same concurrency.
type Comparison struct {
	DirectP50Ms             float64 `json:"directP50Ms"`
	DirectRequestsPerSecond float64 `json:"directRequestsPerSecond"`
	// AddedP50Ms is the mesh's p50 minus the direct p50: what going
	// through the mesh adds to a typical delegation.
	AddedP50Ms float64 `json:"addedP50Ms"`
	// AddedP50Ratio is AddedP50Ms ÷ DirectP50Ms.
	AddedP50Ratio float64 `json:"addedP50Ratio"`
	// ThroughputRatio is the mesh's requests/s ÷ the direct requests/s.
	ThroughputRatio float64 `json:"throughputRatio"`
}

// DiskLimit is the most durable commits a second the disk allows with
// InFlight writers sharing each fdatasync: InFlight ÷ the fdatasync p50.
type DiskLimit struct {
	InFlight  int     `json:"inFlight"`
	PerSecond float64 `json:"perSecond"`
}

// kind returns the summary of kind k, creating it.
func (r *Report) kind(k string) *KindReport {
	kr := r.Kinds[k]
	if kr == nil {
		kr = &KindReport{Outcomes: map[string]uint64{}, hist: new(histogram)}
		if r.Kinds == nil {
			r.Kinds = map[string]*KindReport{}
		}
		r.Kinds[k] = kr
	}
	return kr
}

// summarize sets the figures derived from the histograms and Seconds.
func (r *Report) summarize() {
	r.Requests = r.hist.n
	r.RequestsPerSecond = 0
	if r.Seconds > 0 {
		r.RequestsPerSecond = float64(r.hist.n) / r.Seconds
	}
	r.Latency = latencyOf(r.hist)
	for _, kr := range r.Kinds {
		kr.Requests = kr.hist.n
		kr.Share = 0
		if r.Requests > 0 {
			kr.Share = float64(kr.Requests) / float64(r.Requests)
		}
		kr.Latency = latencyOf(kr.hist)
	}
}

// add merges o, a later run of the same load, into r: the result covers
// both runs, their measured times added.
func (r *Report) add(o *Report) {
	r.hist.merge(o.hist)
	for k, v := range o.Outcomes {
		r.Outcomes[k] += v
	}
	r.Errors += o.Errors
	r.BytesIn += o.BytesIn
	r.Seconds += o.Seconds
	r.ClientCPUSeconds += o.ClientCPUSeconds
	r.ServerCPUSeconds += o.ServerCPUSeconds
	for k, ok := range o.Kinds {
		kr := r.kind(k)
		kr.hist.merge(ok.hist)
		for o, v := range ok.Outcomes {
			kr.Outcomes[o] += v
		}
		kr.Errors += ok.Errors
	}
	r.summarize()
}

// Latency is the latency summary of a [Report], in milliseconds.
type Latency struct {
	Mean float64 `json:"meanMs"`
	P50  float64 `json:"p50Ms"`
	P90  float64 `json:"p90Ms"`
	P99  float64 `json:"p99Ms"`
	Max  float64 `json:"maxMs"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func latencyOf(h *histogram) Latency {
	return Latency{Mean: ms(h.mean()), P50: ms(h.percentile(50)), P90: ms(h.percentile(90)), P99: ms(h.percentile(99)), Max: ms(time.Duration(h.max))}
}

// writeText prints r for a person.
func (r *Report) writeText(w io.Writer) {
	server := ""
	if r.ServerCPUSeconds > 0 {
		server = fmt.Sprintf(", server CPU %.1fs", r.ServerCPUSeconds)
	}
	fmt.Fprintf(w, "%s %s  concurrency %d  %.1fs  (GOMAXPROCS %d, load generator CPU %.1fs%s)\n",
		r.Mode, r.Target, r.Concurrency, r.Seconds, r.GOMAXPROCS, r.ClientCPUSeconds, server)
	fmt.Fprintf(w, "  requests   %d (%d errors)\n", r.Requests, r.Errors)
	fmt.Fprintf(w, "  throughput %.0f req/s\n", r.RequestsPerSecond)
	fmt.Fprintf(w, "  latency    p50 %s  p90 %s  p99 %s  max %s  mean %s\n",
		fmtMs(r.Latency.P50), fmtMs(r.Latency.P90), fmtMs(r.Latency.P99), fmtMs(r.Latency.Max), fmtMs(r.Latency.Mean))
	fmt.Fprintf(w, "  outcomes   %s\n", outcomeList(r.Outcomes))
	kinds := make([]string, 0, len(r.Kinds))
	for k := range r.Kinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		kr := r.Kinds[k]
		fmt.Fprintf(w, "  %-10s %d (%.1f%%, %d errors)  p50 %s  p99 %s  %s\n", k, kr.Requests, 100*kr.Share, kr.Errors,
			fmtMs(kr.Latency.P50), fmtMs(kr.Latency.P99), outcomeList(kr.Outcomes))
	}
	if c := r.VsDirect; c != nil {
		via := "mesh" // what stands between the client and the agent
		if r.Mode == "floor" {
			via = "proxy"
		}
		fmt.Fprintf(w, "  vs direct  direct p50 %s, %.0f req/s; added p50 %s (%s − direct), added ÷ direct p50 %.2f, %s ÷ direct throughput %.2f\n",
			fmtMs(c.DirectP50Ms), c.DirectRequestsPerSecond, fmtMs(c.AddedP50Ms), via, c.AddedP50Ratio, via, c.ThroughputRatio)
	}
	if l := r.DiskLimit; l != nil {
		fmt.Fprintf(w, "  limit      %d ÷ p50 = %.0f commits/s\n", l.InFlight, l.PerSecond)
	}
}

// outcomeList prints outcome counts sorted by outcome.
func outcomeList(outcomes map[string]uint64) string {
	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, outcomes[k])
	}
	return strings.Join(parts, ", ")
}

func fmtMs(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.0fµs", v*1000)
	}
	return fmt.Sprintf("%.2fms", v)
}
