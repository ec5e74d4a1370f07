package session_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// Options.OnClose hears of every session that ends: here one the
// workflow completed and one whose TTL passed, found by the sweep.
func ExampleOptions_onClose() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	m, err := session.NewManager(store, &session.Options{
		Now:           func() time.Time { return now },
		SweepInterval: -1, // the example sweeps itself
		OnClose: func(_ context.Context, e session.CloseEvent) {
			fmt.Printf("%s: %s after %d turns, %s\n", e.ActiveAgent, e.Status, e.Turns, e.Duration())
		},
	})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	a, _, _ := m.GetOrCreate(ctx, session.Params{UserID: "alice", ActiveAgent: "finance"})
	_, _ = m.AppendTurns(ctx, a.ID,
		session.Turn{Role: session.RoleUser, Content: "What is my budget?"},
		session.Turn{Role: session.RoleAgent, Content: "125k EUR."})
	now = now.Add(2 * time.Minute)
	_, _ = m.CloseSession(ctx, a.ID, session.StatusCompleted)

	_, _, _ = m.GetOrCreate(ctx, session.Params{UserID: "bob", ActiveAgent: "hr"})
	now = now.Add(session.DefaultTTL)
	_, _ = m.Sweep(ctx)
	// Output:
	// finance: completed after 2 turns, 2m0s
	// hr: expired after 0 turns, 30m0s
}
