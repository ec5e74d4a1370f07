package mcpserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/mcpserver"
)

// callerKey is where the test's "auth middleware" puts the caller, as the
// HTTP API's authentication does.
type callerKey struct{}

// httpEnv serves the MCP server of a mesh over Streamable HTTP behind a
// stand-in for the HTTP API's auth middleware: the X-Caller header names
// the caller, whose scopes Options.Authorize checks.
func httpEnv(t *testing.T, hopts *mcpserver.HTTPOptions) (*env, *httptest.Server) {
	t.Helper()
	e := newEnv(t, &mcpserver.Options{Authorize: func(ctx context.Context, req *mcp.CallToolRequest) error {
		caller, _ := ctx.Value(callerKey{}).(string)
		if caller == "reader" && mcpserver.RequiredScope(req.Params.Name) != "read" {
			return errors.New("token reader lacks scope " + mcpserver.RequiredScope(req.Params.Name))
		}
		return nil
	}})
	h, err := mcpserver.HTTPHandler(e.srv, hopts)
	require.NoError(t, err)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, r.Header.Get("X-Caller"))))
	}))
	t.Cleanup(ts.Close)
	return e, ts
}

// headerTransport adds a header to every request.
type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

func connectHTTP(t *testing.T, url, caller, protocolVersion string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: headerTransport{"X-Caller", caller}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestStreamableHTTP(t *testing.T) {
	e, ts := httpEnv(t, nil)
	e.register("finance", "Budgets and cost centers", "budget")

	// The SDK's default handshake (server/discover, 2026-07-28) and the
	// legacy initialize handshake both work against the stateless
	// handler.
	for _, version := range []string{"", "2025-11-25", "2025-06-18"} {
		t.Run("protocol "+version, func(t *testing.T) {
			cs := connectHTTP(t, ts.URL, "admin", version)
			if version != "" {
				assert.Equal(t, "agentmesh", cs.InitializeResult().ServerInfo.Name)
				assert.Equal(t, version, cs.InitializeResult().ProtocolVersion)
			}
			assert.Len(t, listTools(t, cs), 6)

			var found mcpserver.DiscoverResult
			ok(t, call(t, cs, mcpserver.ToolDiscover, map[string]any{"query": "budget"}), &found)
			require.Len(t, found.Results, 1)
			var out mcpserver.DelegateResult
			ok(t, call(t, cs, mcpserver.ToolDelegate, map[string]any{"targetName": "finance", "task": "Budget?"}), &out)
			assert.Equal(t, "completed", out.Status)
			fails(t, call(t, cs, mcpserver.ToolDiscover, map[string]any{"query": "budget", "bogus": 1}), "invalid_argument")
		})
	}

	// The caller put on the request context by the HTTP middleware
	// reaches Options.Authorize.
	reader := connectHTTP(t, ts.URL, "reader", "")
	ok(t, call(t, reader, mcpserver.ToolListAgents, map[string]any{}), &mcpserver.ListAgentsResult{})
	txt := fails(t, call(t, reader, mcpserver.ToolRegister, registerArgs("x", "http://x.example.com")), "permission_denied")
	assert.Contains(t, txt, "lacks scope register")
	writer := connectHTTP(t, ts.URL, "writer", "")
	ok(t, call(t, writer, mcpserver.ToolRegister, registerArgs("x", "http://x.example.com")), &mcpserver.RegisterResult{})
}

// post sends one raw JSON-RPC message as a Streamable HTTP client would.
func post(t *testing.T, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

const listRequest = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

func TestStreamableHTTPGuards(t *testing.T) {
	_, ts := httpEnv(t, nil)

	t.Run("stateless JSON responses", func(t *testing.T) {
		resp := post(t, ts.URL, listRequest, nil)
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.Empty(t, resp.Header.Get("Mcp-Session-Id"), "stateless: no session")
		assert.Contains(t, body, "mesh_discover")
	})
	t.Run("same-origin browser request allowed", func(t *testing.T) {
		resp := post(t, ts.URL, listRequest, map[string]string{"Origin": ts.URL, "Sec-Fetch-Site": "same-origin"})
		readAll(t, resp.Body)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})
	t.Run("cross-origin POST refused", func(t *testing.T) {
		for _, h := range []map[string]string{
			{"Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site"},
			{"Origin": "https://evil.example.com"}, // old browsers: Origin only
		} {
			resp := post(t, ts.URL, listRequest, h)
			body := readAll(t, resp.Body)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.JSONEq(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"cross-origin request refused"}}`, body)
		}
	})
	t.Run("oversized body refused", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"` + strings.Repeat("a", mcpserver.DefaultMaxBodyBytes) + `"}}}`
		resp := post(t, ts.URL, big, nil)
		readAll(t, resp.Body)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

		// Just under the limit it reaches the tool, which refuses the
		// over-long query as a tool error.
		under := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"` + strings.Repeat("a", mcpserver.DefaultMaxBodyBytes-200) + `"}}}`
		resp = post(t, ts.URL, under, nil)
		body := readAll(t, resp.Body)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, body, `"isError":true`)
		assert.Contains(t, body, "invalid_argument: query: maxLength")
	})
	t.Run("GET and DELETE are not served", func(t *testing.T) {
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			req, err := http.NewRequest(m, ts.URL, nil)
			require.NoError(t, err)
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			readAll(t, resp.Body)
			assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
		}
	})
	t.Run("DNS rebinding refused on loopback", func(t *testing.T) {
		resp := post(t, ts.URL, listRequest, map[string]string{"Host": "evil.example.com"})
		readAll(t, resp.Body)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	})
	t.Run("malformed JSON", func(t *testing.T) {
		resp := post(t, ts.URL, `{"jsonrpc":`, nil)
		readAll(t, resp.Body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	})
}

func TestStreamableHTTPOptions(t *testing.T) {
	_, ts := httpEnv(t, &mcpserver.HTTPOptions{MaxBodyBytes: 1000, TrustedOrigins: []string{"https://inspector.example.com"}})
	resp := post(t, ts.URL, listRequest, map[string]string{"Origin": "https://inspector.example.com", "Sec-Fetch-Site": "cross-site"})
	readAll(t, resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "trusted origin")
	resp = post(t, ts.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"`+strings.Repeat("a", 1000)+`"}}`, nil)
	readAll(t, resp.Body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "custom limit")

	_, err := mcpserver.HTTPHandler(newEnv(t, nil).srv, &mcpserver.HTTPOptions{TrustedOrigins: []string{"not an origin"}})
	require.Error(t, err)
}
