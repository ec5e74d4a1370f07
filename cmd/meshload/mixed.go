package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
)

// The kinds of request of -mode mixed and soak and their shares of the
// requests, in percent: discover 70, delegate 20, register/heartbeat 10.
var mixKinds = [...]struct {
	name    string
	percent uint64
}{{"discover", 70}, {"delegate", 20}, {"register", 5}, {"heartbeat", 5}}

const (
	kindDiscover = iota
	kindDelegate
	kindRegister
	kindHeartbeat
)

// splitmix64 is a bijective mix of x (the SplitMix64 finalizer).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// mixDraw is the draw of request i for seed: a pure function, so a seed
// gives the same sequence of requests on every run.
func mixDraw(seed uint64, i int) uint64 { return splitmix64(seed*0x9e3779b97f4a7c15 ^ uint64(i)) }

// kindOf returns the kind of request i for seed.
func kindOf(seed uint64, i int) int {
	p := mixDraw(seed, i) % 100
	for k, mk := range mixKinds {
		if p < mk.percent {
			return k
		}
		p -= mk.percent
	}
	return len(mixKinds) - 1
}

// mixer makes the requests of -mode mixed: discover queries round-robin,
// synchronous delegations to one agent, and registrations and heartbeats
// of a fixed pool of synthetic agents, registered before the run, so the
// registry does not grow with the run.
type mixer struct {
	t            *httpTarget
	seed         uint64
	discoverURLs []string
	delegate     []byte   // the POST /v1/delegate body
	agents       [][]byte // the registration bodies of the pool
	beatURLs     []string // the heartbeat URLs of the pool
}

func newMixer(t *httpTarget, seed uint64, gen *synthagents.Generator, prefix string, pool int, queries []string, limit int, target, task string) (*mixer, error) {
	m := &mixer{t: t, seed: seed, discoverURLs: t.discoverURLs(queries, limit)}
	var err error
	if m.delegate, err = delegateBody(target, task); err != nil {
		return nil, err
	}
	for i := range pool {
		a := gen.Agent(prefix, i, 0)
		body, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		m.agents = append(m.agents, body)
		m.beatURLs = append(m.beatURLs, t.base+"/v1/agents/"+url.PathEscape(a.Name)+"/heartbeat")
	}
	return m, nil
}

// op returns one worker's requests: request i is of kind kindOf(seed, i).
func (m *mixer) op(int) opFunc {
	client := newHTTPClient(m.t.concurrency, m.t.timeout)
	discover := make([]*http.Request, len(m.discoverURLs))
	return func(ctx context.Context, i int) outcome {
		draw := mixDraw(m.seed, i)
		k := kindOf(m.seed, i)
		agent := int((draw >> 32) % uint64(len(m.agents)))
		var o outcome
		switch k {
		case kindDiscover:
			j := i % len(discover)
			if discover[j] == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.discoverURLs[j], nil)
				if err != nil {
					o = outcome{key: "error: bad url"}
					break
				}
				m.t.authorize(req.Header)
				discover[j] = req
			}
			o = do(client, discover[j], is2xx)
		case kindDelegate:
			o = m.t.delegate(ctx, client, m.delegate)
		case kindRegister:
			o = m.post(ctx, client, m.t.base+"/v1/agents", m.agents[agent])
		case kindHeartbeat:
			o = m.post(ctx, client, m.beatURLs[agent], nil)
		}
		o.kind = mixKinds[k].name
		return o
	}
}

func (m *mixer) post(ctx context.Context, client *http.Client, u string, body []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return outcome{key: "error: bad url"}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	m.t.authorize(req.Header)
	return do(client, req, is2xx)
}

// SoakSample is one interval of -mode soak: the server's state at its end
// and the load's figures over it.
type SoakSample struct {
	Sample int `json:"sample"`
	// ElapsedSeconds is the time since the soak began, at the sample.
	ElapsedSeconds float64 `json:"elapsedSeconds"`
	// RSSMiB is the server's resident set size (VmRSS), 0 when unknown.
	RSSMiB float64 `json:"rssMiB"`
	// RSSAnonMiB is RSSMiB's anonymous part (RssAnon: heap and stacks);
	// the rest is mostly the pages of the store file bbolt maps.
	RSSAnonMiB float64 `json:"rssAnonMiB"`
	// Goroutines is go_goroutines from the server's /metrics; nil when
	// /metrics could not be read.
	Goroutines *int `json:"goroutines"`
	// OpenFiles counts the server's open file descriptors, 0 when unknown.
	OpenFiles int `json:"openFiles"`
	// StoreFileMiB is the size of -store-file, 0 when none was given.
	StoreFileMiB      float64 `json:"storeFileMiB"`
	Requests          uint64  `json:"requests"`
	Errors            uint64  `json:"errors"`
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	P99Ms             float64 `json:"p99Ms"`
}

