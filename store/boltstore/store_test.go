package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/registry"
)

// openTemp opens a store in a new file under t.TempDir and closes it when
// the test ends.
func openTemp(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "mesh.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestAgentStore(t *testing.T) {
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		return openTemp(t)
	}, &storetest.Options{ErrClosed: ErrClosed})
}

func TestDelegationStore(t *testing.T) {
	storetest.TestDelegationStore(t, func(t *testing.T) delegation.Store {
		return openTemp(t)
	}, &storetest.Options{ErrClosed: ErrClosed})
}

func TestBreakerStore(t *testing.T) {
	storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store {
		return openTemp(t)
	}, &storetest.Options{ErrClosed: ErrClosed})
}

func TestAuditStore(t *testing.T) {
	storetest.TestAuditStore(t, func(t *testing.T) audit.Store {
		return openTemp(t)
	}, &storetest.Options{ErrClosed: ErrClosed})
}
