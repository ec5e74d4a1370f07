package agentmesh_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

var finance = registry.Agent{
	Name:         "finance",
	Description:  "Department budgets and cost centers.",
	Capabilities: []string{"budget"},
	Endpoint:     "https://finance.example.com/task",
}

func TestOpenPathPersists(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mesh.db")
	m, err := agentmesh.Open(ctx, &agentmesh.Options{Path: path})
	require.NoError(t, err)
	_, _, err = m.Registry().Register(ctx, finance)
	require.NoError(t, err)

	_, err = agentmesh.Open(ctx, &agentmesh.Options{Path: path, LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, boltstore.ErrLocked, "the file is held by the first mesh")
	require.NoError(t, m.Close())

	m, err = agentmesh.Open(ctx, &agentmesh.Options{Path: path})
	require.NoError(t, err)
	defer m.Close()
	got, err := m.Registry().Get(ctx, "finance")
	require.NoError(t, err)
	assert.Equal(t, finance.Endpoint, got.Endpoint)
	results, err := m.Engine().Search("budget", nil)
	require.NoError(t, err)
	require.Len(t, results, 1, "the engine indexes the agents already in the store")
}

func TestOpenStoreStaysTheCallers(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	_, err := agentmesh.Open(ctx, &agentmesh.Options{Store: st, Path: "mesh.db"})
	require.Error(t, err, "Path and Store together")

	m, err := agentmesh.Open(ctx, &agentmesh.Options{Store: st})
	require.NoError(t, err)
	_, _, err = m.Registry().Register(ctx, finance)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	_, err = st.GetAgent(ctx, "finance")
	require.NoError(t, err, "Close leaves a store passed in Options.Store open")
}

func TestOpenRouting(t *testing.T) {
	ctx := t.Context()
	m, err := agentmesh.Open(ctx, nil)
	require.NoError(t, err)
	assert.Nil(t, m.Router())
	assert.Nil(t, m.Sessions())
	assert.Nil(t, m.Lexical())
	require.NoError(t, m.Close())

	dispatched := false
	m, err = agentmesh.Open(ctx, &agentmesh.Options{Routing: &agentmesh.RoutingOptions{
		Dispatcher: func(c *delegation.Client) routing.Dispatcher { dispatched = true; return c },
	}})
	require.NoError(t, err)
	defer m.Close()
	assert.NotNil(t, m.Router())
	assert.NotNil(t, m.Sessions())
	assert.NotNil(t, m.Lexical())
	assert.True(t, dispatched, "the router dispatches through Dispatcher's wrapper")
}

func TestOpenSessionClose(t *testing.T) {
	ctx := t.Context()
	var events []session.CloseEvent
	m, err := agentmesh.Open(ctx, &agentmesh.Options{Routing: &agentmesh.RoutingOptions{
		OnSessionClose: func(_ context.Context, e session.CloseEvent) { events = append(events, e) },
	}})
	require.NoError(t, err)
	defer m.Close()
	s, _, err := m.Sessions().GetOrCreate(ctx, session.Params{UserID: "alice", ActiveAgent: "finance"})
	require.NoError(t, err)
	_, err = m.Sessions().CloseSession(ctx, s.ID, session.StatusCompleted)
	require.NoError(t, err)
	require.Len(t, events, 1, "the mesh's session manager reports to OnSessionClose")
	assert.Equal(t, s.ID, events[0].SessionID)
	assert.Equal(t, session.StatusCompleted, events[0].Status)
	assert.Equal(t, "finance", events[0].ActiveAgent)
}

// Observe runs once the registry and breakers exist and before the
// delegation client; its stop runs before the store closes.
func TestOpenObserve(t *testing.T) {
	ctx := t.Context()
	var stopped bool
	m, err := agentmesh.Open(ctx, &agentmesh.Options{
		Path: filepath.Join(t.TempDir(), "mesh.db"),
		Observe: func(_ context.Context, m *agentmesh.Mesh) (func(), error) {
			assert.NotNil(t, m.Registry())
			assert.NotNil(t, m.Breakers())
			assert.Nil(t, m.Delegation())
			st := m.Store()
			return func() {
				_, err := st.GetAgent(context.Background(), "finance")
				assert.ErrorIs(t, err, registry.ErrNotFound, "the store is still open")
				stopped = true
			}, nil
		},
	})
	require.NoError(t, err)
	require.NoError(t, m.Shutdown(ctx))
	assert.True(t, stopped)
	require.NoError(t, m.Close(), "a second close")

	boom := errors.New("boom")
	_, err = agentmesh.Open(ctx, &agentmesh.Options{
		Observe: func(context.Context, *agentmesh.Mesh) (func(), error) { return nil, boom },
	})
	require.ErrorIs(t, err, boom)
}

func TestOpenRegistryWrite(t *testing.T) {
	ctx := t.Context()
	var writes []registry.Write
	m, err := agentmesh.Open(ctx, &agentmesh.Options{
		OnRegistryWrite: func(_ context.Context, w registry.Write) { writes = append(writes, w) },
	})
	require.NoError(t, err)
	defer m.Close()
	_, _, err = m.Registry().Register(ctx, finance)
	require.NoError(t, err)
	require.Len(t, writes, 1)
	assert.True(t, writes[0].Created)
	assert.Equal(t, "finance", writes[0].Agent.Name)
}

func TestZeroMesh(t *testing.T) {
	var m agentmesh.Mesh
	assert.Nil(t, m.Registry())
	assert.NoError(t, m.Close())
}
