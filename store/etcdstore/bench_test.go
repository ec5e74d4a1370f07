package etcdstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/registry"
)

// BenchmarkRegister measures durable registrations through a registry over
// etcd (one embedded single-member server on loopback, fsync'd WAL): each
// op is a compare-and-set transaction.
//
//	go test -run='^$' -bench=Register -benchtime=2s ./store/etcdstore
//
// writes/s is acknowledged registrations per second.
func BenchmarkRegister(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			reg, err := registry.New(b.Context(), open(b, nil), &registry.Options{SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer reg.Close()
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			b.ResetTimer()
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						a := registry.Agent{
							Name:         fmt.Sprintf("bench-%07d", i),
							Description:  "Summarises quarterly budget reports for finance teams.",
							Capabilities: []string{"budget", "reports"},
							Endpoint:     "https://agents.example.com/task",
						}
						if _, _, err := reg.Register(context.Background(), a); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
		})
	}
}
