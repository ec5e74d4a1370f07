package registry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
)

// writes records what Options.OnWrite receives.
type writes struct {
	mu   sync.Mutex
	list []registry.Write
	ctxs []context.Context
}

func (w *writes) record(ctx context.Context, wr registry.Write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, wr)
	w.ctxs = append(w.ctxs, ctx)
}

func (w *writes) take() []registry.Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list, w.ctxs = nil, nil
	return l
}

type ctxKey struct{}

// Every write reaches OnWrite once, refused ones too, with the caller's
// context and without the token.
func TestOnWriteReportsEveryWrite(t *testing.T) {
	clk := newClock()
	var got writes
	r := newRegistry(t, nil, &registry.Options{Now: clk.Now, OnWrite: got.record})
	ctx := context.WithValue(context.Background(), ctxKey{}, "alice")

	a := agent("finance")
	a.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}
	a.TTLSeconds = 5
	_, _, err := r.Register(ctx, a)
	require.NoError(t, err)
	_, _, err = r.Register(ctx, a)
	require.NoError(t, err)
	w := got.take()
	require.Len(t, w, 2)
	assert.Equal(t, registry.OpRegister, w[0].Op)
	assert.True(t, w[0].Created)
	assert.False(t, w[1].Created, "the second registration replaced the first")
	assert.NoError(t, w[0].Err)
	assert.Equal(t, "finance", w[0].Agent.Name)
	assert.NotEqual(t, "s3cret", w[0].Agent.Auth.Token, "the token is redacted")

	bad := agent("Bad Name")
	bad.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}
	_, _, err = r.Register(ctx, bad)
	require.Error(t, err)
	w = got.take()
	require.Len(t, w, 1)
	assert.ErrorIs(t, w[0].Err, registry.ErrInvalid)
	assert.Equal(t, "Bad Name", w[0].Agent.Name, "a refused write names what was sent")
	assert.NotEqual(t, "s3cret", w[0].Agent.Auth.Token)

	require.Error(t, r.Delete(ctx, "nobody"))
	w = got.take()
	require.Len(t, w, 1)
	assert.Equal(t, registry.Write{Op: registry.OpDelete, Agent: registry.Agent{Name: "nobody"}, Err: w[0].Err}, w[0])
	assert.ErrorIs(t, w[0].Err, registry.ErrNotFound)

	// The TTL sweep reports the removal with the sweep's context.
	clk.Advance(time.Minute)
	n, err := r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	w = got.take()
	require.Len(t, w, 1)
	assert.Equal(t, registry.OpExpire, w[0].Op)
	assert.Equal(t, 5, w[0].Agent.TTLSeconds)

	_, _, err = r.Register(ctx, agent("hr"))
	require.NoError(t, err)
	got.mu.Lock()
	caller := got.ctxs[0]
	got.mu.Unlock()
	assert.Equal(t, "alice", caller.Value(ctxKey{}), "the hook gets the caller's context")
	got.take()
	require.NoError(t, r.Delete(ctx, "hr"))
	w = got.take()
	require.Len(t, w, 1)
	assert.Equal(t, registry.OpDelete, w[0].Op)
	assert.NoError(t, w[0].Err)
	assert.Equal(t, "hr", w[0].Agent.Name)
}

// The agent directory's changes are reported as file writes when they
// commit; an unchanged agent is not reported again.
func TestOnWriteReportsFileAgents(t *testing.T) {
	var got writes
	r := newRegistry(t, nil, &registry.Options{OnWrite: got.record})
	ctx := context.Background()

	_, err := r.ReplaceFileAgents(ctx, []registry.Agent{agent("a"), agent("b")})
	require.NoError(t, err)
	w := got.take()
	require.Len(t, w, 2)
	for _, wr := range w {
		assert.Equal(t, registry.OpRegister, wr.Op)
		assert.True(t, wr.File)
		assert.True(t, wr.Created)
	}

	_, err = r.ReplaceFileAgents(ctx, []registry.Agent{agent("a")})
	require.NoError(t, err)
	w = got.take()
	require.Len(t, w, 1, "a is unchanged; b is removed")
	assert.Equal(t, registry.Write{Op: registry.OpDelete, Agent: w[0].Agent, File: true}, w[0])
	assert.Equal(t, "b", w[0].Agent.Name)

	_, err = r.ReplaceFileAgents(ctx, []registry.Agent{{Name: "x"}})
	require.Error(t, err)
	assert.Empty(t, got.take(), "a refused file set writes nothing")
	assert.False(t, errors.Is(err, registry.ErrNotFound))
}
