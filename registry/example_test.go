package registry_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func Example() {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), nil)
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	a, created, err := reg.Register(ctx, registry.Agent{
		Name:         "finance",
		Description:  "Budgets and cost centers for every department.",
		Capabilities: []string{"budget", "cost-center"},
		Endpoint:     "https://finance.example.com/task",
		Auth:         &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Name, created, a.Protocol, a.Auth.Type, a.Auth.Token == "")

	_, _, err = reg.Register(ctx, registry.Agent{Name: "bad name", Endpoint: "https://x.example.com"})
	fmt.Println(registry.Code(err), err)
	// Output:
	// finance true http bearer true
	// invalid_argument invalid name: must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (1–128 letters, digits, '.', '_' or '-', starting with a letter or digit)
	// invalid description: may be empty only when capabilities are given
}
