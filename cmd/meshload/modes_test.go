package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
)

const testToken = "modes-token-0123456789"

// newTestServer serves the real control plane (httpserver over a memstore
// registry) on an httptest listener and returns its meshload flags.
func newTestServer(t *testing.T) (*mesh, []string) {
	t.Helper()
	m, err := newMesh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.close)
	h, err := httpserver.New(m.reg, m.engine, m.del, &httpserver.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return m, []string{"-url", ts.URL, "-token", testToken}
}

// runOut runs the command line and returns its stdout.
func runOut(t *testing.T, wantStatus int, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	status := run(t.Context(), args, func(string) string { return "" }, &stdout, &stderr)
	if status != wantStatus {
		t.Fatalf("meshload %q: exit %d, want %d\nstderr: %s", args, status, wantStatus, stderr.String())
	}
	return stdout.Bytes()
}

// A delegate run measures the echo agent directly, then through the
// mesh, and compares the two.
func TestDelegateAgainstDirect(t *testing.T) {
	_, base := newTestServer(t)
	rs := meshloadAll(t, 0, append(base, "-mode", "delegate", "-n", "60", "-c", "1,2")...)
	wantComparedRuns(t, rs, "delegate", []int{1, 2}, 60, "completed")
}

// wantComparedRuns checks the reports of a delegate or floor run at the
// levels cs, n requests each: a direct run, then one of mode with
// outcome every time, compared with the direct run before it.
func wantComparedRuns(t *testing.T, rs []Report, mode string, cs []int, n uint64, outcome string) {
	t.Helper()
	if len(rs) != 2*len(cs) {
		t.Fatalf("%d reports, want direct and %s at -c %v", len(rs), mode, cs)
	}
	for i, c := range cs {
		direct, via := rs[2*i], rs[2*i+1]
		if direct.Mode != "direct" || via.Mode != mode || direct.Concurrency != c || via.Concurrency != c {
			t.Fatalf("reports %d, %d: %s at %d and %s at %d", 2*i, 2*i+1, direct.Mode, direct.Concurrency, via.Mode, via.Concurrency)
		}
		wantOutcomes(t, direct, map[string]uint64{"200": n})
		wantOutcomes(t, via, map[string]uint64{outcome: n})
		v := via.VsDirect
		if v == nil || direct.VsDirect != nil {
			t.Fatalf("-c %d: vsDirect on the %s report only: %+v, %+v", c, mode, direct.VsDirect, v)
		}
		if v.DirectP50Ms != direct.Latency.P50 || v.DirectRequestsPerSecond != direct.RequestsPerSecond {
			t.Errorf("-c %d: the comparison is not against the direct run: %+v, direct %+v", c, v, direct.Latency)
		}
		if added := via.Latency.P50 - direct.Latency.P50; math.Abs(v.AddedP50Ms-added) > 0.001 {
			t.Errorf("-c %d: added p50 %v, want %s − direct = %v", c, v.AddedP50Ms, mode, added)
		}
		if want := round2(v.AddedP50Ms / v.DirectP50Ms); v.AddedP50Ratio != want {
			t.Errorf("-c %d: added ÷ direct %v, want %v", c, v.AddedP50Ratio, want)
		}
		if want := round2(via.RequestsPerSecond / direct.RequestsPerSecond); v.ThroughputRatio != want || want <= 0 {
			t.Errorf("-c %d: throughput ratio %v, want %v", c, v.ThroughputRatio, want)
		}
	}
}

