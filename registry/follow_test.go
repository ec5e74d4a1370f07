package registry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
)

// TestFollow checks the order a follower sees: the snapshot, then the
// changes made while it loaded, then later ones, and nothing after stop.
func TestFollow(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, nil, nil)
	_, _, err := reg.Register(ctx, agent("alpha"))
	require.NoError(t, err)

	var (
		mu  sync.Mutex
		got []string
	)
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, s)
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	apply := func(ev registry.Event) { note(fmt.Sprintf("%s %s", ev.Type, ev.Agent.Name)) }
	stop, err := registry.Follow(reg, func(snapshot []registry.Agent) error {
		for _, a := range snapshot {
			note("snapshot " + a.Name)
		}
		// Changes made while the snapshot loads wait for it.
		_, _, err := reg.Register(ctx, agent("beta"))
		require.NoError(t, err)
		err = reg.Delete(ctx, "alpha")
		require.NoError(t, err)
		note("loaded")
		return nil
	}, apply)
	require.NoError(t, err)
	assert.Equal(t, []string{"snapshot alpha", "loaded", "put beta", "delete alpha"}, seen())

	_, _, err = reg.Register(ctx, agent("gamma"))
	require.NoError(t, err)
	assert.Equal(t, "put gamma", seen()[4])
	stop()
	stop() // idempotent
	_, _, err = reg.Register(ctx, agent("delta"))
	require.NoError(t, err)
	assert.Len(t, seen(), 5, "nothing is applied after stop")
}

// TestFollowLoadFails checks that a failed load cancels the subscription.
func TestFollowLoadFails(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, nil, nil)
	boom := errors.New("boom")
	var applied int
	stop, err := registry.Follow(reg, func([]registry.Agent) error { return boom }, func(registry.Event) { applied++ })
	require.ErrorIs(t, err, boom)
	require.NotNil(t, stop)
	stop()
	_, _, err = reg.Register(ctx, agent("alpha"))
	require.NoError(t, err)
	assert.Zero(t, applied)
}
