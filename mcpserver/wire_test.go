package mcpserver_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/wire.golden from the server's replies")

// wireCalls are the tools/call arguments of mesh_discover whose replies
// testdata/wire.golden holds: answers with every kind of field, and
// arguments the input schema refuses (each refusal has its own text).
var wireCalls = []string{
	`{"query":"budget"}`,
	`{"query":"budget forecast","limit":1}`,
	`{"query":"budget","limit":100}`,
	`{"query":"budget","labels":{"team":"fin"}}`,
	`{"query":"budget","labels":{}}`,
	`{"query":"budget","requiredResources":["https://erp.example.com/finance/q3"]}`,
	`{"query":"budget","requiredResources":[]}`,
	`{"query":"nothing matches this"}`,
	`{"query":"BUDGET é ✓ <&>"}`,
	`{"query":"budget","limit":10.0}`,
	`{"query":"budget","limit":1e1}`,
	`{"query":"budget","query":"forecast"}`,
	`{"query":"bud\u0067et"}`,
	`{"query":"!!!"}`,
	`{}`,
	`{"query":""}`,
	`{"query":"` + strings.Repeat("a", discovery.MaxQueryRunes+1) + `"}`,
	`{"query":5}`,
	`{"query":null}`,
	`{"query":"budget","limit":0}`,
	`{"query":"budget","limit":101}`,
	`{"query":"budget","limit":1.5}`,
	`{"query":"budget","limit":"3"}`,
	`{"query":"budget","limit":null}`,
	`{"query":"budget","labels":{"team":5}}`,
	`{"query":"budget","labels":{"team":null}}`,
	`{"query":"budget","labels":null}`,
	`{"query":"budget","labels":[]}`,
	`{"query":"budget","requiredResources":[""]}`,
	`{"query":"budget","requiredResources":[5]}`,
	`{"query":"budget","requiredResources":"x"}`,
	`{"query":"budget","requiredResources":null}`,
	`{"query":"budget","extra":1}`,
	`{"Query":"budget"}`,
	`[]`,
	`"budget"`,
	`5`,
}

// wireMesh is a mesh whose records are the same on every run: a fixed
// clock and fixed agents, one with every field set and awkward text.
func wireMesh(t *testing.T) (*registry.Registry, *discovery.Engine, *delegation.Client) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	store := memstore.New()
	reg, err := registry.New(ctx, store, &registry.Options{SweepInterval: -1, Now: now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	engine := discovery.New(&discovery.Options{Now: now})
	t.Cleanup(engine.Follow(reg))
	del, err := delegation.New(ctx, reg, store, &delegation.Options{Discovery: engine, PruneInterval: -1, RescanInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = del.Close() })
	threshold := 0.55
	for _, a := range []registry.Agent{
		{
			Name: "full", DisplayName: "Full <Agent> & co", Description: "Budgets, \"quoted\", tab\tand unicode: é ✓ \u2028.",
			Capabilities: []string{"budget", "forecast"}, Examples: []string{"what is the budget?"},
			Resources: []registry.Resource{{URI: "https://erp.example.com/finance/*", Description: "ERP", Access: "read"}},
			Endpoint:  "http://127.0.0.1:9/task", Protocol: registry.ProtocolMCP,
			Auth:                &registry.Auth{Type: registry.AuthBearer, Token: "agent-secret"},
			ConfidenceThreshold: &threshold, ClarificationRequired: true, ClarificationContext: "which team?",
			Labels: map[string]string{"team": "fin", "tier": "gold"},
		},
		{Name: "plain", Description: "Budget numbers.", Capabilities: []string{"budget"}, Endpoint: "http://127.0.0.1:9/plain"},
		{Name: "other", Description: "Forecasts the weather.", Capabilities: []string{"weather forecast"}, Endpoint: "http://127.0.0.1:9/other"},
	} {
		_, _, err := reg.Register(ctx, a)
		require.NoError(t, err)
	}
	return reg, engine, del
}

// The replies to mesh_discover and tools/list are byte for byte those of
// testdata/wire.golden, written by the server before its tool path was
// made faster (go test -run TestWireUnchanged -update-wire rewrites it):
// the same answers, the same refusals of bad arguments with the same
// text, whether the engine encodes the result or the tool builds it from
// discovery.Result values.
func TestWireUnchanged(t *testing.T) {
	reg, engine, del := wireMesh(t)
	var got []byte
	for _, search := range []discovery.Searcher{engine, plainSearcher{engine}} {
		srv, err := mcpserver.New(reg, search, del, nil)
		require.NoError(t, err)
		c := startRaw(t, srv)
		got = append(got, c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`))...)
		for i, args := range wireCalls {
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mesh_discover","arguments":%s}}`, i+3, args)
			got = append(got, c.roundTrip(t, []byte(msg))...)
		}
		got = append(got, c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"mesh_discover"}}`))...)
		// Clients of the newest protocol versions get results marked
		// with a resultType.
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			c := startRawVersion(t, srv, v)
			for i, args := range []string{`{"query":"budget"}`, `{"query":""}`} {
				msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mesh_discover","arguments":%s}}`, i+100, args)
				got = append(got, c.roundTrip(t, []byte(msg))...)
			}
		}
	}
	path := filepath.Join("testdata", "wire.golden")
	if *updateWire {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	gotLines, wantLines := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	require.Len(t, gotLines, len(wantLines))
	for i := range wantLines {
		require.Equal(t, string(wantLines[i]), string(gotLines[i]), "reply %d", i)
	}
}

// Arguments given as JSON null are read as absent, for every tool (the
// SDK would apply the schema's defaults to a nil map and panic, ending
// the process): the reply is the one to a call without arguments, and the
// session goes on.
func TestNullArguments(t *testing.T) {
	reg, engine, del := wireMesh(t)
	srv, err := mcpserver.New(reg, engine, del, nil)
	require.NoError(t, err)
	c := startRaw(t, srv)
	for _, tool := range []string{mcpserver.ToolDiscover, mcpserver.ToolDelegate, mcpserver.ToolListAgents} {
		absent := c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`"}}`))
		null := c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":null}}`))
		require.Equal(t, string(absent), string(null), tool)
	}
	require.Contains(t, string(c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"budget"}}}`))), `\"name\":\"full\"`)
}