// -mode direct posts the mesh's request body to -agent; -mode delegate
// with -agent does not register it.
func TestDirectToAGivenAgent(t *testing.T) {
	var hits atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			DelegationID string         `json:"delegationId"`
			Task         string         `json:"task"`
			Context      map[string]any `json:"context"`
			CallbackURL  string         `json:"callbackUrl"`
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
			json.NewDecoder(r.Body).Decode(&body) != nil ||
			body.DelegationID == "" || body.Task != "count me" || body.Context["depth"] != 1.0 || body.CallbackURL == "" {
			http.Error(w, "not the mesh's request", http.StatusBadRequest)
			return
		}
		hits.Add(1)
		_, _ = io.WriteString(w, `{"result": "counted"}`)
	}))
	t.Cleanup(agent.Close)
	r := meshload(t, 0, "-mode", "direct", "-agent", agent.URL, "-task", "count me", "-n", "25", "-c", "2")
	wantOutcomes(t, r, map[string]uint64{"200": 25})
	if hits.Load() != 25 {
		t.Errorf("the agent got %d requests, want 25", hits.Load())
	}

	_, base := newTestServer(t)
	rs := meshloadAll(t, 0, append(base, "-mode", "delegate", "-agent", agent.URL, "-target", "nobody", "-n", "5", "-c", "1")...)
	if len(rs) != 2 {
		t.Fatalf("%d reports, want 2", len(rs))
	}
	wantOutcomes(t, rs[1], map[string]uint64{"404": 5}) // never registered
	if rs[1].Errors != 5 {
		t.Errorf("%d errors, want 5", rs[1].Errors)
	}
}

func TestKindsOfTheMix(t *testing.T) {
	var counts [len(mixKinds)]int
	const n = 100_000
	for i := range n {
		counts[kindOf(7, i)]++
	}
	for k, mk := range mixKinds {
		if got := 100 * float64(counts[k]) / n; math.Abs(got-float64(mk.percent)) > 0.5 {
			t.Errorf("%s: %.2f%% of the requests, want %d%%", mk.name, got, mk.percent)
		}
	}
}

// -mode mixed against the real server: the kinds in their proportions,
// every request a success, and the same sequence for the same seed.
func TestMixed(t *testing.T) {
	m, base := newTestServer(t)
	args := append(base, "-mode", "mixed", "-n", "2000", "-c", "4", "-pool", "40", "-nqueries", "50")
	r := meshload(t, 0, args...)
	if r.Requests != 2000 || r.Errors != 0 {
		t.Fatalf("%d requests, %d errors (%v), want 2000 and none", r.Requests, r.Errors, r.Outcomes)
	}
	var sum uint64
	for _, mk := range mixKinds {
		kr := r.Kinds[mk.name]
		if kr == nil {
			t.Fatalf("no %s in %v", mk.name, r.Kinds)
		}
		sum += kr.Requests
		if share := 100 * kr.Share; math.Abs(share-float64(mk.percent)) > 3 {
			t.Errorf("%s: %.1f%% of the requests, want %d%% ± 3", mk.name, share, mk.percent)
		}
		if kr.Errors != 0 || kr.Latency.P50 <= 0 || kr.Latency.P99 < kr.Latency.P50 {
			t.Errorf("%s: %+v", mk.name, kr)
		}
	}
	if sum != r.Requests {
		t.Errorf("the kinds add up to %d requests, want %d", sum, r.Requests)
	}
	if got := r.Kinds["delegate"].Outcomes["completed"]; got != r.Kinds["delegate"].Requests {
		t.Errorf("delegations: %v, want every one completed", r.Kinds["delegate"].Outcomes)
	}
	if got := r.Kinds["heartbeat"].Outcomes["200"]; got != r.Kinds["heartbeat"].Requests {
		t.Errorf("heartbeats: %v, want every one 200", r.Kinds["heartbeat"].Outcomes)
	}
	// The pool and the echo agent, and no more: registrations replace.
	if l, _ := m.reg.List(t.Context(), registry.ListOptions{Limit: 1000}); len(l.Agents) != 41 {
		t.Errorf("%d agents registered, want the pool of 40 and the echo agent", len(l.Agents))
	}

	again := meshload(t, 0, args...)
	other := meshload(t, 0, append(args, "-seed", "2")...)
	same := true
	for _, mk := range mixKinds {
		if again.Kinds[mk.name].Requests != r.Kinds[mk.name].Requests {
			t.Errorf("%s: %d requests, then %d with the same seed", mk.name, r.Kinds[mk.name].Requests, again.Kinds[mk.name].Requests)
		}
		same = same && other.Kinds[mk.name].Requests == r.Kinds[mk.name].Requests
	}
	if same {
		t.Error("-seed 2 made the same mix as -seed 1")
	}
}

