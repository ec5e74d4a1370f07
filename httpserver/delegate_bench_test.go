package httpserver_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// BenchmarkDelegateHTTP is meshload's delegate figure in process: a
// synchronous POST /v1/delegate to the server on a loopback listener,
// records in a bbolt file, against a direct POST /task to the same local
// agent, at concurrency 1. Each iteration times one of each (interleaved,
// so both see the same machine state); the metrics compare their p50s.
// Run
//
//	go test -run='^$' -bench=DelegateHTTP -benchtime=3000x ./httpserver
func BenchmarkDelegateHTTP(b *testing.B) {
	ctx := context.Background()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":"echo: Get budget and cost center for Engineering"}`)
	}))
	b.Cleanup(agent.Close)
	bs, err := boltstore.Open(filepath.Join(b.TempDir(), "mesh.db"), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = bs.Close() })
	reg := newRegistry(b, memstore.New())
	eng := discovery.New(nil)
	b.Cleanup(eng.Follow(reg))
	_, _, err = reg.Register(ctx, registry.Agent{Name: "echo", Description: "echoes tasks", Endpoint: agent.URL + "/task"})
	require.NoError(b, err)
	del, err := delegation.New(ctx, reg, bs, &delegation.Options{HTTPClient: (*netguard.Policy)(nil).NewClient(nil)})
	require.NoError(b, err)
	b.Cleanup(func() { _ = del.Close() })
	srv, err := httpserver.New(reg, eng, del, &httpserver.Options{
		Token:  adminToken,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(b, err)
	mesh := httptest.NewServer(srv)
	b.Cleanup(mesh.Close)

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	task := []byte(`{"delegationId":"00000000-0000-4000-8000-000000000000","task":"Get budget and cost center for Engineering","context":{"depth":1,"chain":[]}}`)
	body := []byte(`{"targetName":"echo","task":"Get budget and cost center for Engineering"}`)
	post := func(url string, data []byte, token bool) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		if token {
			req.Header.Set("Authorization", "Bearer "+adminToken)
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || (token && !bytes.Contains(out, []byte(`"status":"completed"`))) {
			b.Fatalf("%s: %d %s", url, resp.StatusCode, out)
		}
	}
	for range 200 { // warm up connections, pools, the bbolt file
		post(agent.URL+"/task", task, false)
		post(mesh.URL+"/v1/delegate", body, true)
	}
	direct := make([]time.Duration, 0, b.N)
	via := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		post(agent.URL+"/task", task, false)
		t1 := time.Now()
		post(mesh.URL+"/v1/delegate", body, true)
		via = append(via, time.Since(t1))
		direct = append(direct, t1.Sub(t0))
	}
	b.StopTimer()
	slices.Sort(direct)
	slices.Sort(via)
	p50 := func(d []time.Duration) time.Duration { return d[len(d)/2] }
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(p50(direct)), "direct-p50-us")
	b.ReportMetric(us(p50(via)), "mesh-p50-us")
	b.ReportMetric(us(p50(via)-p50(direct)), "added-p50-us")
	b.ReportMetric(float64(p50(via)-p50(direct))/float64(p50(direct)), "added-p50-ratio")
}
