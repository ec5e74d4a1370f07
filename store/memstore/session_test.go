package memstore_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func TestSessionStore(t *testing.T) {
	storetest.TestSessionStore(t, func(t *testing.T) session.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestSessionStoreZeroValue(t *testing.T) {
	storetest.TestSessionStore(t, func(t *testing.T) session.Store {
		return new(memstore.Store)
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}