// SoakReport is the end of -mode soak: every sample, the last third of
// the samples against the first third, and the whole soak as one mixed
// report.
type SoakReport struct {
	Mode    string       `json:"mode"`
	Samples []SoakSample `json:"samples"`
	Verdict SoakVerdict  `json:"verdict"`
	Total   *Report      `json:"total"`
}

// SoakVerdict is the growth after warm-up: the means of the last third of
// the samples against those of the middle third, in percent of the
// middle third's. The first third is warm-up: the server's caches and
// pools fill, and so does its store, up to its retention bounds
// (100,000 delegation records and audit entries by default), after which
// a store that reuses freed space stops growing. A soak of fewer than
// three samples compares the last with the first.
type SoakVerdict struct {
	// Flat is true when RSS, goroutines, open files and the store file
	// each grew by at most MaxGrowthPct.
	Flat         bool    `json:"flat"`
	MaxGrowthPct float64 `json:"maxGrowthPct"`
	RSSPct       float64 `json:"rssGrowthPct"`
	// RSSAnonPct is the growth of RSS's anonymous part (heap and stacks),
	// which a leak grows; the rest of RSS grows with the store file
	// bbolt maps. It is shown, not judged: the verdict is on the whole
	// RSS.
	RSSAnonPct float64 `json:"rssAnonGrowthPct"`
	// StoreFilePct is the growth of the store file (0 without
	// -store-file).
	StoreFilePct float64 `json:"storeFileGrowthPct"`
	// GoroutinesPct is nil when the goroutines were not known.
	GoroutinesPct   *float64 `json:"goroutinesGrowthPct"`
	OpenFilesPct    float64  `json:"openFilesGrowthPct"`
	P99Pct          float64  `json:"p99ChangePct"`
	RequestsRatePct float64  `json:"requestsPerSecondChangePct"`
}

// maxSoakGrowth is the growth, in percent, that a soak still calls flat:
// a Go server's RSS moves by a few percent with the collector's cycles.
const maxSoakGrowth = 10

// serverProbe reads the server's state for a soak sample.
type serverProbe struct {
	pid       int
	storeFile string // the server's store file; empty for none
	metrics   string // the /metrics URL
	t         *httpTarget
	client    *http.Client
}

func (p *serverProbe) sample(ctx context.Context, s *SoakSample) {
	if rss, anon, ok := processRSS(p.pid); ok {
		s.RSSMiB = mib(rss)
		s.RSSAnonMiB = mib(anon)
	}
	if n, ok := processFDs(p.pid); ok {
		s.OpenFiles = n
	}
	if n, ok := p.goroutines(ctx); ok {
		s.Goroutines = &n
	}
	if p.storeFile != "" {
		if fi, err := os.Stat(p.storeFile); err == nil {
			s.StoreFileMiB = mib(uint64(fi.Size()))
		}
	}
}

func mib(b uint64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }

// goroutines scrapes go_goroutines from the server's /metrics.
func (p *serverProbe) goroutines(ctx context.Context) (int, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metrics, nil)
	if err != nil {
		return 0, false
	}
	p.t.authorize(req.Header)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	defer func() { _, _ = io.Copy(io.Discard, resp.Body) }() // keeps the connection
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("go_goroutines ")); ok {
			f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
			return int(f), err == nil
		}
	}
	return 0, false
}

