package etcdstore_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/etcdtest"
	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/etcdstore"
)

// server is the etcd server of this package's tests, started by TestMain.
var server *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &server)) }

// open opens a store over a key prefix of the test's own (so that tests
// sharing the server never see each other's keys) and closes it when the
// test ends. opts may be nil; its Endpoints and, when empty, Prefix are
// filled in.
func open(t testing.TB, opts *etcdstore.Options) *etcdstore.Store {
	t.Helper()
	var o etcdstore.Options
	if opts != nil {
		o = *opts
	}
	o.Endpoints = server.Endpoints
	if o.Prefix == "" {
		o.Prefix = etcdtest.Prefix(t)
	}
	s, err := etcdstore.Open(t.Context(), &o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

var suiteOpts = &storetest.Options{ErrClosed: etcdstore.ErrClosed}

func TestAgentStore(t *testing.T) {
	t.Parallel()
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store { return open(t, nil) }, suiteOpts)
}

func TestDelegationStore(t *testing.T) {
	t.Parallel()
	storetest.TestDelegationStore(t, func(t *testing.T) delegation.Store { return open(t, nil) }, suiteOpts)
}

func TestBreakerStore(t *testing.T) {
	t.Parallel()
	storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store { return open(t, nil) }, suiteOpts)
}

func TestSessionStore(t *testing.T) {
	t.Parallel()
	storetest.TestSessionStore(t, func(t *testing.T) session.Store { return open(t, nil) }, suiteOpts)
}

func TestAuditStore(t *testing.T) {
	t.Parallel()
	storetest.TestAuditStore(t, func(t *testing.T) audit.Store { return open(t, nil) }, suiteOpts)
}
