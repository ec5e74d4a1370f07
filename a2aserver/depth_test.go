package a2aserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
)

// TestDeepBodyRefused: a request whose JSON nests more than 64 deep is a
// JSON-RPC parse error, answered before the SDK decodes it.
func TestDeepBodyRefused(t *testing.T) {
	e := newEnv(t, envConfig{})
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"metadata":` +
		strings.Repeat(`{"a":`, 40000) + `1` + strings.Repeat("}", 40000) + `}}`
	resp, err := http.Post(e.server.URL+a2acard.MeshEndpointPath, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var reply struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&reply))
	assert.Equal(t, -32700, reply.Error.Code)
	assert.Equal(t, "invalid_argument: the request body nests arrays and objects more than 64 deep", reply.Error.Message)
	assert.Nil(t, reply.ID)
}
