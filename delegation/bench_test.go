package delegation_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// benchMesh is a client whose records go to a bbolt file, and a local
// agent answering 200 with a small JSON result.
type benchMesh struct {
	client *delegation.Client
	agent  *httptest.Server
	http   *http.Client
}

// newBenchAgent starts a local agent that answers every task at once with
// a small JSON result, and closes it when b ends.
func newBenchAgent(b *testing.B) *httptest.Server {
	b.Helper()
	agent := httptest.NewServer(ok(`{"result":{"budget":1200000,"costCenter":"ENG-42"}}`))
	b.Cleanup(agent.Close)
	return agent
}

// newBenchRegistry returns a registry in memory, without a sweeper, that
// holds a, and closes it when b ends.
func newBenchRegistry(b *testing.B, a registry.Agent) *registry.Registry {
	b.Helper()
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), &registry.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Close() })
	if _, _, err := reg.Register(ctx, a); err != nil {
		b.Fatal(err)
	}
	return reg
}

func newBenchMesh(b *testing.B) *benchMesh { return newBenchMeshWith(b, true) }

// newBenchMeshWith keeps records in bbolt, or in memory when bolt is false.
func newBenchMeshWith(b *testing.B, bolt bool) *benchMesh {
	b.Helper()
	ctx := context.Background()
	agent := newBenchAgent(b)

	var records delegation.Store = memstore.New()
	if bolt {
		bs, err := boltstore.Open(filepath.Join(b.TempDir(), "mesh.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = bs.Close() })
		records = bs
	}
	reg := newBenchRegistry(b, registry.Agent{Name: "finance", Description: "budgets",
		Endpoint: agent.URL + "/task", Auth: &registry.Auth{Type: registry.AuthBearer, Token: "t0k3n"}})
	hc := (*netguard.Policy)(nil).NewClient(nil) // the same client for both paths
	client, err := delegation.New(ctx, reg, records, &delegation.Options{HTTPClient: hc})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	return &benchMesh{client: client, agent: agent, http: hc}
}

var benchBody = []byte(`{"delegationId":"3f1c9a52-7d1e-4b8a-9a43-2f0c6f1d8e11","task":"Get budget and cost center for Engineering","context":{"depth":1,"chain":["hr-agent"]}}`)

// direct is the baseline: the same POST /task, by hand, on the same
// keep-alive client.
func (m *benchMesh) direct(b *testing.B) {
	req, _ := http.NewRequest(http.MethodPost, m.agent.URL+"/task", bytes.NewReader(benchBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer t0k3n")
	resp, err := m.http.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatal(resp.Status)
	}
}

var benchReq = delegation.Request{Target: "finance", Task: "Get budget and cost center for Engineering", SourceAgent: "hr-agent"}

func (m *benchMesh) delegate(b *testing.B) {
	if err := m.try(); err != nil {
		b.Fatal(err)
	}
}

// try is delegate for goroutines other than the benchmark's.
func (m *benchMesh) try() error {
	rec, err := m.client.Delegate(context.Background(), benchReq)
	if err == nil && rec.Status != delegation.StatusCompleted {
		err = fmt.Errorf("delegation %s: %s", rec.Status, rec.Error)
	}
	return err
}

func percentile(d []time.Duration, p float64) time.Duration {
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// BenchmarkDelegateOverhead measures what the library adds to one
// synchronous delegation, at concurrency 1, over a direct HTTP POST to the
// same local agent: each iteration times one direct POST and one
// delegation (interleaved, so both see the same machine state), and the
// metrics compare their latency distributions. Records go to a bbolt file
// through the group commit.
func BenchmarkDelegateOverhead(b *testing.B) {
	m := newBenchMesh(b)
	for range 200 { // warm up connections, pools, the bbolt file
		m.direct(b)
		m.delegate(b)
	}
	direct := make([]time.Duration, 0, b.N)
	mesh := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		m.direct(b)
		t1 := time.Now()
		m.delegate(b)
		t2 := time.Now()
		direct = append(direct, t1.Sub(t0))
		mesh = append(mesh, t2.Sub(t1))
	}
	b.StopTimer()
	slices.Sort(direct)
	slices.Sort(mesh)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(percentile(direct, 0.50)), "direct-p50-us")
	b.ReportMetric(us(percentile(direct, 0.99)), "direct-p99-us")
	b.ReportMetric(us(percentile(mesh, 0.50)), "mesh-p50-us")
	b.ReportMetric(us(percentile(mesh, 0.99)), "mesh-p99-us")
	b.ReportMetric(us(percentile(mesh, 0.50)-percentile(direct, 0.50)), "added-p50-us")
	b.ReportMetric(us(percentile(mesh, 0.99)-percentile(direct, 0.99)), "added-p99-us")
	b.ReportMetric(float64(percentile(mesh, 0.50))/float64(percentile(direct, 0.50)), "p50-ratio")
	b.ReportMetric(0, "ns/op") // an iteration is two requests: ns/op means nothing here
}

// BenchmarkDelegateThroughput measures delegations per second through the
// library to one local agent at concurrency 1 and 8, records in bbolt (and,
// for comparison, in memory).
func BenchmarkDelegateThroughput(b *testing.B) {
	for _, bc := range []struct {
		workers int
		bolt    bool
	}{{1, true}, {8, true}, {8, false}} {
		store := "bolt"
		if !bc.bolt {
			store = "memory"
		}
		workers := bc.workers
		b.Run(fmt.Sprintf("store=%s/concurrency=%d", store, workers), func(b *testing.B) {
			m := newBenchMeshWith(b, bc.bolt)
			for range 100 {
				m.delegate(b)
			}
			var wg sync.WaitGroup
			next := make(chan struct{}, workers)
			b.ResetTimer()
			start := time.Now()
			for range workers {
				wg.Go(func() {
					for range next {
						if err := m.try(); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for b.Loop() {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "delegations/s")
		})
	}
}
