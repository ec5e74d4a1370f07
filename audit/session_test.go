package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func TestSessionClosed(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	r := newRecorder(t, s, nil)
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ctx := audit.WithOrigin(t.Context(), audit.Origin{Actor: "ops", RequestID: "req-1"})
	r.SessionClosed(ctx, session.CloseEvent{
		SessionID: "s1", UserID: "alice@example.com", EmployeeID: "E1", ActiveAgent: "finance",
		Status: session.StatusCompleted, Turns: 4, CreatedAt: created, ClosedAt: created.Add(1500 * time.Millisecond),
	})
	r.SessionClosed(context.Background(), session.CloseEvent{SessionID: "s2", ActiveAgent: "hr", Status: session.StatusError})
	got, err := r.List(t.Context(), audit.Query{})
	require.NoError(t, err)
	require.Len(t, got, 2)
	failed, done := got[0], got[1]
	assert.Equal(t, "ops", done.Actor)
	assert.Equal(t, audit.ActionSessionClose, done.Action)
	assert.Equal(t, "finance", done.Target)
	assert.Equal(t, audit.OutcomeSuccess, done.Outcome)
	assert.Equal(t, "completed", done.Code)
	assert.Equal(t, map[string]string{"session_id": "s1", "turns": "4", "duration_ms": "1500", "request_id": "req-1"}, done.Details, "no user or employee id")
	assert.Empty(t, failed.Actor, "the mesh itself")
	assert.Equal(t, audit.OutcomeFailure, failed.Outcome, "a session ended by an error")
	assert.Equal(t, "error", failed.Code)

	var nilRec *audit.Recorder
	nilRec.SessionClosed(ctx, session.CloseEvent{}) // a nil recorder records nothing
}