// -mode soak samples the server (this process) and its store file at
// every interval and compares the last third with the middle one.
func TestSoak(t *testing.T) {
	_, base := newTestServer(t)
	pid := strconv.Itoa(os.Getpid())
	storeFile := t.TempDir() + "/mesh.db"
	if err := os.WriteFile(storeFile, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runOut(t, 0, append(base, "-mode", "soak", "-server-pid", pid, "-d", "900ms", "-sample", "300ms",
		"-c", "2", "-pool", "20", "-nqueries", "20", "-settle", "0", "-store-file", storeFile, "-json")...)
	dec := json.NewDecoder(bytes.NewReader(out))
	var samples []SoakSample
	var rep SoakReport
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if bytes.Contains(raw, []byte(`"mode"`)) {
			if err := json.Unmarshal(raw, &rep); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var s SoakSample
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
	}
	if len(samples) != 3 || len(rep.Samples) != 3 || rep.Mode != "soak" {
		t.Fatalf("%d samples and a report of %d (%q), want 3\n%s", len(samples), len(rep.Samples), rep.Mode, out)
	}
	var total uint64
	for i, s := range samples {
		if s.Sample != i+1 || s.Requests == 0 || s.Errors != 0 || s.RequestsPerSecond <= 0 || s.P99Ms <= 0 {
			t.Errorf("sample %d: %+v", i+1, s)
		}
		if i > 0 && s.ElapsedSeconds <= samples[i-1].ElapsedSeconds {
			t.Errorf("sample %d at %vs, after %vs", i+1, s.ElapsedSeconds, samples[i-1].ElapsedSeconds)
		}
		if runtime.GOOS == "linux" && (s.RSSMiB <= 0 || s.RSSAnonMiB <= 0 || s.RSSAnonMiB > s.RSSMiB || s.OpenFiles <= 0) {
			t.Errorf("sample %d: RSS %v MiB (anonymous %v), %d open files", i+1, s.RSSMiB, s.RSSAnonMiB, s.OpenFiles)
		}
		if s.Goroutines == nil || *s.Goroutines <= 0 {
			t.Errorf("sample %d: goroutines %v from /metrics", i+1, s.Goroutines)
		}
		if s.StoreFileMiB != 3 {
			t.Errorf("sample %d: the store file is %v MiB, want 3", i+1, s.StoreFileMiB)
		}
		total += s.Requests
	}
	if rep.Total == nil || rep.Total.Requests != total || len(rep.Total.Kinds) != len(mixKinds) {
		t.Errorf("the total is not the samples': %+v", rep.Total)
	}
	if rep.Verdict.GoroutinesPct == nil || rep.Verdict.MaxGrowthPct != maxSoakGrowth {
		t.Errorf("verdict %+v", rep.Verdict)
	}

	text := string(runOut(t, 0, append(base, "-mode", "soak", "-server-pid", pid, "-d", "200ms", "-sample", "100ms",
		"-c", "1", "-pool", "5", "-nqueries", "5", "-settle", "0")...))
	if !strings.Contains(text, soakHeader) || !strings.Contains(text, "soak verdict: ") || strings.Count(text, "\n") < 5 {
		t.Errorf("the soak's table:\n%s", text)
	}
	if runtime.GOOS == "linux" {
		runOut(t, 2, append(base, "-mode", "soak")...) // no -server-pid
	}
}

func TestVerdict(t *testing.T) {
	g := func(n int) *int { return &n }
	flat := []SoakSample{
		{RSSMiB: 50, RSSAnonMiB: 40, OpenFiles: 30, Goroutines: g(40), StoreFileMiB: 8, P99Ms: 5, RequestsPerSecond: 1000},
		{RSSMiB: 50, RSSAnonMiB: 40, OpenFiles: 30, Goroutines: g(40), StoreFileMiB: 8, P99Ms: 5, RequestsPerSecond: 1000},
		{RSSMiB: 52, RSSAnonMiB: 40, OpenFiles: 30, Goroutines: g(40), StoreFileMiB: 8, P99Ms: 6, RequestsPerSecond: 900},
	}
	v := verdictOf(flat)
	if !v.Flat || v.RSSPct != 4 || v.RSSAnonPct != 0 || v.OpenFilesPct != 0 || *v.GoroutinesPct != 0 ||
		v.StoreFilePct != 0 || v.P99Pct != 20 || v.RequestsRatePct != -10 {
		t.Errorf("flat samples: %+v", v)
	}
	// The store's pages grow RSS, not its anonymous part: still growth.
	leak := append(slices.Clone(flat), SoakSample{RSSMiB: 70, RSSAnonMiB: 40, OpenFiles: 30, Goroutines: g(40)},
		SoakSample{RSSMiB: 80, RSSAnonMiB: 41, OpenFiles: 30, Goroutines: g(40)},
		SoakSample{RSSMiB: 90, RSSAnonMiB: 41, OpenFiles: 60, Goroutines: g(40)})
	if v := verdictOf(leak); v.Flat || v.RSSPct != 39.3 || v.RSSAnonPct != 2.5 || v.OpenFilesPct != 50 {
		t.Errorf("growing samples: %+v", v)
	}
	// Growth in the first third is warm-up (the store filling up to its
	// bounds); what follows it is judged.
	warm := []SoakSample{
		{RSSMiB: 40, OpenFiles: 30, StoreFileMiB: 10}, {RSSMiB: 80, OpenFiles: 30, StoreFileMiB: 60},
		{RSSMiB: 100, OpenFiles: 30, StoreFileMiB: 70}, {RSSMiB: 101, OpenFiles: 30, StoreFileMiB: 70},
		{RSSMiB: 99, OpenFiles: 30, StoreFileMiB: 70}, {RSSMiB: 102, OpenFiles: 30, StoreFileMiB: 70},
	}
	if v := verdictOf(warm); !v.Flat || v.RSSPct != 0 || v.StoreFilePct != 0 {
		t.Errorf("growth during warm-up only: %+v", v)
	}
	// A store file that keeps growing is growth, whatever RSS does.
	warm[5].StoreFileMiB, warm[4].StoreFileMiB = 90, 80
	if v := verdictOf(warm); v.Flat || v.StoreFilePct != 21.4 {
		t.Errorf("a growing store file: %+v", v)
	}
	if v := verdictOf([]SoakSample{{RSSMiB: 50}}); !v.Flat || v.GoroutinesPct != nil {
		t.Errorf("one sample without goroutines: %+v", v)
	}
	if v := verdictOf([]SoakSample{{RSSMiB: 50}, {RSSMiB: 60}}); v.Flat || v.RSSPct != 20 {
		t.Errorf("two samples, the last against the first: %+v", v)
	}
}

// -mode fsync times fdatasync on a file in -dir and removes it.
func TestFsyncProbe(t *testing.T) {
	dir := t.TempDir()
	r := meshload(t, 0, "-mode", "fsync", "-d", "200ms", "-dir", dir)
	if r.Requests == 0 || r.Errors != 0 || r.Latency.P50 <= 0 || r.Outcomes["ok"] != r.Requests {
		t.Fatalf("fsync: %+v", r)
	}
	l := r.DiskLimit
	if l == nil || l.InFlight != 8 || math.Abs(l.PerSecond-8/(r.Latency.P50/1e3)) > 0.01 {
		t.Errorf("disk limit %+v, want 8 ÷ p50 %v ms", l, r.Latency.P50)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the probe left %d files in -dir", len(entries))
	}
	meshload(t, 1, "-mode", "fsync", "-d", "100ms", "-dir", dir+"/missing")
}

// A floor run measures the echo agent directly, then through a bare
// reverse proxy in a child process, and compares the two as a delegate
// run does; the proxy forwards the mesh's request unchanged.
func TestFloorAgainstDirect(t *testing.T) {
	t.Setenv(commandEnv, "1") // the child meshload is this test binary
	rs := meshloadAll(t, 0, "-mode", "floor", "-n", "40", "-c", "1,2")
	wantComparedRuns(t, rs, "floor", []int{1, 2}, 40, "200")
	for i := 0; i < len(rs); i += 2 {
		direct, floor := rs[i], rs[i+1]
		if !strings.Contains(floor.Target, "a bare reverse proxy to "+strings.TrimPrefix(direct.Target, "POST ")) {
			t.Errorf("the floor run's target %q is not a proxy in front of %q", floor.Target, direct.Target)
		}
	}
}

// -mode proxy forwards every request to -agent and stops when its stdin
// closes.
func TestProxyForwardsUntilStdinCloses(t *testing.T) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Path", r.URL.Path)
		_, _ = w.Write(append([]byte("got "), body...))
	}))
	t.Cleanup(agent.Close)
	cfg, err := parseFlags([]string{"-mode", "proxy", "-agent", agent.URL}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := serveProxy(t.Context(), cfg, stdinR, stdoutW)
		done <- result{status, err}
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(line)
	resp, err := http.Post(url+"/task", "application/json", strings.NewReader(`{"task":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `got {"task":"x"}` || resp.Header.Get("X-Path") != "/task" {
		t.Errorf("through the proxy: %d %q (path %q)", resp.StatusCode, body, resp.Header.Get("X-Path"))
	}
	_ = stdinW.Close()
	select {
	case r := <-done:
		if r.status != 0 || r.err != nil {
			t.Errorf("proxy ended with %d, %v", r.status, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not stop when its stdin closed")
	}
	if _, err := http.Get(url + "/task"); err == nil {
		t.Error("the proxy still answers after it stopped")
	}

	_, err = serveProxy(t.Context(), &config{agent: "not a url"}, strings.NewReader(""), io.Discard)
	if err == nil {
		t.Error("-agent that is not an http URL: no error")
	}
}

// The proxy's own errors reach meshload's stderr: a floor run in front of
// an agent the proxy cannot forward to (https) stops before measuring.
func TestFloorReportsTheProxysError(t *testing.T) {
	t.Setenv(commandEnv, "1")
	var stdout, stderr bytes.Buffer
	status := run(t.Context(), []string{"-mode", "floor", "-agent", "https://127.0.0.1:1/task", "-n", "1", "-c", "1"},
		func(string) string { return "" }, &stdout, &stderr)
	if status != 1 || stdout.Len() != 0 {
		t.Fatalf("exit %d with %q, want 1 and no report", status, stdout.String())
	}
	if !strings.Contains(stderr.String(), `-mode proxy: -agent "https://127.0.0.1:1": want the agent's http://host[:port]`) ||
		!strings.Contains(stderr.String(), "the proxy did not say where it listens") {
		t.Errorf("stderr %q: want the proxy's refusal and the floor's error", stderr.String())
	}
}

// A report's comparison line names what stood between the client and
// the agent: the mesh for delegate, the proxy for floor.
func TestComparisonLineNamesTheHop(t *testing.T) {
	for mode, via := range map[string]string{"delegate": "mesh", "floor": "proxy"} {
		r := &Report{Mode: mode, Outcomes: map[string]uint64{}, VsDirect: &Comparison{DirectP50Ms: 0.05, AddedP50Ms: 0.2, AddedP50Ratio: 4, ThroughputRatio: 0.3}}
		var b bytes.Buffer
		r.writeText(&b)
		want := "added p50 200µs (" + via + " − direct), added ÷ direct p50 4.00, " + via + " ÷ direct throughput 0.30"
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s: %q does not contain %q", mode, b.String(), want)
		}
	}
}
