package a2acard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

const validCard = `{
  "name": "Weather Agent",
  "description": "Forecasts the weather.",
  "version": "2.1.0",
  "supportedInterfaces": [
    {"url": "/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    {"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
  ],
  "capabilities": {"streaming": true},
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"],
  "skills": [
    {"id": "forecast", "name": "Forecast", "description": "Forecasts for a city.", "tags": ["weather", "forecast"], "examples": ["Weather in Paris tomorrow?"]},
    {"id": "alerts", "name": "Alerts", "description": "Storm alerts.", "tags": ["weather", "storms"], "examples": ["Any storm warnings?"]}
  ]
}`

const legacyCard = `{
  "name": "old agent", "description": "An A2A 0.3 agent", "url": "https://old.example/a2a",
  "protocolVersion": "0.3.0", "version": "1",
  "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
  "security": [{"bearer": []}],
  "skills": [{"id": "x", "name": "X", "description": "x", "tags": ["t"]}]
}`

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func body(s string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(s))
	}
}

func TestFetch(t *testing.T) {
	client := (*netguard.Policy)(nil).NewClient(nil)
	ctx := context.Background()

	t.Run("valid", func(t *testing.T) {
		ts := serve(t, body(validCard))
		card, err := a2acard.Fetch(ctx, client, ts.URL+"/.well-known/agent-card.json")
		require.NoError(t, err)
		assert.Equal(t, "Weather Agent", card.Name)
		assert.Len(t, card.Skills, 2)
		assert.Len(t, card.SupportedInterfaces, 2)
	})
	t.Run("legacy 0.3 card", func(t *testing.T) {
		ts := serve(t, body(legacyCard))
		card, err := a2acard.Fetch(ctx, client, ts.URL)
		require.NoError(t, err)
		require.Len(t, card.SupportedInterfaces, 1)
		assert.Equal(t, "https://old.example/a2a", card.SupportedInterfaces[0].URL)
		assert.Equal(t, a2a.TransportProtocolJSONRPC, card.SupportedInterfaces[0].ProtocolBinding)
	})

	cases := []struct {
		name string
		h    http.HandlerFunc
		want error
	}{
		{"garbage", body("<html>not json</html>"), a2acard.ErrInvalidCard},
		{"wrong JSON", body(`{"name": 5}`), a2acard.ErrInvalidCard},
		{"huge", body(`{"description": "` + strings.Repeat("x", a2acard.MaxCardBytes) + `"}`), a2acard.ErrInvalidCard},
		{"not found", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, a2acard.ErrFetch},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest", http.StatusFound)
		}, a2acard.ErrFetch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := serve(t, tc.h)
			_, err := a2acard.Fetch(ctx, client, ts.URL)
			require.ErrorIs(t, err, tc.want)
		})
	}

	t.Run("bad URL", func(t *testing.T) {
		_, err := a2acard.Fetch(ctx, client, "file:///etc/passwd")
		require.ErrorIs(t, err, a2acard.ErrFetch)
	})
	t.Run("nothing listens", func(t *testing.T) {
		ts := serve(t, func(w http.ResponseWriter, r *http.Request) {})
		ts.Close()
		_, err := a2acard.Fetch(ctx, client, ts.URL)
		require.ErrorIs(t, err, a2acard.ErrFetch)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause is kept")
		_, msg, _ := apierr.Describe(err)
		assert.Equal(t, "cannot fetch the agent card: connection refused", msg)
		assert.NotContains(t, err.Error(), "127.0.0.1", "no address of the mesh's network")
	})
	t.Run("refused by the policy", func(t *testing.T) {
		strict, err := netguard.NewPolicy(netguard.Options{})
		require.NoError(t, err)
		var hits int
		ts := serve(t, func(w http.ResponseWriter, r *http.Request) { hits++ })
		_, err = a2acard.Fetch(ctx, strict.NewClient(nil), ts.URL)
		require.ErrorIs(t, err, a2acard.ErrFetch)
		require.ErrorIs(t, err, netguard.ErrNotAllowed)
		assert.Zero(t, hits)
	})
}

func decode(t *testing.T, s string) *a2a.AgentCard {
	t.Helper()
	card, err := a2acard.Parse([]byte(s))
	require.NoError(t, err)
	return card
}

func TestToAgent(t *testing.T) {
	a, err := a2acard.ToAgent(decode(t, validCard), "https://weather.example/.well-known/agent-card.json")
	require.NoError(t, err)
	assert.Equal(t, "weather-agent", a.Name)
	assert.Equal(t, "Weather Agent", a.DisplayName)
	assert.Equal(t, "Forecasts the weather.\n\nSkills:\n- Forecast: Forecasts for a city.\n- Alerts: Storm alerts.", a.Description)
	assert.Equal(t, []string{"Forecast", "Alerts", "weather", "storms"}, a.Capabilities, "forecast is a duplicate of Forecast")
	assert.Equal(t, []string{"Weather in Paris tomorrow?", "Any storm warnings?"}, a.Examples)
	assert.Equal(t, "https://weather.example/rpc", a.Endpoint, "the JSON-RPC interface, resolved against the card URL")
	assert.Equal(t, registry.ProtocolA2A, a.Protocol)
	assert.Equal(t, map[string]string{
		"a2a.version": "1.0", "a2a.agent-version": "2.1.0",
		"a2a.card-url": "https://weather.example/.well-known/agent-card.json",
	}, a.Labels)
	a.Normalize()
	require.NoError(t, a.Validate(nil))
}

