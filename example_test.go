package agentmesh_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/registry"
)

// Register agents in a registry and discover them by a text query.
func Example() {
	ctx := context.Background()
	mesh, err := agentmesh.Open(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer mesh.Close()
	reg, engine := mesh.Registry(), mesh.Engine()

	for _, a := range []registry.Agent{
		{Name: "finance", Description: "Department budgets and cost centers.",
			Capabilities: []string{"budget", "cost-center"}, Endpoint: "https://finance.example.com/task"},
		{Name: "helpdesk", Description: "Resets passwords and unlocks accounts.",
			Capabilities: []string{"password-reset"}, Endpoint: "https://it.example.com/task"},
	} {
		if _, _, err := reg.Register(ctx, a); err != nil {
			panic(err)
		}
	}

	results, err := engine.Search("engineering budgets", nil)
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Println(r.Agent.Name, r.MatchedTerms, r.MatchedCapabilities)
	}
	// Output:
	// finance [budgets] [budget]
}

// Open a whole mesh in memory, register an agent and discover it. With
// Options.Path the mesh lives in a bbolt file; with Options.Routing it
// also routes messages.
func ExampleOpen() {
	ctx := context.Background()
	mesh, err := agentmesh.Open(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer mesh.Close()

	_, _, err = mesh.Registry().Register(ctx, registry.Agent{
		Name:         "finance",
		Description:  "Department budgets and cost centers.",
		Capabilities: []string{"budget", "cost-center"},
		Endpoint:     "https://finance.example.com/task",
	})
	if err != nil {
		panic(err)
	}
	results, err := mesh.Engine().Search("engineering budgets", nil)
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Println(r.Agent.Name, r.MatchedCapabilities)
	}
	// Output:
	// finance [budget]
}
