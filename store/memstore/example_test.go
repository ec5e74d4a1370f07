package memstore_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func Example() {
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()

	// Create: fn sees nil and returns the new record.
	err := s.UpdateAgent(ctx, "finance", func(cur *registry.Agent) (*registry.Agent, error) {
		return &registry.Agent{Name: "finance", Endpoint: "https://finance.example.com/task"}, nil
	})
	if err != nil {
		panic(err)
	}

	// Read-modify-write: fn sees the current record and returns a changed copy.
	err = s.UpdateAgent(ctx, "finance", func(cur *registry.Agent) (*registry.Agent, error) {
		next := cur.Clone()
		next.Labels = map[string]string{"team": "finance"}
		return &next, nil
	})
	if err != nil {
		panic(err)
	}

	a, err := s.GetAgent(ctx, "finance")
	fmt.Println(a.Name, a.Labels["team"], err)

	_, err = s.GetAgent(ctx, "hr")
	fmt.Println(err)
	// Output:
	// finance finance <nil>
	// memstore: agent "hr": registry: agent not found
}