func TestToAgentCases(t *testing.T) {
	iface := func(url, binding, version string) []*a2a.AgentInterface {
		return []*a2a.AgentInterface{{URL: url, ProtocolBinding: a2a.TransportProtocol(binding), ProtocolVersion: a2a.ProtocolVersion(version)}}
	}
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	cases := []struct {
		name     string
		card     a2a.AgentCard
		check    func(t *testing.T, a registry.Agent)
		wantErrs string
	}{
		{name: "name sanitised", card: a2a.AgentCard{Name: "  __Mein Agent ü!! v2.0 ", Description: "d", SupportedInterfaces: iface("https://x.example/", "JSONRPC", "1.0")},
			check: func(t *testing.T, a registry.Agent) { assert.Equal(t, "mein-agent-v2.0", a.Name) }},
		{name: "non-ASCII name hashed", card: a2a.AgentCard{Name: "助手", Description: "d", SupportedInterfaces: iface("https://x.example/", "JSONRPC", "1.0")},
			check: func(t *testing.T, a registry.Agent) {
				assert.Regexp(t, `^a2a-[0-9a-f]{12}$`, a.Name)
				assert.Equal(t, "助手", a.DisplayName)
			}},
		{name: "long name cut", card: a2a.AgentCard{Name: strings.Repeat("a", 300), Description: "d", SupportedInterfaces: iface("https://x.example/", "JSONRPC", "1.0")},
			check: func(t *testing.T, a registry.Agent) {
				assert.Len(t, a.Name, registry.MaxNameLen)
				assert.Len(t, a.DisplayName, registry.MaxDisplayNameLen)
			}},
		{name: "1.x interface preferred", card: a2a.AgentCard{Name: "a", Description: "d", SupportedInterfaces: []*a2a.AgentInterface{
			nil,
			{URL: "https://x.example/v03", ProtocolBinding: "jsonrpc", ProtocolVersion: "0.3"},
			{URL: "https://x.example/v1", ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0", Tenant: "acme"},
		}}, check: func(t *testing.T, a registry.Agent) {
			assert.Equal(t, "https://x.example/v1", a.Endpoint)
			assert.Equal(t, "acme", a.Labels["a2a.tenant"])
		}},
		{name: "bounded lists", card: a2a.AgentCard{Name: "a", SupportedInterfaces: iface("https://x.example/", "JSONRPC", "1.0"),
			Skills: []a2a.AgentSkill{{ID: "s", Tags: many(100, func(i int) string { return fmt.Sprintf("%03d", i) + strings.Repeat("t", 200) }),
				Examples: many(300, func(i int) string { return fmt.Sprintf("%03d", i) + strings.Repeat("e", 600) })}}},
			check: func(t *testing.T, a registry.Agent) {
				assert.Len(t, a.Capabilities, registry.MaxCapabilities)
				assert.Len(t, a.Examples, registry.MaxExamples)
				assert.Len(t, a.Capabilities[1], registry.MaxCapabilityLen)
				assert.Len(t, a.Examples[0], registry.MaxExampleLen)
				a.Normalize()
				require.NoError(t, a.Validate(nil))
			}},
		{name: "no name", card: a2a.AgentCard{Description: "d", SupportedInterfaces: iface("https://x.example/", "JSONRPC", "1.0")}, wantErrs: "no name"},
		{name: "nothing to discover", card: a2a.AgentCard{Name: "a", SupportedInterfaces: iface("https://x.example/", "JSONRPC", "1.0")}, wantErrs: "neither a description nor skills"},
		{name: "no JSON-RPC", card: a2a.AgentCard{Name: "a", Description: "d", SupportedInterfaces: iface("https://x.example/", "GRPC", "1.0")}, wantErrs: "no JSON-RPC interface"},
		{name: "no interfaces", card: a2a.AgentCard{Name: "a", Description: "d"}, wantErrs: "no JSON-RPC interface"},
		{name: "bad scheme", card: a2a.AgentCard{Name: "a", Description: "d", SupportedInterfaces: iface("ftp://x.example/", "JSONRPC", "1.0")}, wantErrs: "not an http or https URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := a2acard.ToAgent(&tc.card, "https://x.example/.well-known/agent-card.json")
			if tc.wantErrs != "" {
				require.ErrorIs(t, err, a2acard.ErrInvalidCard)
				assert.Contains(t, err.Error(), tc.wantErrs)
				return
			}
			require.NoError(t, err)
			tc.check(t, a)
		})
	}
	_, err := a2acard.ToAgent(nil, "")
	require.ErrorIs(t, err, a2acard.ErrInvalidCard)
}

func TestMeshCard(t *testing.T) {
	card := a2acard.MeshCard("https://mesh.example/", "1.2.3")
	b, err := json.Marshal(card)
	require.NoError(t, err)
	back, err := a2acard.Parse(b)
	require.NoError(t, err, "the card round-trips through the SDK's JSON form")
	assert.Equal(t, "https://mesh.example/a2a", back.SupportedInterfaces[0].URL)
	ids := []string{back.Skills[0].ID, back.Skills[1].ID}
	assert.Equal(t, []string{a2acard.SkillDiscover, a2acard.SkillDelegate}, ids)
	for _, s := range back.Skills {
		assert.NotEmpty(t, s.Description)
		assert.NotEmpty(t, s.Examples)
	}
	a, err := a2acard.ToAgent(back, "https://mesh.example/.well-known/agent-card.json")
	require.NoError(t, err, "the mesh's card is importable")
	assert.Equal(t, "agentmesh", a.Name)
	assert.False(t, errors.Is(err, a2acard.ErrInvalidCard))
}
