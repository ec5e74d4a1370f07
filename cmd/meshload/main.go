// Command meshload is a load generator for agentmesh: it drives a running
// `agentmesh serve` over HTTP, or `agentmesh` on stdio over MCP, with a
// closed loop of concurrent workers and reports throughput, latency
// percentiles and outcomes. It is what docs/BENCHMARKS.md is measured with.
//
//	meshload -url http://127.0.0.1:8766 -token T -c 8 -d 10s -path '/v1/discover?query=budget'
//	meshload -mode seed -n 10000              # register 10,000 synthetic agents
//	meshload -mode discover -c 1,8 -d 10s     # GET /v1/discover, 2–4-word queries round-robin
//	meshload -mode register -c 8 -d 10s       # POST /v1/agents, a new agent each time
//	meshload -mode mcp-stdio -cmd 'agentmesh --store memory' -n 10000 -c 1,8 -d 10s
//	meshload -mode delegate -c 1,8 -d 5s      # direct POST to an echo agent, then through the mesh
//	meshload -mode floor -c 1,8 -d 5s         # the same, through a bare reverse proxy instead: the machine's floor
//	meshload -mode mixed -c 8 -d 10s          # discover 70 %, delegate 20 %, register/heartbeat 10 %
//	meshload -mode soak -server-pid PID       # mixed for 10 min, the server's RSS, goroutines, files every 30 s
//	meshload -mode fill -store-file F.db      # 100,000 delegation records and audit entries into a bbolt file, before serve
//	meshload -mode fsync -d 3s -dir DIR       # fdatasync p50 of 4 KiB writes in DIR: the disk's limit
//
// Each HTTP worker has its own client and keep-alive connection. The
// synthetic agents and queries are a pure function of -seed, so a seeded
// registry and the queries run against it match on every run. Run
// `meshload -h` for every flag.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `meshload — load generator for agentmesh

Usage:
  meshload [flags]

Modes (-mode):
  get        GET -path (default /health) on -url
  discover   GET /v1/discover, queries round-robin: -queries FILE (one per
             line) or -nqueries generated 2–4-word queries
  register   POST /v1/agents, a new synthetic agent each request
  seed       POST /v1/agents for synthetic agents 0 … -n-1 (default 10000);
             idempotent: the same names and records every run
  mcp-stdio  start -cmd (an MCP server on stdio), register -n synthetic
             agents with mesh_register (default 10000; 0 for none; at
             least 8 calls in flight), then call mesh_discover with the
             queries round-robin, -c calls in flight on the one connection;
             with -hold, a first -cmd holds the store and the measured one
             is its front-end (the server's CPU time is then both's)
  takeover   start -cmd twice on one store (holder and front-end), then
             -repeat times: SIGKILL the holder and time the first
             mesh_register the front-end gets acknowledged
  direct     POST -task, as the mesh sends it to an http agent, straight
             to the agent (-agent, or an echo agent meshload starts on
             -agent-addr)
  delegate   at each -c level, a direct run, then POST /v1/delegate (sync)
             of -task to -target by name; the delegate report compares
             the two: added p50 (mesh − direct), added ÷ direct p50, and
             mesh ÷ direct throughput. Without -agent, meshload starts an
             echo agent and registers it as -target (serve needs
             --allow-private-endpoints for a loopback agent)
  floor      as delegate, with a bare reverse proxy (net/http/httputil, in
             a process of its own: meshload -mode proxy) in the mesh's
             place: what a server that only forwards the request adds on
             this machine, the floor under the delegate figures; needs no
             server (-url is not used)
  proxy      serve a reverse proxy to -agent (the agent's base URL) on a
             free loopback port, printed as a URL on stdout, until stdin
             closes: the process -mode floor starts
  mixed      per request, deterministic from -seed: GET /v1/discover 70 %,
             POST /v1/delegate to -target 20 %, POST /v1/agents 5 % and
             POST /v1/agents/{name}/heartbeat 5 % on a pool of -pool
             synthetic agents (registered first); one report with counts,
             p50, p99 and errors per kind
  soak       mixed for -d (default 10m), sampling every -sample: the
             server's RSS and open files (-server-pid, required on Linux),
             its goroutines (go_goroutines of -url's /metrics, "-" when
             unreadable), the size of -store-file, requests/s and p99
             of the interval; a row per sample, then a verdict on the
             growth after warm-up: the last third of the samples against
             the middle third (the first third warms up: caches, and the
             store filling up to its retention bounds)
  fill       write -n (default 100000, the default bounds) finished
             delegation records and as many audit entries, shaped like
             the soak's, into the bbolt file -store-file before a server
             opens it, so that a soak runs with the store at its bounds
  fsync      -d of 4 KiB writes, each followed by fdatasync (as bbolt
             commits), on a file in -dir: p50, and the disk's limit of
             durable commits at the first -c level: c ÷ p50

A run lasts -d after -warmup, or exactly -n requests when -n is given
(get, discover, register, direct, delegate, floor, mixed). -c takes a list ("1,8"): one run per level, in
order, all -repeat times over, each with its own report (-json prints one
JSON object per run).

When meshload knows the server's process (mcp-stdio, or -server-pid on
Linux), reports include the server's CPU time over the measured window,
and before measuring (after seeding) meshload waits up to -settle for the
server to go idle (under 5% of a CPU for a second), so background work
such as index or model rebuilds after a bulk registration does not land
in the measurement.

