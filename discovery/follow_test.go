package discovery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// TestFollowReadYourWrites: an engine following a registry indexes its
// changes off the writers' path, yet every search that starts after a
// write returned sees it: writers register, replace and delete agents and
// search for them at once, from several goroutines, many times.
func TestFollowReadYourWrites(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	e := discovery.New(nil)
	stop := e.Follow(reg)
	t.Cleanup(stop)

	has := func(word, name string) bool {
		res, err := e.Search(word, &discovery.Query{Limit: 50})
		if !assert.NoError(t, err) {
			return false
		}
		for _, r := range res {
			if r.Agent.Name == name {
				return true
			}
		}
		return false
	}
	const writers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				name := fmt.Sprintf("agent-%d-%d", w, i)
				word, word2 := letterWord(w*rounds+i), letterWord(w*rounds+i+100000)
				a := registry.Agent{Name: name, Description: "Handles " + word + " requests.",
					Capabilities: []string{"widgets"}, Endpoint: "https://agent.example.com/task"}
				if _, _, err := reg.Register(ctx, a); !assert.NoError(t, err) {
					return
				}
				if !assert.True(t, has(word, name), "%s is found right after Register returned", name) {
					return
				}
				a.Description = "Handles " + word2 + " requests."
				if _, _, err := reg.Register(ctx, a); !assert.NoError(t, err) {
					return
				}
				if !assert.True(t, has(word2, name), "%s's new text right after the replacement", name) ||
					!assert.False(t, has(word, name), "%s's old text is gone", name) {
					return
				}
				if i%2 == 0 {
					if !assert.NoError(t, reg.Delete(ctx, name)) || !assert.False(t, has(word2, name), "%s is gone right after Delete returned", name) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, writers*rounds/2, e.Len())
	assert.Equal(t, reg.Len(), e.Len())
}

// TestFollowStopIndexesWhatArrived: stop indexes every change delivered
// before it, and none after.
func TestFollowStopIndexesWhatArrived(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	e := discovery.New(nil)
	stop := e.Follow(reg)
	for i := range 500 {
		_, _, err := reg.Register(ctx, registry.Agent{Name: fmt.Sprintf("a%d", i), Description: "forecasts",
			Capabilities: []string{"weather"}, Endpoint: "https://agent.example.com/task"})
		require.NoError(t, err)
	}
	stop()
	_, _, err := reg.Register(ctx, registry.Agent{Name: "late", Description: "forecasts",
		Capabilities: []string{"weather"}, Endpoint: "https://agent.example.com/task"})
	require.NoError(t, err)
	assert.Equal(t, 500, e.Len())
}

// letterWord is a made-up word of letters only, different for each n
// (digits would split it into words other agents share).
// newRegistry returns a registry on a memory store, without a sweeper,
// closed with the test.
func newRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	reg, err := registry.New(context.Background(), store, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

func letterWord(n int) string {
	b := []byte("qj")
	for x := n; ; x /= 26 {
		b = append(b, byte('a'+x%26))
		if x < 26 {
			break
		}
	}
	return string(append(b, "zv"...))
}
