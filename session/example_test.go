package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func Example() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	m, err := session.NewManager(store, &session.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	// The first message of a user creates the session.
	s, created, err := m.GetOrCreate(ctx, session.Params{UserID: "alice", ActiveAgent: "finance"})
	if err != nil {
		panic(err)
	}
	fmt.Println("created:", created, s.Status, s.ActiveAgent)
	_, err = m.AppendTurns(ctx, s.ID,
		session.Turn{Role: session.RoleUser, Content: "What is my budget?"},
		session.Turn{Role: session.RoleAgent, Content: "125k EUR."})
	if err != nil {
		panic(err)
	}

	// The next one continues it, and every turn slides its expiry.
	now = now.Add(20 * time.Minute)
	s, created, _ = m.GetOrCreate(ctx, session.Params{UserID: "alice", ActiveAgent: "hr"})
	s, _ = m.AppendTurns(ctx, s.ID, session.Turn{Role: session.RoleUser, Content: "And travel?"})
	fmt.Println("created:", created, s.ActiveAgent, len(s.TurnHistory), "turns, expires", s.ExpiresAt.Format(time.Kitchen))

	// After 30 idle minutes the session is gone.
	now = now.Add(30 * time.Minute)
	_, err = m.Active(ctx, "alice")
	fmt.Println("expired:", errors.Is(err, session.ErrExpired), errors.Is(err, session.ErrNotFound))
	// Output:
	// created: true active finance
	// created: false finance 3 turns, expires 12:50PM
	// expired: true true
}

func ExampleManager_Resume() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	m, _ := session.NewManager(store, nil)

	s, _, _ := m.GetOrCreate(ctx, session.Params{UserID: "alice", ActiveAgent: "finance"})
	_, _ = m.AppendTurns(ctx, s.ID, session.Turn{Role: session.RoleUser, Content: "Book a trip"})
	_, _ = m.SetWorkflowState(ctx, s.ID, map[string]any{"step": "dates"})
	_, _ = m.CloseSession(ctx, s.ID, session.StatusAbandoned)

	_, err := m.Resume(ctx, s.ID, "mallory")
	fmt.Println(errors.Is(err, session.ErrForbidden))

	r, _ := m.Resume(ctx, s.ID, "alice")
	prior, _ := m.Get(ctx, s.ID)
	fmt.Println(r.Status, r.ActiveAgent, r.TurnHistory[0].Content, r.WorkflowState["step"], r.Metadata[session.MetadataResumedFrom] == s.ID)
	fmt.Println(prior.Status)
	// Output:
	// true
	// active finance Book a trip dates true
	// completed
}

func ExampleSession_MarshalJSON() {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	s := session.Session{
		ID:          "0b7c0f6e-8a4f-4c8e-9d3a-2f1e5c6b7a80",
		UserID:      "alice",
		Status:      session.StatusActive,
		ActiveAgent: "finance",
		CreatedAt:   at,
		UpdatedAt:   at,
		ExpiresAt:   at.Add(session.DefaultTTL),
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	fmt.Println(string(b))
	// Output:
	// {
	//   "session_id": "0b7c0f6e-8a4f-4c8e-9d3a-2f1e5c6b7a80",
	//   "user_id": "alice",
	//   "employee_id": "",
	//   "status": "active",
	//   "active_agent": "finance",
	//   "turn_history": [],
	//   "workflow_state": {},
	//   "created_at": "2025-06-01T12:00:00Z",
	//   "updated_at": "2025-06-01T12:00:00Z",
	//   "expires_at": "2025-06-01T12:30:00Z"
	// }
}