// runSoak runs the mixed load for total, one run of runLoad per sample
// interval on the same workers and connections, and reports each interval
// as it ends (emitSample), then the verdict.
func runSoak(ctx context.Context, c int, total, every, warmup time.Duration, m *mixer, probe *serverProbe, emitSample func(SoakSample)) *SoakReport {
	ops := make([]opFunc, c)
	var next atomic.Int64 // request numbers run on across intervals
	newOp := func(w int) opFunc {
		// Each interval's worker w reuses the op (and the connection) of
		// the previous one; wg.Wait in runLoad orders the accesses.
		if ops[w] == nil {
			ops[w] = m.op(w)
		}
		op := ops[w]
		return func(ctx context.Context, _ int) outcome { return op(ctx, int(next.Add(1)-1)) }
	}
	rep := &SoakReport{Mode: "soak"}
	start := time.Now()
	var elapsed time.Duration
	for n := 1; elapsed < total && ctx.Err() == nil; n++ {
		d := min(every, total-elapsed)
		p := plan{concurrency: c, duration: d}
		if n == 1 {
			p.warmup = warmup
		}
		r := runLoad(ctx, p, newOp)
		elapsed += d
		s := SoakSample{
			Sample: n, ElapsedSeconds: math.Round(time.Since(start).Seconds()*10) / 10,
			Requests: r.Requests, Errors: r.Errors,
			RequestsPerSecond: math.Round(r.RequestsPerSecond), P99Ms: r.Latency.P99,
		}
		probe.sample(ctx, &s)
		rep.Samples = append(rep.Samples, s)
		emitSample(s)
		if rep.Total == nil {
			rep.Total = r
		} else {
			rep.Total.add(r)
		}
	}
	rep.Verdict = verdictOf(rep.Samples)
	return rep
}

// verdictOf compares the last third of the samples with the middle third
// (the first is warm-up), or the last sample with the first when there
// are fewer than three.
func verdictOf(samples []SoakSample) SoakVerdict {
	v := SoakVerdict{MaxGrowthPct: maxSoakGrowth}
	n := len(samples)
	if n == 0 {
		return v
	}
	k := max(n/3, 1)
	first, last := samples[:1], samples[n-1:]
	if n >= 3 {
		first, last = samples[k:2*k], samples[n-k:]
	}
	mean := func(ss []SoakSample, f func(SoakSample) float64) float64 {
		var sum float64
		for _, s := range ss {
			sum += f(s)
		}
		return sum / float64(len(ss))
	}
	change := func(f func(SoakSample) float64) float64 {
		a, b := mean(first, f), mean(last, f)
		if a == 0 {
			return 0
		}
		return math.Round((b-a)/a*1000) / 10
	}
	v.RSSPct = change(func(s SoakSample) float64 { return s.RSSMiB })
	v.RSSAnonPct = change(func(s SoakSample) float64 { return s.RSSAnonMiB })
	v.OpenFilesPct = change(func(s SoakSample) float64 { return float64(s.OpenFiles) })
	v.StoreFilePct = change(func(s SoakSample) float64 { return s.StoreFileMiB })
	v.P99Pct = change(func(s SoakSample) float64 { return s.P99Ms })
	v.RequestsRatePct = change(func(s SoakSample) float64 { return s.RequestsPerSecond })
	known := true
	for _, s := range samples {
		known = known && s.Goroutines != nil
	}
	if known {
		g := change(func(s SoakSample) float64 { return float64(*s.Goroutines) })
		v.GoroutinesPct = &g
	}
	v.Flat = v.RSSPct <= maxSoakGrowth && v.OpenFilesPct <= maxSoakGrowth && v.StoreFilePct <= maxSoakGrowth &&
		(v.GoroutinesPct == nil || *v.GoroutinesPct <= maxSoakGrowth)
	return v
}

const soakHeader = "sample  elapsed    RSS MiB  (anon)  goroutines  open files  file MiB   req/s      p99  errors"

// writeSoakRow prints a sample as a row under soakHeader.
func writeSoakRow(w io.Writer, s SoakSample) {
	g := "-"
	if s.Goroutines != nil {
		g = strconv.Itoa(*s.Goroutines)
	}
	rss, anon, fds, file := "-", "-", "-", "-"
	if s.StoreFileMiB > 0 {
		file = fmt.Sprintf("%.1f", s.StoreFileMiB)
	}
	if s.RSSMiB > 0 {
		rss = fmt.Sprintf("%.1f", s.RSSMiB)
		anon = fmt.Sprintf("%.1f", s.RSSAnonMiB)
	}
	if s.OpenFiles > 0 {
		fds = strconv.Itoa(s.OpenFiles)
	}
	fmt.Fprintf(w, "%6d  %6.0fs  %9s  %6s  %10s  %10s  %8s  %6.0f  %7s  %6d\n",
		s.Sample, s.ElapsedSeconds, rss, anon, g, fds, file, s.RequestsPerSecond, fmtMs(s.P99Ms), s.Errors)
}

