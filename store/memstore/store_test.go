package memstore_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/internal/storetest"
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