Exit status: 0 when the runs completed, 1 when they could not start or
seeding failed, 2 on a usage error.

Flags:
`

type config struct {
	url, token, mode, path, queriesFile, prefix, cmd string
	concurrency                                      []int
	n, nQueries, limit, repeat, serverPID            int
	hold                                             bool
	nSet, dSet                                       bool
	duration, warmup, timeout, settle                time.Duration
	agent, agentAddr, target, task, dir              string
	pool                                             int
	sample                                           time.Duration
	storeFile                                        string
	seed                                             uint64
	json                                             bool
}

func parseFlags(args []string, env func(string) string, stderr io.Writer) (*config, error) {
	var cfg config
	fs := flag.NewFlagSet("meshload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	conc := "8"
	fs.StringVar(&cfg.url, "url", "http://127.0.0.1:8766", "base URL of the agentmesh server")
	fs.StringVar(&cfg.token, "token", env("MESH_TOKEN"), "bearer token (default $MESH_TOKEN)")
	fs.StringVar(&cfg.mode, "mode", "get", "get, discover, register, seed, mcp-stdio, takeover, direct, delegate, floor, proxy, mixed, soak, fill or fsync")
	fs.StringVar(&cfg.path, "path", "/health", "path and query for -mode get, relative to -url")
	fs.StringVar(&conc, "c", conc, "concurrent workers, each with its own keep-alive connection; a list (1,8) runs each level")
	fs.IntVar(&cfg.repeat, "repeat", 1, "run the -c levels this many times over")
	fs.DurationVar(&cfg.duration, "d", 10*time.Second, "measured duration of a run (soak: 10m)")
	fs.DurationVar(&cfg.warmup, "warmup", 0, "run this long before measuring (not with a count)")
	fs.IntVar(&cfg.n, "n", 0, "number of requests (get, discover, register, direct, delegate, floor, mixed) or agents (seed, mcp-stdio) instead of a duration")
	fs.StringVar(&cfg.queriesFile, "queries", "", "file of discover queries, one per line (default: generated)")
	fs.IntVar(&cfg.nQueries, "nqueries", 1000, "number of generated discover queries")
	fs.IntVar(&cfg.limit, "limit", 0, "discover result limit (0: the server's default, 10)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the synthetic agents and queries")
	fs.StringVar(&cfg.prefix, "prefix", "", "name prefix of the agents of -mode register (default: load-<time>-, unique per run)")
	fs.StringVar(&cfg.cmd, "cmd", "agentmesh --store memory", "MCP server command for -mode mcp-stdio (split on spaces)")
	fs.BoolVar(&cfg.hold, "hold", false, "mcp-stdio: start -cmd once more first and keep it running, so that the measured process is a front-end of it (both on one store file)")
	fs.IntVar(&cfg.serverPID, "server-pid", 0, "process id of the HTTP server, to report its CPU time and wait for it to settle (Linux)")
	fs.DurationVar(&cfg.settle, "settle", 15*time.Minute, "longest wait for the server to go idle before measuring; 0 does not wait")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.BoolVar(&cfg.json, "json", false, "print reports as JSON")
	fs.StringVar(&cfg.agent, "agent", "", "direct, delegate, floor, mixed, soak: the task endpoint of an agent already registered as -target (default: meshload starts an echo agent and registers it); proxy: the base URL it forwards to")
	fs.StringVar(&cfg.agentAddr, "agent-addr", "127.0.0.1:0", "listen address of the echo agent meshload starts without -agent")
	fs.StringVar(&cfg.target, "target", "meshload-echo", "name of the agent delegations go to")
	fs.StringVar(&cfg.task, "task", "Summarize the open invoices of the finance team.", "task text of direct and delegate requests")
	fs.IntVar(&cfg.pool, "pool", 1000, "mixed, soak: synthetic agents 0 … pool-1 (named with -prefix) that registrations and heartbeats go to")
	fs.DurationVar(&cfg.sample, "sample", 30*time.Second, "soak: sampling interval")
	fs.StringVar(&cfg.storeFile, "store-file", "", "soak: the server's store file (its bbolt file), whose size each sample reports; fill: the bbolt file to fill")
	fs.StringVar(&cfg.dir, "dir", ".", "fsync: directory of the probe's file (the store's)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		cfg.nSet = cfg.nSet || f.Name == "n"
		cfg.dSet = cfg.dSet || f.Name == "d"
	})
	if cfg.mode == "soak" && !cfg.dSet {
		cfg.duration = 10 * time.Minute
	}
	for _, s := range strings.Split(conc, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 {
			return nil, fmt.Errorf("-c %q: want positive integers separated by commas", conc)
		}
		cfg.concurrency = append(cfg.concurrency, c)
	}
	switch {
	case cfg.n < 0:
		return nil, errors.New("-n must not be negative")
	case cfg.repeat < 1:
		return nil, errors.New("-repeat must be at least 1")
	case cfg.duration <= 0:
		return nil, errors.New("-d must be positive")
	case cfg.warmup < 0, cfg.settle < 0:
		return nil, errors.New("-warmup and -settle must not be negative")
	case cfg.nQueries < 1:
		return nil, errors.New("-nqueries must be at least 1")
	case cfg.limit < 0:
		return nil, errors.New("-limit must not be negative")
	case cfg.pool < 1:
		return nil, errors.New("-pool must be at least 1")
	case cfg.sample <= 0:
		return nil, errors.New("-sample must be positive")
	case cfg.mode == "soak" && runtime.GOOS == "linux" && cfg.serverPID == 0:
		return nil, errors.New("-mode soak needs -server-pid, the process id of the server, for its RSS and open files")
	}
	if cfg.serverPID != 0 {
		if _, ok := processCPU(cfg.serverPID); !ok {
			return nil, fmt.Errorf("-server-pid %d: cannot read the process's CPU time (Linux only)", cfg.serverPID)
		}
	}
	return &cfg, nil
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	// The MCP server's stderr is copied to ours by another goroutine.
	stderr = &lockedWriter{w: stderr}
	cfg, err := parseFlags(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "meshload:", err)
		return 2
	}
	var writeErr error
	emit := func(r *Report) {
		if err := writeReport(stdout, r, cfg.json); err != nil && writeErr == nil {
			writeErr = err
		}
		if r.Errors > 0 {
			fmt.Fprintf(stderr, "meshload: %d of %d requests failed\n", r.Errors, r.Requests)
		}
	}
	status, err := execute(ctx, cfg, emit, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "meshload:", err)
		if status == 0 {
			status = 1
		}
	}
	if writeErr != nil {
		fmt.Fprintln(stderr, "meshload:", writeErr)
		return 1
	}
	return status
}

func writeReport(w io.Writer, r *Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	r.writeText(w)
	return nil
}

// defaultAgents is the number of agents seed and mcp-stdio register
// without -n.
const defaultAgents = 10_000

// execute runs the mode's runs, passing each report to emit as it is
// made, and returns the exit status.
func execute(ctx context.Context, cfg *config, emit func(*Report), stdout, stderr io.Writer) (int, error) {
	gen := synthagents.New(cfg.seed)
	agents := defaultAgents
	if cfg.nSet {
		agents = cfg.n
	}
	var serverCPU func() time.Duration
	if pid := cfg.serverPID; pid != 0 {
		serverCPU = func() time.Duration { d, _ := processCPU(pid); return d }
	}
	if cfg.mode == "takeover" {
		return runTakeover(ctx, cfg, gen, stderr)
	}
	if cfg.mode == "fill" {
		n := delegation.DefaultMaxRecords
		if cfg.nSet {
			n = cfg.n
		}
		return runFill(ctx, cfg, n, stderr)
	}
	switch cfg.mode {
	case "fsync":
		r, err := runFsync(ctx, cfg, cfg.concurrency[0])
		if err != nil {
			return 1, err
		}
		emit(r)
		return 0, interrupted(ctx)
	case "direct", "delegate", "floor":
		return runDelegate(ctx, cfg, serverCPU, emit, stderr)
	case "proxy":
		return serveProxy(ctx, cfg, os.Stdin, stdout)
	case "mixed", "soak":
		return runMixed(ctx, cfg, gen, serverCPU, emit, stdout, stderr)
	}
	if cfg.mode == "mcp-stdio" {
		queries, err := loadQueries(cfg, gen)
		if err != nil {
			return 2, err
		}
		return runMCP(ctx, cfg, gen, agents, queries, emit, stderr)
	}

	t, err := newHTTPTarget(cfg)
	if err != nil {
		return 2, err
	}
	count := cfg.n
	var (
		newOp  func(t *httpTarget) func(int) opFunc
		target string
	)
	switch cfg.mode {
	case "get":
		u := cfg.path
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			if !strings.HasPrefix(u, "/") {
				u = "/" + u
			}
			u = t.base + u
		}
		target = "GET " + u
		newOp = func(t *httpTarget) func(int) opFunc { return t.getOp([]string{u}) }
	case "discover":
		queries, err := loadQueries(cfg, gen)
		if err != nil {
			return 2, err
		}
		target = fmt.Sprintf("GET %s/v1/discover (%d queries round-robin)", t.base, len(queries))
		urls := t.discoverURLs(queries, cfg.limit)
		newOp = func(t *httpTarget) func(int) opFunc { return t.getOp(urls) }
	case "register":
		prefix := cfg.prefix
		if prefix == "" {
			prefix = "load-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
		}
		target = "POST " + t.base + "/v1/agents"
		run := 0
		newOp = func(t *httpTarget) func(int) opFunc {
			run++ // each run registers new names
			return t.registerOp(gen, fmt.Sprintf("%s%d-", prefix, run))
		}
	case "seed":
		if agents == 0 {
			return 2, errors.New("-mode seed needs -n > 0")
		}
		t.concurrency = cfg.concurrency[0]
		p := plan{concurrency: t.concurrency, count: agents, serverCPU: serverCPU}
		r := runLoad(ctx, p, t.registerOp(gen, cfg.prefix))
		r.Mode, r.Target = cfg.mode, fmt.Sprintf("POST %s/v1/agents (seed %d agents)", t.base, agents)
		emit(r)
		if r.Errors > 0 {
			return 1, fmt.Errorf("seeding failed for %d of %d agents", r.Errors, agents)
		}
		settle(ctx, cfg, serverCPU, stderr)
		return 0, interrupted(ctx)
	default:
		return 2, fmt.Errorf("-mode %q: must be get, discover, register, seed, mcp-stdio, takeover, direct, delegate, floor, proxy, mixed, soak, fill or fsync", cfg.mode)
	}
	return 0, levels(ctx, cfg, func(c int) {
		settle(ctx, cfg, serverCPU, stderr)
		ct := *t
		ct.concurrency = c
		p := plan{concurrency: c, count: count, duration: cfg.duration, warmup: cfg.warmup, serverCPU: serverCPU}
		r := runLoad(ctx, p, newOp(&ct))
		r.Mode, r.Target = cfg.mode, target
		emit(r)
	})
}

// settle waits, up to -settle, for the server to use under 5% of a CPU
// over one second. It does nothing when the server's CPU time is unknown.
func settle(ctx context.Context, cfg *config, serverCPU func() time.Duration, stderr io.Writer) {
	if serverCPU == nil || cfg.settle <= 0 {
		return
	}
	start := time.Now()
	for time.Since(start) < cfg.settle && ctx.Err() == nil {
		before := serverCPU()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if serverCPU()-before < 50*time.Millisecond {
			if waited := time.Since(start); waited > 2*time.Second {
				fmt.Fprintf(stderr, "meshload: the server went idle after %.0fs\n", waited.Seconds())
			}
			return
		}
	}
	if ctx.Err() == nil {
		fmt.Fprintf(stderr, "meshload: the server is still busy after -settle %s; measuring anyway\n", cfg.settle)
	}
}

func newHTTPTarget(cfg *config) (*httpTarget, error) {
	u, err := url.Parse(cfg.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("-url %q: want http(s)://host[:port][/prefix]", cfg.url)
	}
	return &httpTarget{base: strings.TrimRight(u.String(), "/"), token: cfg.token, timeout: cfg.timeout}, nil
}

// loadQueries reads -queries, or generates -nqueries queries.
func loadQueries(cfg *config, gen *synthagents.Generator) ([]string, error) {
	if cfg.queriesFile == "" {
		qs := make([]string, cfg.nQueries)
		for i := range qs {
			qs[i] = gen.Query(i)
		}
		return qs, nil
	}
	data, err := os.ReadFile(cfg.queriesFile)
	if err != nil {
		return nil, fmt.Errorf("-queries: %w", err)
	}
	var qs []string
	for line := range strings.Lines(string(data)) {
		if q := strings.TrimSpace(line); q != "" && !strings.HasPrefix(q, "#") {
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("-queries %s: no queries", cfg.queriesFile)
	}
	return qs, nil
}

// runMCP starts the MCP server, seeds it, lets it settle and measures
// mesh_discover at each concurrency level.
func runMCP(ctx context.Context, cfg *config, gen *synthagents.Generator, agents int, queries []string, emit func(*Report), stderr io.Writer) (int, error) {
	argv := strings.Fields(cfg.cmd)
	var pids []int
	if cfg.hold {
		// The first process holds the store; the measured one is its
		// front-end.
		h, err := startMCP(ctx, argv, stderr)
		if err != nil {
			return 1, err
		}
		defer h.close()
		pids = append(pids, h.cmd.Process.Pid)
	}
	c, err := startMCP(ctx, argv, stderr)
	if err != nil {
		return 1, err
	}
	defer c.close()
	pids = append(pids, c.cmd.Process.Pid)
	// The server is every process of the mesh: with -hold, the holder's
	// background work (training the router on the seeded agents) must be
	// over before measuring too, and its CPU time counts.
	var serverCPU func() time.Duration
	if _, ok := processCPU(pids[0]); ok {
		serverCPU = func() time.Duration {
			var sum time.Duration
			for _, pid := range pids {
				d, _ := processCPU(pid)
				sum += d
			}
			return sum
		}
	}
	if agents > 0 {
		// Seeding is not what is measured: it keeps at least 8 calls in
		// flight whatever -c is.
		sp := plan{concurrency: max(cfg.concurrency[0], 8), count: agents}
		r := runLoad(ctx, sp, func(int) opFunc {
			return func(ctx context.Context, i int) outcome {
				return c.callTool(ctx, "mesh_register", gen.Agent(cfg.prefix, i, 0))
			}
		})
		fmt.Fprintf(stderr, "meshload: registered %d agents with mesh_register in %.1fs (%.0f calls/s, %d errors)\n",
			r.Requests, r.Seconds, r.RequestsPerSecond, r.Errors)
		if r.Errors > 0 {
			return 1, fmt.Errorf("seeding failed for %d of %d agents: %v", r.Errors, agents, r.Outcomes)
		}
	}
	target := fmt.Sprintf("stdio %q mesh_discover (%d queries round-robin, %d agents seeded)", cfg.cmd, len(queries), agents)
	return 0, levels(ctx, cfg, func(conc int) {
		settle(ctx, cfg, serverCPU, stderr)
		p := plan{concurrency: conc, duration: cfg.duration, warmup: cfg.warmup, serverCPU: serverCPU}
		r := runLoad(ctx, p, func(int) opFunc {
			return func(ctx context.Context, i int) outcome {
				args := map[string]any{"query": queries[i%len(queries)]}
				if cfg.limit > 0 {
					args["limit"] = cfg.limit
				}
				return c.callTool(ctx, "mesh_discover", args)
			}
		})
		r.Mode, r.Target = cfg.mode, target
		emit(r)
	})
}

// levels calls run at each -c level, the list -repeat times over, until
// ctx ends, and returns what interrupted does.
func levels(ctx context.Context, cfg *config, run func(c int)) error {
	for range cfg.repeat {
		for _, c := range cfg.concurrency {
			if ctx.Err() != nil {
				return interrupted(ctx)
			}
			run(c)
		}
	}
	return interrupted(ctx)
}

// interrupted reports a run cut short by a signal.
func interrupted(ctx context.Context) error {
	if ctx.Err() != nil {
		return errors.New("interrupted: the last report covers the requests made so far")
	}
	return nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
