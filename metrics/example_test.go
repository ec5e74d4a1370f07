package metrics_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/metrics"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func Example() {
	ctx := context.Background()
	store := memstore.New()
	reg, _ := registry.New(ctx, store, nil)
	defer reg.Close()

	prom := prometheus.NewRegistry()
	m, err := metrics.New(prom, &metrics.Options{Sessions: store})
	if err != nil {
		panic(err)
	}
	defer m.Follow(reg)()
	del, _ := delegation.New(ctx, reg, store, &delegation.Options{OnRecord: m.ObserveRecord})
	defer del.Close()

	_, _, _ = reg.Register(ctx, registry.Agent{Name: "echo", Description: "Echoes", Protocol: registry.ProtocolInProcess})
	del.Handle("echo", func(_ context.Context, t delegation.Task) (any, error) { return t.Task, nil })
	_, _ = del.Delegate(ctx, delegation.Request{Target: "echo", Task: "hi"})

	mfs, _ := prom.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "agentmesh_agents", "agentmesh_delegations_total":
			for _, s := range mf.GetMetric() {
				var labels []string
				for _, l := range s.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				v := s.GetGauge().GetValue() + s.GetCounter().GetValue()
				fmt.Println(mf.GetName(), labels, v)
			}
		}
	}
	// Output:
	// agentmesh_agents [source=api] 1
	// agentmesh_agents [source=file] 0
	// agentmesh_delegations_total [agent=echo status=completed] 1
}
