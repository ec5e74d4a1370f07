package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

func Example() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := boltstore.Open(filepath.Join(dir, "mesh.db"), nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()

	// UpdateAgent is a read-modify-write: fn sees the current record (nil
	// here) and returns the one to store. It returns once that is on disk.
	err = s.UpdateAgent(ctx, "finance", func(cur *registry.Agent) (*registry.Agent, error) {
		return &registry.Agent{
			Name:         "finance",
			Description:  "Budgets and cost centers.",
			Capabilities: []string{"budget"},
			Endpoint:     "https://finance.example.com/task",
			Auth:         &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"},
		}, nil
	})
	if err != nil {
		panic(err)
	}

	agents, err := s.ListAgents(ctx)
	if err != nil {
		panic(err)
	}
	for _, a := range agents {
		// The store keeps the token; the registry redacts it on read.
		fmt.Println(a.Name, a.Endpoint, a.Auth.Token)
	}

	_, err = s.GetAgent(ctx, "hr")
	fmt.Println(err)
	// Output:
	// finance https://finance.example.com/task s3cret
	// boltstore: agent "hr": registry: agent not found
}

func ExampleOpen_locked() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "mesh.db")

	s, err := boltstore.Open(path, nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()

	// A second Open of the same file waits for the lock, then gives up.
	_, err = boltstore.Open(path, &boltstore.Options{Timeout: -1})
	fmt.Println(errors.Is(err, boltstore.ErrLocked))
	// Output:
	// true
}
