package httpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// GET /v1/discover over the 10,000 synthetic agents meshload seeds, with
// its generated 2–4-word queries round-robin, next to GET /health on the
// same server: the handler's cost on top of the search, in process (no
// listener). Run
//
//	go test -run='^$' -bench='Discover10k|Health10k' -benchmem ./httpserver
func BenchmarkDiscover10k(b *testing.B) {
	srv, queries := synth10k(b)
	var next atomic.Int64
	benchTargets(b, srv, func() string {
		return "/v1/discover?query=" + queries[int(next.Add(1))%len(queries)]
	})
}

func BenchmarkHealth10k(b *testing.B) {
	srv, _ := synth10k(b)
	benchTargets(b, srv, func() string { return "/health" })
}

// synth10k is the server of the 10k benchmarks and their queries, made
// once for all their runs.
func synth10k(b *testing.B) (*httpserver.Server, []string) {
	synthOnce.Do(func() { synthSrv, synthQueries = synthServer(10000, 1000) })
	if synthSrv == nil {
		b.Fatal("the 10k server could not be built")
	}
	return synthSrv, synthQueries
}

var (
	synthOnce    sync.Once
	synthSrv     *httpserver.Server
	synthQueries []string
)

// synthServer is a server over n synthetic agents, its index warmed by one
// pass of the queries (each record's encoding is made on first use), and
// the queries, URL-encoded. It lives as long as the test binary. It
// returns a nil server when something failed.
func synthServer(n, nq int) (*httpserver.Server, []string) {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), &registry.Options{SweepInterval: -1})
	if err != nil {
		return nil, nil
	}
	eng := discovery.New(nil)
	eng.Follow(reg)
	gen := synthagents.New(1)
	for i := range n {
		if _, _, err := reg.Register(ctx, gen.Agent("", i, 0).Registry()); err != nil {
			return nil, nil
		}
	}
	queries := make([]string, nq)
	for i := range queries {
		q := gen.Query(i)
		if _, err := eng.AppendSearchJSON(nil, q, nil); err != nil {
			return nil, nil
		}
		queries[i] = url.QueryEscape(q)
	}
	srv, err := httpserver.New(reg, eng, nil, &httpserver.Options{
		Token:  adminToken,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, nil
	}
	return srv, queries
}

func benchTargets(b *testing.B, srv http.Handler, target func() string) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodGet, target(), nil)
			r.Header.Set("Authorization", "Bearer "+adminToken)
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}
