package boltstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
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

func ExampleStore_ListDelegations() {
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

	// PutDelegations writes a batch in one fsync'd commit.
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var recs []delegation.Record
	for i, target := range []string{"finance", "hr", "finance"} {
		recs = append(recs, delegation.Record{
			ID:          fmt.Sprintf("d%d", i+1),
			TargetAgent: target,
			Task:        "task",
			Status:      delegation.StatusRunning,
			CreatedAt:   start.Add(time.Duration(i) * time.Second),
		})
	}
	if err := s.PutDelegations(ctx, recs); err != nil {
		panic(err)
	}

	// UpdateDelegation is a read-modify-write of one record.
	err = s.UpdateDelegation(ctx, "d1", func(cur *delegation.Record) (*delegation.Record, error) {
		next := *cur
		finished := start.Add(2 * time.Second)
		next.Status, next.Result, next.FinishedAt = delegation.StatusCompleted, json.RawMessage(`{"ok":true}`), &finished
		return &next, nil
	})
	if err != nil {
		panic(err)
	}

	// Newest first, filtered through the store's indexes.
	running, err := s.ListDelegations(ctx, delegation.ListFilter{Status: delegation.StatusRunning})
	if err != nil {
		panic(err)
	}
	for _, r := range running {
		fmt.Println(r.ID, r.TargetAgent, r.Status)
	}
	finance, err := s.ListDelegations(ctx, delegation.ListFilter{Target: "finance", Limit: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(finance[0].ID)

	_, err = s.GetDelegation(ctx, "d9")
	fmt.Println(errors.Is(err, delegation.ErrNotFound))
	// Output:
	// d3 finance running
	// d2 hr running
	// d3
	// true
}
