package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// mcpServerEnv makes the test binary an agentmesh MCP server on stdio, for
// the mcp-stdio smoke test to start as its -cmd.
const mcpServerEnv = "MESHLOAD_TEST_MCP_SERVER"

// commandEnv makes the test binary meshload itself, for the modes that
// start meshload as a child process (-mode floor starts -mode proxy).
const commandEnv = "MESHLOAD_TEST_COMMAND"

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(mcpServerEnv) == "1":
		os.Exit(serveMCPStdio())
	case os.Getenv(commandEnv) == "1":
		main()
	}
	os.Exit(m.Run())
}

// mesh is the library wired as the binary wires it, over memstore.
type mesh struct {
	reg    *registry.Registry
	engine *discovery.Engine
	del    *delegation.Client
	close  func()
}

func newMesh(ctx context.Context) (*mesh, error) {
	store := memstore.New()
	reg, err := registry.New(ctx, store, &registry.Options{SweepInterval: -1})
	if err != nil {
		return nil, err
	}
	engine := discovery.New(nil)
	stop := engine.Follow(reg)
	del, err := delegation.New(ctx, reg, store, &delegation.Options{Discovery: engine, PruneInterval: -1, RescanInterval: -1})
	if err != nil {
		stop()
		reg.Close()
		return nil, err
	}
	return &mesh{reg: reg, engine: engine, del: del, close: func() {
		_ = del.Close()
		stop()
		_ = reg.Close()
	}}, nil
}

func serveMCPStdio() int {
	ctx := context.Background()
	m, err := newMesh(ctx)
	if err != nil {
		return 1
	}
	defer m.close()
	srv, err := mcpserver.New(m.reg, m.engine, m.del, nil)
	if err != nil {
		return 1
	}
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// meshload runs the command line and decodes its one -json report.
func meshload(t *testing.T, wantStatus int, args ...string) Report {
	t.Helper()
	rs := meshloadAll(t, wantStatus, args...)
	if wantStatus != 0 {
		return Report{}
	}
	if len(rs) != 1 {
		t.Fatalf("meshload %q: %d reports, want 1", args, len(rs))
	}
	return rs[0]
}

// meshloadAll runs the command line and decodes its -json reports.
func meshloadAll(t *testing.T, wantStatus int, args ...string) []Report {
	t.Helper()
	var stdout, stderr bytes.Buffer
	status := run(t.Context(), append(args, "-json"), func(string) string { return "" }, &stdout, &stderr)
	if status != wantStatus {
		t.Fatalf("meshload %q: exit %d, want %d\nstderr: %s", args, status, wantStatus, stderr.String())
	}
	var rs []Report
	for dec := json.NewDecoder(&stdout); dec.More(); {
		var r Report
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("meshload %q: report: %v\n%s", args, err, stdout.String())
		}
		rs = append(rs, r)
	}
	return rs
}

func wantOutcomes(t *testing.T, r Report, want map[string]uint64) {
	t.Helper()
	var total uint64
	for k, v := range want {
		total += v
		if r.Outcomes[k] != v {
			t.Errorf("%s: outcomes %v, want %v", r.Mode, r.Outcomes, want)
			return
		}
	}
	if r.Requests != total || len(r.Outcomes) != len(want) {
		t.Errorf("%s: %d requests with outcomes %v, want %v", r.Mode, r.Requests, r.Outcomes, want)
	}
}

