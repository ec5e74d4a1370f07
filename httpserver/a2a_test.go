package httpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// cardJSON is an A2A 1.0 card whose JSON-RPC interface is at rpcURL.
func cardJSON(name, rpcURL string) string {
	return fmt.Sprintf(`{"name": %q, "description": "Forecasts the weather.", "version": "2.1.0",
		"supportedInterfaces": [{"url": %q, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
		"capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
		"skills": [{"id": "forecast", "name": "Forecast", "description": "Forecasts.", "tags": ["weather"], "examples": ["Rain in Oslo?"]}]}`, name, rpcURL)
}

// cardServer serves body as the card and counts its requests.
func cardServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &hits
}

func serveCard(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func a2aEnv(t *testing.T, policy *netguard.Policy) *env {
	t.Helper()
	return newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.CardClient = policy.NewClient(nil)
		o.AgentCard = a2acard.MeshCard("https://mesh.example", "1.0.0")
	}})
}

func TestImportAgent(t *testing.T) {
	e := a2aEnv(t, nil)
	ts, _ := cardServer(t, serveCard(cardJSON("Weather Agent", "/rpc")))
	cardURL := ts.URL + "/.well-known/agent-card.json"

	r := e.post("/v1/agents/import", registerToken, map[string]any{"cardUrl": cardURL})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Equal(t, "/v1/agents/weather-agent", r.Header.Get("Location"))
	var a registry.Agent
	r.JSON(t, &a)
	assert.Equal(t, "weather-agent", a.Name)
	assert.Equal(t, "Weather Agent", a.DisplayName)
	assert.Equal(t, registry.ProtocolA2A, a.Protocol)
	assert.Equal(t, ts.URL+"/rpc", a.Endpoint, "the relative interface URL is resolved against the card URL")
	assert.Equal(t, []string{"Forecast", "weather"}, a.Capabilities)
	assert.Equal(t, []string{"Rain in Oslo?"}, a.Examples)
	assert.Equal(t, "1.0", a.Labels["a2a.version"])
	assert.Equal(t, registry.SourceAPI, a.Source)

	r = e.post("/v1/agents/import", registerToken, map[string]any{"cardUrl": cardURL})
	require.Equal(t, http.StatusOK, r.Status, "re-importing replaces the record: %s", r.Body)

	got, err := e.reg.Get(t.Context(), "weather-agent")
	require.NoError(t, err)
	assert.Equal(t, ts.URL+"/rpc", got.Endpoint)
}

