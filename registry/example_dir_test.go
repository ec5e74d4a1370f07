package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func ExampleLoadDir() {
	agents, err := registry.LoadDir("../examples/agents", &registry.DirOptions{RequireDefault: true})
	if err != nil {
		panic(err)
	}
	for _, a := range agents {
		fmt.Println(a.Name, a.IsDefault, a.Threshold())
	}

	// Every problem of a broken directory, with file and line.
	dir, _ := os.MkdirTemp("", "agents")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "pw.yaml"), []byte("agent_id: pw\nendpont: https://pw.example.com\n"), 0o644)
	_, err = registry.LoadDir(dir, nil)
	var de *registry.DirError
	if errors.As(err, &de) {
		for _, p := range de.Problems {
			rel, _ := filepath.Rel(dir, p.File)
			p.File = rel
			fmt.Println(p) // file:line: message, or file: message

		}
	}
	// Output:
	// billing false 0.7
	// general-assistant true 0
	// password-reset false 0.6
	// pw.yaml:2: unknown key "endpont" (did you mean "endpoint"?)
	// pw.yaml: description: may be empty only when capabilities are given
	// pw.yaml: endpoint: is required
}

func ExampleRegistry_ReplaceFileAgents() {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), nil)
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	agents, err := registry.LoadDir("../examples/agents", nil)
	if err != nil {
		panic(err)
	}
	rep, err := reg.ReplaceFileAgents(ctx, agents)
	if err != nil {
		panic(err)
	}
	fmt.Println("added:", rep.Added)

	// A reload with one agent less removes it, atomically for readers.
	rep, err = reg.ReplaceFileAgents(ctx, agents[1:])
	if err != nil {
		panic(err)
	}
	fmt.Println("removed:", rep.Removed, "unchanged:", rep.Unchanged)

	// File agents belong to the directory: the API may not change them.
	err = reg.Delete(ctx, "password-reset")
	fmt.Println(registry.Code(err))
	// Output:
	// added: [billing general-assistant password-reset]
	// removed: [billing] unchanged: [general-assistant password-reset]
	// managed_by_file
}
