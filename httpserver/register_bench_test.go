package httpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// POST /v1/agents of meshload's synthetic agents (a new one each request),
// in process, over the memory store, with the discovery index following
// the registry: the HTTP layer's and the registry's cost per registration
// without the disk's. Run
//
//	go test -run='^$' -bench=RegisterHTTP -benchmem ./httpserver
func BenchmarkRegisterHTTP(b *testing.B) {
	reg := newRegistry(b, memstore.New())
	eng := discovery.New(nil)
	b.Cleanup(eng.Follow(reg))
	srv, err := httpserver.New(reg, eng, nil, &httpserver.Options{
		Token:  adminToken,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(b, err)
	gen := synthagents.New(1)
	bodies := make([][]byte, 4096)
	for i := range bodies {
		bodies[i], err = json.Marshal(gen.Agent("bench-", i, 0))
		require.NoError(b, err)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodPost, "/v1/agents", bytes.NewReader(bodies[int(next.Add(1))%len(bodies)]))
			r.Header.Set("Authorization", "Bearer "+adminToken)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, r)
			if w.Code != http.StatusOK && w.Code != http.StatusCreated {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}
