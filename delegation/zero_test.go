package delegation_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// A zero Client, and a nil *Client, is inert: every method returns
// ErrClosed (or nothing) instead of panicking.
func TestZeroClientIsInert(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]*delegation.Client{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Delegate(ctx, delegation.Request{Target: "a", Task: "t"})
			assert.ErrorIs(t, err, delegation.ErrClosed, "Delegate")
			_, err = c.Get(ctx, "id")
			assert.ErrorIs(t, err, delegation.ErrClosed, "Get")
			_, err = c.List(ctx, delegation.ListFilter{})
			assert.ErrorIs(t, err, delegation.ErrClosed, "List")
			_, err = c.Wait(ctx, "id")
			assert.ErrorIs(t, err, delegation.ErrClosed, "Wait")
			_, err = c.Cancel(ctx, "id")
			assert.ErrorIs(t, err, delegation.ErrClosed, "Cancel")
			_, err = c.Callback(ctx, "id", "secret", delegation.Outcome{Status: delegation.StatusCompleted})
			assert.ErrorIs(t, err, delegation.ErrClosed, "Callback")

			c.Handle("a", func(context.Context, delegation.Task) (any, error) { return "ok", nil })
			c.Handle("a", nil)

			w := httptest.NewRecorder()
			c.CallbackHandler(nil).ServeHTTP(w, httptest.NewRequest(http.MethodPost,
				"/v1/delegations/id/result?token=s", strings.NewReader(`{"status":"completed"}`)))
			assert.Equal(t, http.StatusServiceUnavailable, w.Code, "callback: %s", w.Body)

			require.NoError(t, c.Shutdown(ctx))
			require.NoError(t, c.Close())
		})
	}
}

// The zero transports refuse every Send.
func TestZeroTransportsRefuse(t *testing.T) {
	agent := registry.Agent{Name: "a", Endpoint: "http://127.0.0.1:9/task"}
	for name, tr := range map[string]delegation.Transport{
		"http": &delegation.HTTPTransport{},
		"mcp":  &delegation.MCPTransport{},
		"a2a":  &delegation.A2ATransport{},
	} {
		_, err := tr.Send(context.Background(), agent, delegation.Message{Task: "t"})
		var te *delegation.TransportError
		assert.ErrorAs(t, err, &te, name)
	}
	assert.NoError(t, (&delegation.MCPTransport{}).Close())
}
