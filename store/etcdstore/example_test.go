package etcdstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/etcdtest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/etcdstore"
)

// Two replicas of a mesh over one etcd prefix: an agent registered through
// one replica's registry appears in the other's, which follows the store
// through a watch.
func Example() {
	ctx := context.Background()
	prefix := etcdtest.Prefix(exampleT{}) // a prefix of its own; "/agentmesh/" by default
	endpoints := server.Endpoints         // e.g. []string{"http://10.0.0.1:2379"}

	var regs [2]*registry.Registry
	for i := range regs {
		s, err := etcdstore.Open(ctx, &etcdstore.Options{Endpoints: endpoints, Prefix: prefix})
		if err != nil {
			panic(err)
		}
		defer s.Close()
		regs[i], err = registry.New(ctx, s, nil)
		if err != nil {
			panic(err)
		}
		defer regs[i].Close()
	}

	_, created, err := regs[0].Register(ctx, registry.Agent{
		Name:         "finance",
		Description:  "Budgets and cost centers.",
		Capabilities: []string{"budget"},
		Endpoint:     "https://finance.example.com/task",
	})
	fmt.Println("registered on replica 0:", created, err)

	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if a, err := regs[1].Get(ctx, "finance"); err == nil {
			fmt.Println("seen on replica 1:", a.Name, a.Endpoint)
			break
		}
	}
	// Output:
	// registered on replica 0: true <nil>
	// seen on replica 1: finance https://finance.example.com/task
}

// exampleT names the example's key prefix.
type exampleT struct{}

func (exampleT) Name() string { return "Example" }