// Every HTTP mode against the real control plane (httpserver over a
// memstore registry) behind an httptest listener.
func TestSmokeHTTP(t *testing.T) {
	const token = "smoke-token-0123456789"
	m, err := newMesh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.close)
	h, err := httpserver.New(m.reg, m.engine, m.del, &httpserver.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	base := []string{"-url", ts.URL, "-token", token}

	r := meshload(t, 0, append(base, "-mode", "seed", "-n", "300", "-c", "4")...)
	wantOutcomes(t, r, map[string]uint64{"201": 300})
	r = meshload(t, 0, append(base, "-mode", "seed", "-n", "300", "-c", "4")...)
	wantOutcomes(t, r, map[string]uint64{"200": 300}) // the same agents again: replaced
	if n, _ := m.reg.List(t.Context(), registry.ListOptions{Limit: 1000}); len(n.Agents) != 300 {
		t.Errorf("%d agents registered, want 300", len(n.Agents))
	}

	conns.Store(0)
	r = meshload(t, 0, append(base, "-mode", "discover", "-n", "400", "-c", "4", "-nqueries", "50")...)
	wantOutcomes(t, r, map[string]uint64{"200": 400})
	if r.BytesIn < 400*100 || r.Latency.P50 <= 0 || r.Latency.P99 < r.Latency.P50 || r.Latency.Max < r.Latency.P99 {
		t.Errorf("discover report looks wrong: %+v", r)
	}
	if n := conns.Load(); n > 4 {
		t.Errorf("4 workers opened %d connections: keep-alive is not working", n)
	}

	r = meshload(t, 0, append(base, "-mode", "register", "-n", "50", "-c", "2")...)
	wantOutcomes(t, r, map[string]uint64{"201": 50})

	r = meshload(t, 0, append(base, "-path", "/health", "-c", "2", "-d", "200ms", "-warmup", "50ms")...)
	if r.Requests == 0 || r.Errors != 0 || r.RequestsPerSecond <= 0 || r.Seconds < 0.2 {
		t.Errorf("get /health: %+v", r)
	}

	rs := meshloadAll(t, 0, append(base, "-c", "1,2", "-repeat", "2", "-d", "100ms", "-server-pid", strconv.Itoa(os.Getpid()), "-settle", "0")...)
	if len(rs) != 4 || rs[0].Concurrency != 1 || rs[1].Concurrency != 2 || rs[2].Concurrency != 1 || rs[3].Concurrency != 2 {
		t.Errorf("-c 1,2 -repeat 2: %d reports %+v", len(rs), rs)
	}
	for _, r := range rs {
		if r.Requests == 0 || r.Errors != 0 || runtime.GOOS == "linux" && r.ServerCPUSeconds <= 0 {
			t.Errorf("-c %d: %+v", r.Concurrency, r)
		}
	}

	r = meshload(t, 0, "-url", ts.URL, "-token", "wrong-token", "-path", "/v1/agents", "-n", "5", "-c", "1")
	wantOutcomes(t, r, map[string]uint64{"401": 5})
	if r.Errors != 5 {
		t.Errorf("%d errors, want 5", r.Errors)
	}

	queries := filepath.Join(t.TempDir(), "queries.txt")
	if err := os.WriteFile(queries, []byte("# comment\nbudget invoices\n\n!!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = meshload(t, 0, append(base, "-mode", "discover", "-queries", queries, "-n", "4", "-c", "1")...)
	wantOutcomes(t, r, map[string]uint64{"200": 2, "400": 2}) // "!!!" has no words

	meshload(t, 2, "-mode", "nonsense")
	meshload(t, 2, "-c", "0")
	meshload(t, 2, "-url", "ftp://example.com")
	meshload(t, 2, "-c", "1,x")
}

// mcp-stdio against the real MCP tools, served on stdio by this test
// binary in a child process.
func TestSmokeMCPStdio(t *testing.T) {
	t.Setenv(mcpServerEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := meshload(t, 0, "-mode", "mcp-stdio", "-cmd", exe, "-n", "200", "-c", "4", "-d", "300ms", "-nqueries", "50")
	if r.Requests == 0 || r.Errors != 0 || r.Outcomes["ok"] != r.Requests || r.BytesIn == 0 ||
		runtime.GOOS == "linux" && r.ServerCPUSeconds <= 0 {
		t.Errorf("mesh_discover: %+v", r)
	}

	// -hold starts a first process too; the server's CPU time is both's.
	r = meshload(t, 0, "-mode", "mcp-stdio", "-hold", "-cmd", exe, "-n", "50", "-c", "2", "-d", "200ms", "-nqueries", "20")
	if r.Requests == 0 || r.Errors != 0 || runtime.GOOS == "linux" && r.ServerCPUSeconds <= 0 {
		t.Errorf("mesh_discover with -hold: %+v", r)
	}

	queries := filepath.Join(t.TempDir(), "queries.txt")
	if err := os.WriteFile(queries, []byte("!!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = meshload(t, 0, "-mode", "mcp-stdio", "-cmd", exe, "-n", "0", "-c", "1", "-d", "100ms", "-queries", queries, "-settle", "0")
	if r.Requests == 0 || r.Outcomes["tool_error"] != r.Requests || r.Errors != r.Requests {
		t.Errorf("a query without words must be a tool error: %+v", r)
	}
}