func TestImportAgentErrors(t *testing.T) {
	e := a2aEnv(t, nil)
	valid, _ := cardServer(t, serveCard(cardJSON("w", "/rpc")))
	huge, _ := cardServer(t, serveCard(`{"description": "`+strings.Repeat("x", a2acard.MaxCardBytes)+`"}`))
	garbage, _ := cardServer(t, serveCard("<html>hello</html>"))
	grpcOnly, _ := cardServer(t, serveCard(`{"name": "g", "description": "d", "supportedInterfaces": [{"url": "/g", "protocolBinding": "GRPC"}]}`))
	missing, _ := cardServer(t, http.NotFound)
	redirect, redirectHits := cardServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			serveCard(cardJSON("moved", "/rpc"))(w, r)
			return
		}
		http.Redirect(w, r, "/moved", http.StatusFound)
	})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	refusedEndpoint, _ := cardServer(t, serveCard(cardJSON("meta", "http://169.254.169.254/rpc")))

	cases := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
		msg    string
	}{
		{"no token", "", map[string]any{"cardUrl": valid.URL}, http.StatusUnauthorized, apierr.CodeUnauthenticated, ""},
		{"read scope", readToken, map[string]any{"cardUrl": valid.URL}, http.StatusForbidden, httpserver.CodePermissionDenied, ""},
		{"unknown field", registerToken, map[string]any{"cardUrl": valid.URL, "name": "x"}, http.StatusBadRequest, apierr.CodeInvalidArgument, ""},
		{"no cardUrl", registerToken, map[string]any{}, http.StatusBadRequest, apierr.CodeInvalidArgument, "required"},
		{"relative cardUrl", registerToken, map[string]any{"cardUrl": "/card.json"}, http.StatusBadRequest, apierr.CodeInvalidArgument, "absolute"},
		{"file URL", registerToken, map[string]any{"cardUrl": "file:///etc/passwd"}, http.StatusBadRequest, apierr.CodeInvalidArgument, "absolute"},
		{"ftp scheme", registerToken, map[string]any{"cardUrl": "ftp://example.com/card"}, http.StatusBadRequest, apierr.CodeInvalidArgument, "scheme"},
		{"userinfo", registerToken, map[string]any{"cardUrl": "http://u:p@example.com/card"}, http.StatusBadRequest, registry.CodeEndpointNotAllowed, ""},
		{"metadata address", registerToken, map[string]any{"cardUrl": "http://169.254.169.254/card"}, http.StatusBadRequest, registry.CodeEndpointNotAllowed, ""},
		{"huge", registerToken, map[string]any{"cardUrl": huge.URL}, http.StatusBadRequest, apierr.CodeInvalidArgument, "over"},
		{"garbage", registerToken, map[string]any{"cardUrl": garbage.URL}, http.StatusBadRequest, apierr.CodeInvalidArgument, "not a JSON object"},
		{"no JSON-RPC interface", registerToken, map[string]any{"cardUrl": grpcOnly.URL}, http.StatusBadRequest, apierr.CodeInvalidArgument, "JSON-RPC"},
		{"not found", registerToken, map[string]any{"cardUrl": missing.URL}, http.StatusBadGateway, a2acard.CodeCardFetchFailed, "status 404"},
		{"redirect not followed", registerToken, map[string]any{"cardUrl": redirect.URL}, http.StatusBadGateway, a2acard.CodeCardFetchFailed, "status 302"},
		{"unreachable", registerToken, map[string]any{"cardUrl": closed.URL}, http.StatusBadGateway, a2acard.CodeCardFetchFailed, ""},
		{"card endpoint refused by the registry", registerToken, map[string]any{"cardUrl": refusedEndpoint.URL}, http.StatusBadRequest, registry.CodeEndpointNotAllowed, "endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("/v1/agents/import", tc.token, tc.body)
			er := expectError(t, r, tc.status, tc.code)
			assert.Contains(t, er.Error, tc.msg)
		})
	}
	assert.EqualValues(t, 1, redirectHits.Load(), "the redirect is not followed")
	page, err := e.reg.List(t.Context(), registry.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, page.Agents, "nothing was registered")
}

func TestImportAgentStrictPolicy(t *testing.T) {
	strict, err := netguard.NewPolicy(netguard.Options{})
	require.NoError(t, err)
	e := a2aEnv(t, strict)
	ts, hits := cardServer(t, serveCard(cardJSON("w", "/rpc")))

	r := e.post("/v1/agents/import", registerToken, map[string]any{"cardUrl": ts.URL})
	er := expectError(t, r, http.StatusBadRequest, registry.CodeEndpointNotAllowed)
	assert.Contains(t, er.Error, "cardUrl")
	assert.Zero(t, hits.Load(), "the loopback card server is never contacted")
}

func TestMeshAgentCard(t *testing.T) {
	e := a2aEnv(t, nil)
	r := e.get("/.well-known/agent-card.json", "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, "public, max-age=60", r.Header.Get("Cache-Control"))
	var card a2a.AgentCard
	require.NoError(t, json.Unmarshal(r.Body, &card))
	assert.Equal(t, "agentmesh", card.Name)
	assert.Equal(t, "https://mesh.example/a2a", card.SupportedInterfaces[0].URL)
	require.Len(t, card.Skills, 2)
	assert.Equal(t, a2acard.SkillDiscover, card.Skills[0].ID)
	assert.Equal(t, a2acard.SkillDelegate, card.Skills[1].ID)
}

func TestA2ARoutesOff(t *testing.T) {
	e := newEnv(t, envConfig{})
	expectError(t, e.get("/.well-known/agent-card.json", ""), http.StatusNotFound, httpserver.CodeNotFound)
	// Without a card client, the path only matches /v1/agents/{name}.
	r := e.post("/v1/agents/import", registerToken, map[string]any{"cardUrl": "http://127.0.0.1:9/"})
	expectError(t, r, http.StatusMethodNotAllowed, httpserver.CodeMethodNotAllowed)
}
