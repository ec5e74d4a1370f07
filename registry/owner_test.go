package registry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/principal"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func as(name string, admin bool) context.Context {
	return principal.NewContext(context.Background(), principal.Principal{Name: name, Admin: admin})
}

func TestOwnerIsTheRegisteringPrincipal(t *testing.T) {
	r := newRegistry(t, nil, nil)
	a := agent("billing")
	a.Owner = "team-b" // a caller with a principal cannot choose the owner
	got, _, err := r.Register(as("team-a", false), a)
	require.NoError(t, err)
	assert.Equal(t, "team-a", got.Owner)

	// The owner replaces and heartbeats it; the owner stays.
	a.Description = "Answers billing questions, second version"
	got, created, err := r.Register(as("team-a", false), a)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, "team-a", got.Owner)
	_, err = r.Heartbeat(as("team-a", false), "billing")
	require.NoError(t, err)
}

func TestOthersCannotReplaceDeleteOrHeartbeat(t *testing.T) {
	r := newRegistry(t, nil, nil)
	orig := agent("billing")
	_, _, err := r.Register(as("team-a", false), orig)
	require.NoError(t, err)
	before, err := r.Get(context.Background(), "billing")
	require.NoError(t, err)

	hijack := agent("billing")
	hijack.Endpoint = "https://attacker.example.com/hijacked"
	_, _, err = r.Register(as("team-b", false), hijack)
	require.ErrorIs(t, err, registry.ErrPermissionDenied)
	assert.Equal(t, "permission_denied", registry.Code(err))
	require.ErrorIs(t, r.Delete(as("team-b", false), "billing"), registry.ErrPermissionDenied)
	_, err = r.Heartbeat(as("team-b", false), "billing")
	require.ErrorIs(t, err, registry.ErrPermissionDenied)

	after, err := r.Get(context.Background(), "billing")
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused write changes nothing")
}

func TestAdminActsOnEveryAgentAndKeepsTheOwner(t *testing.T) {
	r := newRegistry(t, nil, nil)
	_, _, err := r.Register(as("team-a", false), agent("billing"))
	require.NoError(t, err)
	a := agent("billing")
	a.Description = "Answers billing questions, fixed by the operators"
	got, _, err := r.Register(as("ops", true), a)
	require.NoError(t, err)
	assert.Equal(t, "team-a", got.Owner, "an admin's replacement keeps the owner")
	_, err = r.Heartbeat(as("ops", true), "billing")
	require.NoError(t, err)
	require.NoError(t, r.Delete(as("ops", true), "billing"))
}

func TestCallerWithoutPrincipalIsUnrestricted(t *testing.T) {
	r := newRegistry(t, nil, nil)
	_, _, err := r.Register(as("team-a", false), agent("billing"))
	require.NoError(t, err)
	a := agent("billing")
	a.Description = "Answers billing questions, replaced by the host"
	got, _, err := r.Register(context.Background(), a)
	require.NoError(t, err)
	assert.Equal(t, "team-a", got.Owner)

	// A library caller may name the owner of a new agent.
	b := agent("payroll")
	b.Owner = "team-b"
	got, _, err = r.Register(context.Background(), b)
	require.NoError(t, err)
	assert.Equal(t, "team-b", got.Owner)
	_, _, err = r.Register(as("team-a", false), b)
	require.ErrorIs(t, err, registry.ErrPermissionDenied)
}

// Records stored before agents had owners belong to principal.Default:
// the MESH_TOKEN's principal may change them, another may not, and the
// first write stores the owner.
func TestOwnerlessRecordsBelongToDefault(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	old := agent("legacy")
	old.Source = registry.SourceAPI
	require.NoError(t, store.UpdateAgent(ctx, "legacy", func(*registry.Agent) (*registry.Agent, error) { return &old, nil }))

	r := newRegistry(t, store, nil)
	got, err := r.Get(ctx, "legacy")
	require.NoError(t, err)
	assert.Equal(t, principal.Default, got.Owner)

	_, _, err = r.Register(as("team-b", false), old)
	require.ErrorIs(t, err, registry.ErrPermissionDenied)
	require.ErrorIs(t, r.Delete(as("team-b", false), "legacy"), registry.ErrPermissionDenied)

	_, err = r.Heartbeat(as(principal.Default, false), "legacy")
	require.NoError(t, err)
	stored, err := store.GetAgent(ctx, "legacy")
	require.NoError(t, err)
	assert.Equal(t, "", stored.Owner, "a heartbeat keeps the record as it was")

	old.Description = "Answers legacy questions, migrated"
	_, _, err = r.Register(as(principal.Default, false), old)
	require.NoError(t, err)
	stored, err = store.GetAgent(ctx, "legacy")
	require.NoError(t, err)
	assert.Equal(t, principal.Default, stored.Owner, "the first write stores the owner")
}

func TestFileAgentsHaveNoOwner(t *testing.T) {
	r := newRegistry(t, nil, nil)
	f := agent("directory")
	_, err := r.ReplaceFileAgents(context.Background(), []registry.Agent{f})
	require.NoError(t, err)
	got, err := r.Get(context.Background(), "directory")
	require.NoError(t, err)
	assert.Empty(t, got.Owner)
	_, err = r.Heartbeat(as("team-b", false), "directory")
	require.NoError(t, err, "file agents are the operator's: any register caller may heartbeat them")
	require.ErrorIs(t, r.Delete(as("ops", true), "directory"), registry.ErrManagedByFile)
}
