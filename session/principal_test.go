package session_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/principal"
	"github.com/agentmesh/agentmesh/session"
)

func asPrincipal(t *testing.T, name string, admin bool) context.Context {
	return principal.NewContext(t.Context(), principal.Principal{Name: name, Admin: admin})
}

// A session belongs to the principal whose request created it: the same
// user id from another principal is another user, and another principal
// cannot read, change, close or resume it.
func TestSessionsBelongToTheirPrincipal(t *testing.T) {
	m, _ := newManager(t, newClock(), nil)
	a, b := asPrincipal(t, "team-a", false), asPrincipal(t, "team-b", false)

	sa, created, err := m.GetOrCreate(a, session.Params{UserID: "alice", ActiveAgent: "finance"})
	require.NoError(t, err)
	require.True(t, created)
	assert.Equal(t, "team-a", sa.Principal)
	sb, created, err := m.GetOrCreate(b, session.Params{UserID: "alice", ActiveAgent: "hr"})
	require.NoError(t, err)
	require.True(t, created, "team-b's alice is another user")
	assert.NotEqual(t, sa.ID, sb.ID)
	plain := start(t, m, "alice") // no principal: principal.Default's alice
	assert.Empty(t, plain.Principal)

	got, err := m.Active(a, "alice")
	require.NoError(t, err)
	assert.Equal(t, sa.ID, got.ID)
	got, err = m.Active(asPrincipal(t, principal.Default, false), "alice")
	require.NoError(t, err)
	assert.Equal(t, plain.ID, got.ID, "the default principal's sessions are those made without one")

	_, err = m.Get(b, sa.ID)
	require.ErrorIs(t, err, session.ErrNotFound)
	_, err = m.AppendTurns(b, sa.ID, userTurn("injected"))
	require.ErrorIs(t, err, session.ErrNotFound)
	_, err = m.CloseSession(b, sa.ID, session.StatusAbandoned)
	require.ErrorIs(t, err, session.ErrNotFound)
	_, err = m.Resume(b, sa.ID, "alice")
	require.ErrorIs(t, err, session.ErrForbidden)

	got, err = m.Get(a, sa.ID)
	require.NoError(t, err)
	assert.Empty(t, got.TurnHistory, "team-b's turns did not land")
	assert.Equal(t, session.StatusActive, got.Status)

	// An admin reads and resumes it; the new session stays team-a's.
	admin := asPrincipal(t, "ops", true)
	_, err = m.Get(admin, sa.ID)
	require.NoError(t, err)
	fresh, err := m.Resume(admin, sa.ID, "alice")
	require.NoError(t, err)
	assert.Equal(t, "team-a", fresh.Principal)
	got, err = m.Active(a, "alice")
	require.NoError(t, err)
	assert.Equal(t, fresh.ID, got.ID)
	got, err = m.Active(b, "alice")
	require.NoError(t, err)
	assert.Equal(t, sb.ID, got.ID, "team-b's alice is untouched")
}

func TestUserIDWithNULIsRefused(t *testing.T) {
	m, _ := newManager(t, newClock(), nil)
	_, _, err := m.GetOrCreate(t.Context(), session.Params{UserID: "team-a\x00alice"})
	require.ErrorIs(t, err, session.ErrInvalid)
}
