package httpserver_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/jsonlimit"
)

// TestDeepBodyRefused: a body nested past jsonlimit.MaxDepth is refused
// with 400 invalid_argument on every route that decodes one, quickly, and
// the server keeps answering /health meanwhile. A body at the limit is
// decoded as usual.
func TestDeepBodyRefused(t *testing.T) {
	e := newEnv(t, envConfig{})
	max := jsonlimit.MaxDepth
	deep := strings.Repeat("[", 40000) + strings.Repeat("]", 40000)
	over := `{"query":"x","labels":` + strings.Repeat(`{"a":`, max) + `"v"` + strings.Repeat("}", max) + `}`

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // /health is unaffected while deep bodies arrive
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r := e.get("/health", "")
			assert.Equal(t, http.StatusOK, r.Status)
		}
	}()
	for _, route := range []string{"/v1/discover", "/v1/agents", "/v1/delegate"} {
		for name, body := range map[string]string{"40k levels": deep, "one past the limit": over} {
			start := time.Now()
			r := e.post(route, adminToken, body)
			er := expectError(t, r, http.StatusBadRequest, apierr.CodeInvalidArgument)
			assert.Contains(t, er.Error, fmt.Sprintf("more than %d deep", max), "%s %s", route, name)
			assert.Less(t, time.Since(start), time.Second, "%s %s", route, name)
		}
	}
	close(stop)
	wg.Wait()
	r := e.get("/health", "")
	require.Equal(t, http.StatusOK, r.Status)

	// At the limit: decoded, and answered like any discovery.
	at := `{"query":"x","labels":{"k":"v"},"resources":` + strings.Repeat("[", max-1) + strings.Repeat("]", max-1) + `}`
	r = e.post("/v1/discover", adminToken, at)
	// resources must be a list of URIs: the decoder, not the depth
	// guard, refuses it.
	er := expectError(t, r, http.StatusBadRequest, apierr.CodeInvalidArgument)
	assert.NotContains(t, er.Error, "deep")
	r = e.post("/v1/discover", adminToken, `{"query":"x","labels":{"k":"v"}}`)
	require.Equalf(t, http.StatusOK, r.Status, "%s", r.Body)
}
