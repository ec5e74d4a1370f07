package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// BenchmarkDiscover compares a mesh_discover call over in-memory MCP
// transports with the same search encoded as the HTTP API encodes it
// (discovery.Engine.AppendSearchJSON), over 1,000 synthetic agents: what
// the tool path costs on top of the search itself.
func BenchmarkDiscover(b *testing.B) {
	ctx := context.Background()
	reg, engine, del, queries := benchMesh(b)
	var err error
	b.Run("engine-json", func(b *testing.B) {
		var buf []byte
		for i := 0; b.Loop(); i++ {
			if buf, err = engine.AppendSearchJSON(buf[:0], queries[i%len(queries)], nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mcp-tool", func(b *testing.B) {
		srv, err := mcpserver.New(reg, engine, del, nil)
		if err != nil {
			b.Fatal(err)
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		for i := 0; b.Loop(); i++ {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mesh_discover", Arguments: map[string]any{"query": queries[i%len(queries)]}})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
}

// cpuTime is the CPU time this process has used (user and system): with
// the client and the server in one process, a call's CPU cost, which a
// loaded machine changes less than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMesh is the mesh of the benchmarks: a registry over memstore with
// 1,000 synthetic agents, the engine following it, a delegation client,
// and 64 of the generator's queries.
func benchMesh(b *testing.B) (*registry.Registry, *discovery.Engine, *delegation.Client, []string) {
	ctx := context.Background()
	store := memstore.New()
	reg, err := registry.New(ctx, store, &registry.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Close() })
	engine := discovery.New(nil)
	b.Cleanup(engine.Follow(reg))
	del, err := delegation.New(ctx, reg, store, &delegation.Options{Discovery: engine, PruneInterval: -1, RescanInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = del.Close() })
	g := synthagents.New(1)
	for i := range 1000 {
		s := g.Agent("", i, 0)
		a := registry.Agent{Name: s.Name, Description: s.Description, Capabilities: s.Capabilities, Endpoint: s.Endpoint, Labels: s.Labels, Examples: s.Examples}
		if _, _, err := reg.Register(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
	queries := make([]string, 64)
	for i := range queries {
		queries[i] = g.Query(i)
	}
	return reg, engine, del, queries
}

// BenchmarkDiscoverStdio is a mesh_discover call as `agentmesh` serves it
// on stdio: the server on the SDK's IOTransport over pipes, and a client
// that writes JSON-RPC lines and only splits the replies into lines (as
// meshload's), with 8 calls in flight, over 1,000 synthetic agents. The
// searcher is the engine itself (its encoder) or one hiding the encoder
// (the result built from discovery.Result values); NewStdio is the server
// on the transport of mcpserver.NewStdio, which answers these calls
// itself.
func BenchmarkDiscoverStdio(b *testing.B) {
	reg, engine, del, queries := benchMesh(b)
	for _, bc := range []struct {
		name   string
		search discovery.Searcher
		stdio  bool
	}{{"engine", engine, false}, {"results", plainSearcher{engine}, false}, {"NewStdio", engine, true}} {
		b.Run(bc.name, func(b *testing.B) {
			c := startRawOn(b, func(stdin io.Reader, stdout io.Writer) (*mcp.Server, mcp.Transport) {
				if bc.stdio {
					srv, tr, err := mcpserver.NewStdio(reg, bc.search, del, nil, stdin, stdout)
					if err != nil {
						b.Fatal(err)
					}
					return srv, tr
				}
				srv, err := mcpserver.New(reg, bc.search, del, nil)
				if err != nil {
					b.Fatal(err)
				}
				return srv, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
			}, "2025-06-18")
			calls := make([][]byte, len(queries))
			for i, q := range queries {
				calls[i], _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 10, "method": "tools/call",
					"params": map[string]any{"name": mcpserver.ToolDiscover, "arguments": map[string]any{"query": q}}})
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			c.run(b, 8, b.N, func(i int) []byte { return calls[i%len(calls)] })
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
