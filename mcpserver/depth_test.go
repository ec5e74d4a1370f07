package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeepBodyRefused: a request whose JSON nests more than 64 deep is
// refused with 400 before the SDK decodes it; the endpoint keeps serving.
func TestDeepBodyRefused(t *testing.T) {
	_, ts := httpEnv(t, nil)
	post := func(body string) (int, string) {
		r, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"x","labels":`
	status, text := post(call + strings.Repeat(`{"a":`, 40000) + `1` + strings.Repeat("}", 40000) + `}}}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, text, "nests arrays and objects more than 64 deep")

	cs := connectHTTP(t, ts.URL, "", "")
	_, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
}
