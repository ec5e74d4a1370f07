package httpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// benchServer is a server over n agents, in process (no listener): the
// cost of the HTTP layer plus the library call.
func benchServer(b *testing.B, n int) *httpserver.Server {
	ctx := context.Background()
	reg := newRegistry(b, memstore.New())
	eng := discovery.New(nil)
	b.Cleanup(eng.Follow(reg))
	for i := range n {
		_, _, err := reg.Register(ctx, registry.Agent{
			Name:         fmt.Sprintf("agent-%05d", i),
			Description:  fmt.Sprintf("Agent %d handles budget reports for team %d and invoices.", i, i%97),
			Capabilities: []string{"budget", fmt.Sprintf("skill-%d", i%113)},
			Endpoint:     "https://agents.example.com/task",
		})
		require.NoError(b, err)
	}
	srv, err := httpserver.New(reg, eng, nil, &httpserver.Options{
		Token:  adminToken,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	require.NoError(b, err)
	return srv
}

func benchGet(b *testing.B, srv http.Handler, target string) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodGet, target, nil)
			r.Header.Set("Authorization", "Bearer "+adminToken)
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}

func BenchmarkHealth(b *testing.B) {
	benchGet(b, benchServer(b, 0), "/health")
}

func BenchmarkDiscover1k(b *testing.B) {
	benchGet(b, benchServer(b, 1000), "/v1/discover?query=budget+invoices+team&limit=10")
}

func BenchmarkGetAgent(b *testing.B) {
	benchGet(b, benchServer(b, 1000), "/v1/agents/agent-00042")
}
