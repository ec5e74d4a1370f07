package delegation_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// A client on a real bbolt file brings the store back to MaxRecords after
// every round of sustained delegations, twenty times the bound in all:
// pruning keeps up with the writes. (That a file held at its bound stops
// growing is boltstore's TestStoreAtItsBoundsStopsGrowing: here the
// overshoot between two prunes follows the scheduling of four writers on
// a loaded machine, and a small bbolt file grows by doubling.)
func TestClientPruneKeepsUpOnBolt(t *testing.T) {
	const keep = 200
	ctx := context.Background()
	path := t.TempDir() + "/mesh.db"
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	reg, err := registry.New(ctx, s, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	c, err := delegation.New(ctx, reg, s, &delegation.Options{MaxRecords: keep, PruneInterval: 10 * time.Millisecond, RescanInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Shutdown(ctx)) })
	c.Handle("echo", func(_ context.Context, task delegation.Task) (any, error) {
		return map[string]string{"result": "echo: " + task.Task}, nil
	})
	_, _, err = reg.Register(ctx, registry.Agent{Name: "echo", Protocol: registry.ProtocolInProcess,
		Description: "echoes", Capabilities: []string{"echo"}})
	require.NoError(t, err)

	stored := func() int {
		n := 0
		for offset := 0; ; offset += delegation.MaxListLimit {
			recs, err := s.ListDelegations(ctx, delegation.ListFilter{Limit: delegation.MaxListLimit, Offset: offset})
			require.NoError(t, err)
			n += len(recs)
			if len(recs) < delegation.MaxListLimit {
				return n
			}
		}
	}
	delegate := func(n int) {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range n / 4 {
					rec, err := c.Delegate(ctx, delegation.Request{Target: "echo",
						Task: fmt.Sprintf("summarise the open invoices of the finance team, part %d-%d", w, i)})
					if assert.NoError(t, err) {
						assert.Equal(t, delegation.StatusCompleted, rec.Status)
					}
				}
			})
		}
		wg.Wait()
		require.Eventually(t, func() bool { return stored() == keep }, 10*time.Second, 10*time.Millisecond,
			"the store holds MaxRecords")
	}
	for range 5 {
		delegate(4 * keep)
	}
}
