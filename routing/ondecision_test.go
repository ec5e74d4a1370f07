package routing

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnDecisionGetsTheRequest checks that the hook's ctx carries the
// request as the router decided it (RequestFrom), one request after the
// other, and that the caller's own ctx is left without one.
func TestOnDecisionGetsTheRequest(t *testing.T) {
	var got []Request
	hook := func(ctx context.Context, resp Response, err error) {
		req, ok := RequestFrom(ctx)
		require.True(t, ok, "the hook's ctx carries no request")
		got = append(got, req)
	}
	e := newRouterEnv(t, envConfig{router: &RouterOptions{OnDecision: hook}})

	_, err := e.router.Handle(e.ctx, Request{Input: "what is the budget", UserID: "ann"})
	require.NoError(t, err)
	_, _ = e.router.Handle(e.ctx, Request{Input: "ghost please", UserID: "bob"}) // an unregistered agent: falls back

	require.Len(t, got, 2)
	assert.Equal(t, "what is the budget", got[0].Input)
	assert.Equal(t, "ann", got[0].UserID)
	assert.Equal(t, "ghost please", got[1].Input)

	_, ok := RequestFrom(e.ctx)
	assert.False(t, ok, "Handle changed its caller's ctx")
}
