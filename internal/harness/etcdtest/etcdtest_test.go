package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/agentmesh/agentmesh/internal/harness/etcdtest"
)

// TestStart: a started server answers on its endpoints, grants a lease of
// one second (the short raft ticks) and expires it.
func TestStart(t *testing.T) {
	s, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	defer s.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	prefix := etcdtest.Prefix(t)
	lease, err := cli.Grant(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), lease.TTL)
	_, err = cli.Put(ctx, prefix+"k", "v", clientv3.WithLease(lease.ID))
	require.NoError(t, err)
	resp, err := cli.Get(ctx, prefix+"k")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(ctx, prefix+"k")
		return err == nil && len(resp.Kvs) == 0
	}, 5*time.Second, 50*time.Millisecond, "the key of an expired lease must vanish")
}