// writeVerdict prints the verdict line.
func writeVerdict(w io.Writer, v SoakVerdict) {
	word := "flat"
	if !v.Flat {
		word = "GROWTH"
	}
	g := "goroutines unknown"
	if v.GoroutinesPct != nil {
		g = fmt.Sprintf("goroutines %+.1f%%", *v.GoroutinesPct)
	}
	fmt.Fprintf(w, "soak verdict: %s (after warm-up, last third against middle third: RSS %+.1f%% (anonymous %+.1f%%), %s, open files %+.1f%%, store file %+.1f%%; p99 %+.1f%%, req/s %+.1f%%; flat is growth ≤ %.0f%%)\n",
		word, v.RSSPct, v.RSSAnonPct, g, v.OpenFilesPct, v.StoreFilePct, v.P99Pct, v.RequestsRatePct, v.MaxGrowthPct)
}

// runMixed runs -mode mixed and soak: it starts (or takes) the agent of
// the delegations, registers it and the pool, then measures.
func runMixed(ctx context.Context, cfg *config, gen *synthagents.Generator, serverCPU func() time.Duration, emit func(*Report), stdout, stderr io.Writer) (int, error) {
	t, err := newHTTPTarget(cfg)
	if err != nil {
		return 2, err
	}
	queries, err := loadQueries(cfg, gen)
	if err != nil {
		return 2, err
	}
	_, stop, err := startTarget(ctx, cfg, t)
	if err != nil {
		return 1, err
	}
	defer stop()
	t.concurrency = max(cfg.concurrency[0], 8)
	r := runLoad(ctx, plan{concurrency: t.concurrency, count: cfg.pool}, t.registerOp(gen, cfg.prefix))
	if r.Errors > 0 {
		return 1, fmt.Errorf("registering the pool failed for %d of %d agents: %v", r.Errors, cfg.pool, r.Outcomes)
	}
	fmt.Fprintf(stderr, "meshload: registered the pool of %d agents in %.1fs\n", cfg.pool, r.Seconds)
	m, err := newMixer(t, cfg.seed, gen, cfg.prefix, cfg.pool, queries, cfg.limit, cfg.target, cfg.task)
	if err != nil {
		return 1, err
	}
	target := fmt.Sprintf("%s: discover %d%% (%d queries), delegate %d%% (to %s), register %d%% and heartbeat %d%% (%d agents)",
		t.base, mixKinds[kindDiscover].percent, len(queries), mixKinds[kindDelegate].percent, cfg.target,
		mixKinds[kindRegister].percent, mixKinds[kindHeartbeat].percent, cfg.pool)
	settle(ctx, cfg, serverCPU, stderr)

	if cfg.mode == "soak" {
		return soak(ctx, cfg, t, m, target, stdout)
	}
	return 0, levels(ctx, cfg, func(c int) {
		ct := *t
		ct.concurrency = c
		cm := *m
		cm.t = &ct
		p := plan{concurrency: c, count: cfg.n, duration: cfg.duration, warmup: cfg.warmup, serverCPU: serverCPU}
		r := runLoad(ctx, p, cm.op)
		r.Mode, r.Target = cfg.mode, target
		emit(r)
	})
}

// soak runs runSoak at the first -c level and prints its samples and
// verdict: a table, or JSON (one object per sample, then the SoakReport).
func soak(ctx context.Context, cfg *config, t *httpTarget, m *mixer, target string, stdout io.Writer) (int, error) {
	c := cfg.concurrency[0]
	t.concurrency = c
	probe := &serverProbe{pid: cfg.serverPID, storeFile: cfg.storeFile, metrics: t.base + "/metrics", t: t, client: newHTTPClient(1, t.timeout)}
	enc := json.NewEncoder(stdout)
	if !cfg.json {
		fmt.Fprintf(stdout, "soak %s  concurrency %d  %s, a sample every %s (server pid %d)\n", target, c, cfg.duration, cfg.sample, cfg.serverPID)
		fmt.Fprintln(stdout, soakHeader)
	}
	var werr error
	rep := runSoak(ctx, c, cfg.duration, cfg.sample, cfg.warmup, m, probe, func(s SoakSample) {
		if cfg.json {
			if err := enc.Encode(s); err != nil && werr == nil {
				werr = err
			}
			return
		}
		writeSoakRow(stdout, s)
	})
	if rep.Total != nil {
		rep.Total.Mode, rep.Total.Target = "soak", target
	}
	if cfg.json {
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil && werr == nil {
			werr = err
		}
	} else {
		if rep.Total != nil {
			rep.Total.writeText(stdout)
		}
		writeVerdict(stdout, rep.Verdict)
	}
	if werr != nil {
		return 1, werr
	}
	return 0, interrupted(ctx)
}
