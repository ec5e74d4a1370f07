package memstore_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func TestAgentStore(t *testing.T) {
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestZeroValueIsUsable(t *testing.T) {
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		return new(memstore.Store)
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestDelegationStore(t *testing.T) {
	storetest.TestDelegationStore(t, func(t *testing.T) delegation.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestBreakerStore(t *testing.T) {
	storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestAuditStore(t *testing.T) {
	storetest.TestAuditStore(t, func(t *testing.T) audit.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestZeroValueIsUsableForEveryStore(t *testing.T) {
	t.Run("Audit", func(t *testing.T) {
		storetest.TestAuditStore(t, func(t *testing.T) audit.Store {
			return new(memstore.Store)
		}, &storetest.Options{ErrClosed: memstore.ErrClosed})
	})
	t.Run("Delegation", func(t *testing.T) {
		storetest.TestDelegationStore(t, func(t *testing.T) delegation.Store {
			return new(memstore.Store)
		}, &storetest.Options{ErrClosed: memstore.ErrClosed})
	})
	t.Run("Breaker", func(t *testing.T) {
		storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store {
			return new(memstore.Store)
		}, &storetest.Options{ErrClosed: memstore.ErrClosed})
	})
}
