package mcpserver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
)

// badArgs is a table of calls that must fail with a code.
type badArgs struct {
	name string
	args any
	code string
	// contains are substrings the error text must have (naming the
	// field, say).
	contains []string
}

func (e *env) checkBad(tool string, cases []badArgs) {
	e.t.Helper()
	for _, c := range cases {
		e.t.Run(c.name, func(t *testing.T) {
			txt := fails(t, call(t, e.cs, tool, c.args), c.code)
			for _, s := range c.contains {
				assert.Contains(t, txt, s)
			}
		})
	}
}

func registerArgs(name, endpoint string) map[string]any {
	return map[string]any{"name": name, "description": "Budgets and cost centers", "capabilities": []string{"budget"}, "endpoint": endpoint}
}

// mesh_register takes every routing field of the agent record, with the
// registry's rules: at most one default agent, whose threshold is 0.
func TestRegisterRoutingFields(t *testing.T) {
	e := newEnv(t, nil)
	args := registerArgs("helpdesk", e.urls["finance"])
	args["isDefault"] = true
	args["confidenceThreshold"] = 0.9 // the default's is always 0
	var got mcpserver.RegisterResult
	ok(t, e.call(mcpserver.ToolRegister, args), &got)
	assert.True(t, got.Agent.IsDefault)
	require.NotNil(t, got.Agent.ConfidenceThreshold)
	assert.Zero(t, *got.Agent.ConfidenceThreshold)

	args = registerArgs("hr", e.urls["finance"])
	args["confidenceThreshold"] = 0.8
	args["clarificationRequired"] = true
	args["clarificationContext"] = "Is this about leave or payroll?"
	args["examples"] = []string{"how many vacation days do I have"}
	ok(t, e.call(mcpserver.ToolRegister, args), &got)
	stored, err := e.reg.Get(context.Background(), "hr")
	require.NoError(t, err)
	assert.Equal(t, 0.8, stored.Threshold())
	assert.True(t, stored.ClarificationRequired)
	assert.Equal(t, "Is this about leave or payroll?", stored.ClarificationContext)
	assert.False(t, stored.IsDefault)

	e.checkBad(mcpserver.ToolRegister, []badArgs{
		{"a second default", with(registerArgs("other", e.urls["finance"]), "isDefault", true), "conflict", []string{"default"}},
		{"threshold above 1", with(registerArgs("a", "http://a.example.com"), "confidenceThreshold", 1.5), "invalid_argument", []string{"confidenceThreshold"}},
		{"clarification too long", with(registerArgs("a", "http://a.example.com"), "clarificationContext", strings.Repeat("x", 501)), "invalid_argument", []string{"clarificationContext"}},
	})
}

func TestRegister(t *testing.T) {
	e := newEnv(t, nil, registry.Agent{Name: "hr", Description: "file agent", Capabilities: []string{"hr"}, Endpoint: "http://127.0.0.1:9/task", Source: registry.SourceFile})

	args := registerArgs("finance", e.urls["finance"])
	args["auth"] = map[string]any{"type": "bearer", "token": "s3cret"}
	args["labels"] = map[string]string{"team": "finance"}
	res := e.call(mcpserver.ToolRegister, args)
	var first mcpserver.RegisterResult
	ok(t, res, &first)
	assert.True(t, first.Created)
	assert.Equal(t, "finance", first.Agent.Name)
	assert.Equal(t, "finance", first.Agent.DisplayName, "defaults to the name")
	assert.Equal(t, "http", first.Agent.Protocol, "defaults to http")
	assert.Equal(t, "api", first.Agent.Source)
	require.NotNil(t, first.Agent.Auth)
	assert.Equal(t, "bearer", first.Agent.Auth.Type)
	assert.NotContains(t, text(res), "s3cret", "the token is write-only")
	assert.False(t, first.Agent.RegisteredAt.IsZero())

	// The agent is stored, token included, and discoverable at once.
	a, err := e.reg.Get(context.Background(), "finance")
	require.NoError(t, err)
	assert.Equal(t, []string{"budget"}, a.Capabilities)
	var found mcpserver.DiscoverResult
	ok(t, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget"}), &found)
	require.Len(t, found.Results, 1)

	// Re-registering replaces the whole record and keeps registeredAt.
	args = registerArgs("finance", e.urls["finance"])
	args["description"] = "Only budgets now"
	var second mcpserver.RegisterResult
	ok(t, e.call(mcpserver.ToolRegister, args), &second)
	assert.False(t, second.Created)
	assert.Equal(t, "Only budgets now", second.Agent.Description)
	assert.Nil(t, second.Agent.Auth, "replaced, not merged")
	assert.Nil(t, second.Agent.Labels)
	assert.True(t, second.Agent.RegisteredAt.Equal(first.Agent.RegisteredAt))

	long := strings.Repeat("x", 129)
	e.checkBad(mcpserver.ToolRegister, []badArgs{
		{"no arguments", map[string]any{}, "invalid_argument", []string{"name", "description", "capabilities", "endpoint"}},
		{"missing endpoint", map[string]any{"name": "a", "description": "d", "capabilities": []string{}}, "invalid_argument", []string{"endpoint"}},
		{"name wrong type", map[string]any{"name": 3, "description": "d", "capabilities": []string{}, "endpoint": "http://a.example.com"}, "invalid_argument", []string{"name", "string"}},
		{"capabilities wrong type", map[string]any{"name": "a", "description": "d", "capabilities": "budget", "endpoint": "http://a.example.com"}, "invalid_argument", []string{"capabilities"}},
		{"unknown field", with(registerArgs("a", "http://a.example.com"), "isDefualt", true), "invalid_argument", []string{"isDefualt"}},
		{"bad name", registerArgs("-bad name", "http://a.example.com"), "invalid_argument", []string{"name"}},
		{"name too long", registerArgs(long, "http://a.example.com"), "invalid_argument", []string{"name"}},
		{"inprocess refused", with(registerArgs("a", "http://a.example.com"), "protocol", "inprocess"), "invalid_argument", []string{"protocol"}},
		{"unknown protocol", with(registerArgs("a", "http://a.example.com"), "protocol", "grpc"), "invalid_argument", []string{"protocol"}},
		{"ttl out of range", with(registerArgs("a", "http://a.example.com"), "ttlSeconds", 100000), "invalid_argument", []string{"ttlSeconds"}},
		{"ttl below the minimum", with(registerArgs("a", "http://a.example.com"), "ttlSeconds", 3), "invalid_argument", []string{"ttlSeconds"}},
		{"bad resource access", with(registerArgs("a", "http://a.example.com"), "resources", []any{map[string]any{"uri": "https://x.example.com", "access": "all"}}), "invalid_argument", []string{"resources[].access: enum"}},
		{"resource without uri", with(registerArgs("a", "http://a.example.com"), "resources", []any{map[string]any{"access": "read"}}), "invalid_argument", []string{"resources[]", "uri"}},
		{"bad auth type", with(registerArgs("a", "http://a.example.com"), "auth", map[string]any{"type": "basic"}), "invalid_argument", []string{"auth"}},
		{"bad label key", with(registerArgs("a", "http://a.example.com"), "labels", map[string]string{"Bad Key": "v"}), "invalid_argument", []string{"labels"}},
		{"relative endpoint", registerArgs("a", "/task"), "invalid_argument", []string{"endpoint"}},
		{"ftp endpoint", registerArgs("a", "ftp://a.example.com/task"), "endpoint_not_allowed", []string{"endpoint"}},
		{"empty description and capabilities", map[string]any{"name": "a", "description": "", "capabilities": []string{}, "endpoint": "http://a.example.com"}, "invalid_argument", []string{"description"}},
		{"every problem at once", map[string]any{"name": "a", "description": "", "capabilities": []string{}, "endpoint": "ftp://a.example.com"}, "invalid_argument", []string{"description", "endpoint"}},
		{"metadata endpoint refused", registerArgs("a", "http://169.254.169.254/latest"), "endpoint_not_allowed", []string{"endpoint"}},
		{"file-managed agent", registerArgs("hr", "http://hr.example.com/task"), "managed_by_file", nil},
	})

	// Nothing was stored by the refused calls.
	_, err = e.reg.Get(context.Background(), "a")
	require.ErrorIs(t, err, registry.ErrNotFound)
}

func with(m map[string]any, k string, v any) map[string]any {
	c := map[string]any{}
	for key, val := range m {
		c[key] = val
	}
	c[k] = v
	return c
}

func TestDiscover(t *testing.T) {
	e := newEnv(t, nil)
	e.register("finance", "Budgets and cost centers for every team", "budget", "cost-center")
	e.register("reports", "Writes quarterly reports, including budget summaries", "reports")
	e.register("plain", "Answers questions in plain text", "text")
	_, _, err := e.reg.Register(context.Background(), registry.Agent{
		Name: "erp", Description: "Budget lookups in the ERP", Capabilities: []string{"budget"}, Endpoint: "http://127.0.0.1:9/task",
		Resources: []registry.Resource{{URI: "https://erp.example.com/finance/*", Access: "read"}}, Labels: map[string]string{"team": "erp"},
	})
	require.NoError(t, err)

	var res mcpserver.DiscoverResult
	ok(t, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget for engineering"}), &res)
	require.Len(t, res.Results, 3)
	names := []string{}
	for _, r := range res.Results {
		names = append(names, r.Agent.Name)
		assert.Greater(t, r.Score, 0.0)
		assert.LessOrEqual(t, r.Score, 1.0)
		assert.Contains(t, r.MatchedTerms, "budget")
		assert.NotNil(t, r.MatchedResources)
	}
	assert.NotContains(t, names, "plain")
	assert.Equal(t, []string{"budget"}, res.Results[0].MatchedCapabilities)
	assert.GreaterOrEqual(t, res.Results[0].Score, res.Results[1].Score, "best first")

	ok(t, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget", "limit": 1}), &res)
	assert.Len(t, res.Results, 1)
	ok(t, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget", "labels": map[string]string{"team": "erp"}}), &res)
	require.Len(t, res.Results, 1)
	assert.Equal(t, "erp", res.Results[0].Agent.Name)
	ok(t, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget", "requiredResources": []string{"https://erp.example.com/finance/q3"}}), &res)
	require.Len(t, res.Results, 1)
	assert.Equal(t, "erp", res.Results[0].Agent.Name)
	assert.Equal(t, []mcpserver.Resource{{URI: "https://erp.example.com/finance/*", Access: "read"}}, res.Results[0].MatchedResources)

	// No match is an empty list, not an error.
	res2 := e.call(mcpserver.ToolDiscover, map[string]any{"query": "astronomy"})
	ok(t, res2, &res)
	assert.Empty(t, res.Results)
	assert.JSONEq(t, `{"results":[]}`, text(res2))

	e.checkBad(mcpserver.ToolDiscover, []badArgs{
		{"missing query", map[string]any{}, "invalid_argument", []string{"query"}},
		{"empty query", map[string]any{"query": ""}, "invalid_argument", []string{"query"}},
		{"query without words", map[string]any{"query": " ?! "}, "invalid_argument", []string{"query"}},
		{"query wrong type", map[string]any{"query": []string{"budget"}}, "invalid_argument", []string{"query"}},
		{"limit zero", map[string]any{"query": "budget", "limit": 0}, "invalid_argument", []string{"limit"}},
		{"limit too large", map[string]any{"query": "budget", "limit": 101}, "invalid_argument", []string{"limit"}},
		{"limit not an integer", map[string]any{"query": "budget", "limit": 1.5}, "invalid_argument", []string{"limit"}},
		{"labels wrong type", map[string]any{"query": "budget", "labels": "team=erp"}, "invalid_argument", []string{"labels"}},
		{"unknown field", map[string]any{"query": "budget", "scorer": "bm25"}, "invalid_argument", []string{"scorer"}},
	})
}

func TestUnregister(t *testing.T) {
	e := newEnv(t, nil, registry.Agent{Name: "hr", Description: "file agent", Capabilities: []string{"hr"}, Endpoint: "http://127.0.0.1:9/task", Source: registry.SourceFile})
	e.register("finance", "Budgets", "budget")

	var out mcpserver.UnregisterResult
	ok(t, e.call(mcpserver.ToolUnregister, map[string]any{"name": "finance"}), &out)
	assert.Equal(t, mcpserver.UnregisterResult{Name: "finance", Unregistered: true}, out)
	_, err := e.reg.Get(context.Background(), "finance")
	require.ErrorIs(t, err, registry.ErrNotFound)

	// A second call changes nothing and says so.
	txt := fails(t, e.call(mcpserver.ToolUnregister, map[string]any{"name": "finance"}), "not_found")
	assert.Equal(t, `not_found: no agent named "finance"`, txt)
	// Delegating to it now fails with not_found.
	fails(t, e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "finance", "task": "x"}), "not_found")

	e.checkBad(mcpserver.ToolUnregister, []badArgs{
		{"missing name", map[string]any{}, "invalid_argument", []string{"name"}},
		{"empty name", map[string]any{"name": ""}, "invalid_argument", []string{"name"}},
		{"wrong type", map[string]any{"name": true}, "invalid_argument", []string{"name"}},
		{"unknown field", map[string]any{"name": "x", "force": true}, "invalid_argument", []string{"force"}},
		{"file-managed agent", map[string]any{"name": "hr"}, "managed_by_file", nil},
	})
	_, err = e.reg.Get(context.Background(), "hr")
	require.NoError(t, err, "the file agent is still there")
}

func TestDelegate(t *testing.T) {
	e := newEnv(t, nil)
	e.register("finance", "Budgets and cost centers", "budget")
	e.register("flaky", "Always fails", "chaos")
	e.register("slow", "Takes forever", "patience")
	e.register("plain", "Plain text answers", "text")

	t.Run("sync by name", func(t *testing.T) {
		var out mcpserver.DelegateResult
		ok(t, e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "finance", "task": "Budget for Engineering?"}), &out)
		assert.True(t, out.Success)
		assert.Equal(t, "completed", out.Status)
		assert.Equal(t, "finance", out.TargetAgent)
		assert.Equal(t, map[string]any{"budget": 1200000.0, "costCenter": "ENG-42"}, out.Result)
		assert.NotEmpty(t, out.ID)
		assert.Empty(t, out.Code)
	})
	t.Run("by query", func(t *testing.T) {
		var out mcpserver.DelegateResult
		ok(t, e.call(mcpserver.ToolDelegate, map[string]any{"query": "cost center budget", "task": "Budget?"}), &out)
		assert.Equal(t, "finance", out.TargetAgent)
		assert.True(t, out.Success)
	})
	t.Run("string result", func(t *testing.T) {
		var out mcpserver.DelegateResult
		ok(t, e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "plain", "task": "hi"}), &out)
		assert.Equal(t, "just text", out.Result)
	})
	t.Run("context as an object and as a JSON string", func(t *testing.T) {
		for _, c := range []any{map[string]any{"customer": "acme", "depth": 1}, `{"customer": "acme", "depth": 1}`, ""} {
			var out mcpserver.DelegateResult
			ok(t, e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "finance", "task": "x", "context": c}), &out)
			rec, err := e.del.Get(context.Background(), out.ID)
			require.NoError(t, err)
			if c == "" {
				assert.Equal(t, 1, rec.Depth)
			} else {
				assert.Equal(t, 2, rec.Depth, "the caller's depth was read")
			}
		}
	})
	t.Run("failed delegation is a tool error with the record", func(t *testing.T) {
		res := e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "flaky", "task": "fail please"})
		txt := fails(t, res, "agent_error")
		assert.Contains(t, txt, "agent returned 500: boom")
		assert.Contains(t, txt, `"status":"failed"`, "the record is in the text")
		var out mcpserver.DelegateResult
		decode(t, res.StructuredContent, &out)
		assert.False(t, out.Success)
		assert.Equal(t, "failed", out.Status)
		assert.Equal(t, "agent_error", out.Code)
		assert.Contains(t, txt, out.ID)
	})
	t.Run("timeout", func(t *testing.T) {
		res := e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "slow", "task": "wait", "timeoutMs": 200})
		fails(t, res, "timeout")
		var out mcpserver.DelegateResult
		decode(t, res.StructuredContent, &out)
		assert.Equal(t, "timeout", out.Status)
	})

	e.checkBad(mcpserver.ToolDelegate, []badArgs{
		{"missing task", map[string]any{"targetName": "finance"}, "invalid_argument", []string{"task"}},
		{"empty task", map[string]any{"targetName": "finance", "task": ""}, "invalid_argument", []string{"task"}},
		{"neither target nor query", map[string]any{"task": "x"}, "invalid_argument", []string{"targetName", "query"}},
		{"both target and query", map[string]any{"targetName": "finance", "query": "budget", "task": "x"}, "invalid_argument", []string{"targetName", "query"}},
		{"task wrong type", map[string]any{"targetName": "finance", "task": 42}, "invalid_argument", []string{"task"}},
		{"async wrong type", map[string]any{"targetName": "finance", "task": "x", "async": "yes"}, "invalid_argument", []string{"async"}},
		{"context number", map[string]any{"targetName": "finance", "task": "x", "context": 5}, "invalid_argument", []string{"context: must be of type object or string, not integer"}},
		{"context null", map[string]any{"targetName": "finance", "task": "x", "context": nil}, "invalid_argument", []string{"context: must be of type object or string, not null"}},
		{"context array", map[string]any{"targetName": "finance", "task": "x", "context": []any{1}}, "invalid_argument", []string{"context"}},
		{"context string not JSON", map[string]any{"targetName": "finance", "task": "x", "context": "customer=acme"}, "invalid_argument", []string{"context"}},
		{"context string not an object", map[string]any{"targetName": "finance", "task": "x", "context": "[1,2]"}, "invalid_argument", []string{"context"}},
		{"bad depth type", map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"depth": "deep"}}, "invalid_argument", []string{"depth"}},
		{"timeout zero", map[string]any{"targetName": "finance", "task": "x", "timeoutMs": 0}, "invalid_argument", []string{"timeoutMs"}},
		{"timeout over an hour", map[string]any{"targetName": "finance", "task": "x", "timeoutMs": 3600001}, "invalid_argument", []string{"timeoutMs"}},
		{"unknown field", map[string]any{"targetName": "finance", "task": "x", "priority": "high"}, "invalid_argument", []string{"priority"}},
		{"unknown agent", map[string]any{"targetName": "nobody", "task": "x"}, "not_found", []string{`"nobody"`}},
		{"no match", map[string]any{"query": "astronomy telescopes", "task": "x"}, "no_match", nil},
		{"depth exceeded", map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"depth": 5}}, "depth_exceeded", []string{"depth"}},
		{"cycle", map[string]any{"targetName": "finance", "task": "x", "context": `{"depth": 1, "chain": ["finance"]}`}, "delegation_cycle", nil},
		{"source is target", map[string]any{"targetName": "finance", "task": "x", "sourceAgent": "finance"}, "delegation_cycle", nil},
		{"resource not covered", map[string]any{"targetName": "finance", "task": "x", "requiredResources": []string{"https://erp.example.com/x"}}, "resource_not_covered", nil},
	})
}

func TestAsyncDelegation(t *testing.T) {
	e := newEnv(t, nil)
	e.register("reports", "Writes quarterly reports", "reports")

	var acc mcpserver.DelegateResult
	ok(t, e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "reports", "task": "Write the Q3 report", "async": true}), &acc)
	assert.Equal(t, "accepted", acc.Status)
	assert.True(t, acc.Success)
	assert.Nil(t, acc.Result)

	// Without waiting: the record as it is.
	var rec mcpserver.Delegation
	ok(t, e.call(mcpserver.ToolGetDelegation, map[string]any{"id": acc.ID}), &rec)
	assert.Equal(t, "accepted", rec.Status)
	assert.Equal(t, "Write the Q3 report", rec.Task)
	assert.True(t, rec.Async)
	assert.NotNil(t, rec.Deadline)

	// A wait that runs out answers with the record, still accepted.
	start := time.Now()
	ok(t, e.call(mcpserver.ToolGetDelegation, map[string]any{"id": acc.ID, "waitSeconds": 1}), &rec)
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "it waited")
	assert.Equal(t, "accepted", rec.Status)

	// The agent calls back while the client is waiting.
	go func() {
		time.Sleep(100 * time.Millisecond)
		e.releaseAsync()
	}()
	start = time.Now()
	ok(t, e.call(mcpserver.ToolGetDelegation, map[string]any{"id": acc.ID, "waitSeconds": 30}), &rec)
	assert.Less(t, time.Since(start), 10*time.Second, "woken by the callback")
	assert.Equal(t, "completed", rec.Status)
	assert.True(t, rec.Success)
	assert.Equal(t, "Q3 report: 14 pages", rec.Result)
	assert.NotNil(t, rec.FinishedAt)
	assert.Equal(t, "reports", rec.TargetAgent)

	e.checkBad(mcpserver.ToolGetDelegation, []badArgs{
		{"missing id", map[string]any{}, "invalid_argument", []string{"id"}},
		{"empty id", map[string]any{"id": ""}, "invalid_argument", []string{"id"}},
		{"unknown id", map[string]any{"id": "00000000-0000-0000-0000-000000000000"}, "not_found", []string{"00000000-0000-0000-0000-000000000000"}},
		{"unknown id while waiting", map[string]any{"id": "nope", "waitSeconds": 1}, "not_found", nil},
		{"wait too long", map[string]any{"id": acc.ID, "waitSeconds": 61}, "invalid_argument", []string{"waitSeconds"}},
		{"negative wait", map[string]any{"id": acc.ID, "waitSeconds": -1}, "invalid_argument", []string{"waitSeconds"}},
		{"wait wrong type", map[string]any{"id": acc.ID, "waitSeconds": "10s"}, "invalid_argument", []string{"waitSeconds"}},
		{"unknown field", map[string]any{"id": acc.ID, "wait": 10}, "invalid_argument", []string{"wait"}},
	})
}

func TestGetFailedDelegationIsNotAToolError(t *testing.T) {
	e := newEnv(t, nil)
	e.register("flaky", "Always fails", "chaos")
	res := e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "flaky", "task": "x"})
	var out mcpserver.DelegateResult
	decode(t, res.StructuredContent, &out)

	var rec mcpserver.Delegation
	ok(t, e.call(mcpserver.ToolGetDelegation, map[string]any{"id": out.ID, "waitSeconds": 5}), &rec)
	assert.Equal(t, "failed", rec.Status)
	assert.False(t, rec.Success)
	assert.Equal(t, "agent_error", rec.Code)
	assert.Contains(t, rec.Error, "boom")
	assert.Equal(t, 1, rec.Attempts)
}

func TestListAgents(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range []string{"delta", "alpha", "charlie", "bravo"} {
		e.register(n, n+" agent", n)
	}
	_, _, err := e.reg.Register(context.Background(), registry.Agent{Name: "echo", Description: "labelled", Capabilities: []string{"echo"}, Endpoint: "http://127.0.0.1:9/task", Labels: map[string]string{"team": "a=b"}})
	require.NoError(t, err)

	var all mcpserver.ListAgentsResult
	res := e.call(mcpserver.ToolListAgents, nil)
	ok(t, res, &all)
	require.Len(t, all.Agents, 5)
	assert.Empty(t, all.NextCursor)
	assert.NotContains(t, text(res), "nextCursor", "absent on the last page")

	// Paging with the cursor visits every agent once, in name order.
	var names []string
	cursor := ""
	for range 10 {
		args := map[string]any{"limit": 2}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var page mcpserver.ListAgentsResult
		ok(t, e.call(mcpserver.ToolListAgents, args), &page)
		assert.LessOrEqual(t, len(page.Agents), 2)
		for _, a := range page.Agents {
			names = append(names, a.Name)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	assert.Equal(t, []string{"alpha", "bravo", "charlie", "delta", "echo"}, names)

	// The label value may itself contain "=".
	var labelled mcpserver.ListAgentsResult
	ok(t, e.call(mcpserver.ToolListAgents, map[string]any{"label": "team=a=b"}), &labelled)
	require.Len(t, labelled.Agents, 1)
	assert.Equal(t, "echo", labelled.Agents[0].Name)

	e.checkBad(mcpserver.ToolListAgents, []badArgs{
		{"label without =", map[string]any{"label": "team"}, "invalid_argument", []string{"label"}},
		{"label without key", map[string]any{"label": "=x"}, "invalid_argument", []string{"label"}},
		{"bad cursor", map[string]any{"cursor": "not-a-cursor"}, "invalid_argument", []string{"cursor"}},
		{"limit zero", map[string]any{"limit": 0}, "invalid_argument", []string{"limit"}},
		{"limit too large", map[string]any{"limit": 1001}, "invalid_argument", []string{"limit"}},
		{"limit wrong type", map[string]any{"limit": "10"}, "invalid_argument", []string{"limit"}},
		{"unknown field", map[string]any{"offset": 2}, "invalid_argument", []string{"offset"}},
	})
}

// An unknown tool is a protocol error, not a tool result.
func TestUnknownToolIsAProtocolError(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mesh_nope", Arguments: map[string]any{}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mesh_nope")
}

// failingRegistry, failingSearcher and failingDelegations fail like a
// broken store would, with text that must never reach a client.
type failingRegistry struct{ err error }

func (f failingRegistry) Register(context.Context, registry.Agent) (registry.Agent, bool, error) {
	return registry.Agent{}, false, f.err
}
func (f failingRegistry) List(context.Context, registry.ListOptions) (registry.Page, error) {
	return registry.Page{}, f.err
}
func (f failingRegistry) Delete(context.Context, string) error { return f.err }

type panickingSearcher struct{}

func (panickingSearcher) Search(string, *discovery.Query) ([]discovery.Result, error) {
	panic("index corrupted at 0xdeadbeef")
}

type failingDelegations struct{ err error }

func (f failingDelegations) Delegate(context.Context, delegation.Request) (delegation.Record, error) {
	return delegation.Record{}, f.err
}
func (f failingDelegations) Get(context.Context, string) (delegation.Record, error) {
	return delegation.Record{}, f.err
}
func (f failingDelegations) Wait(context.Context, string) (delegation.Record, error) {
	return delegation.Record{}, f.err
}

func TestInternalErrorsAreNotLeaked(t *testing.T) {
	secret := errors.New("bolt: write /var/lib/agentmesh/mesh.db: input/output error")
	var logs bytes.Buffer
	srv, err := mcpserver.New(failingRegistry{secret}, panickingSearcher{}, failingDelegations{secret}, &mcpserver.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	cs := connect(t, srv)
	for tool, args := range map[string]any{
		mcpserver.ToolRegister:      registerArgs("a", "http://a.example.com"),
		mcpserver.ToolDiscover:      map[string]any{"query": "budget"},
		mcpserver.ToolUnregister:    map[string]any{"name": "a"},
		mcpserver.ToolDelegate:      map[string]any{"targetName": "a", "task": "x"},
		mcpserver.ToolGetDelegation: map[string]any{"id": "x", "waitSeconds": 1},
		mcpserver.ToolListAgents:    map[string]any{},
	} {
		res := call(t, cs, tool, args)
		txt := fails(t, res, "internal")
		assert.NotContains(t, txt, "mesh.db", tool)
		assert.NotContains(t, txt, "deadbeef", tool)
		assert.Nil(t, res.StructuredContent, tool)
		assert.Contains(t, logs.String(), "tool="+tool, "the cause is logged")
	}
	assert.Contains(t, logs.String(), "input/output error")
	assert.Contains(t, logs.String(), "deadbeef")

	// A closed registry or client is "unavailable", not internal.
	srv, err = mcpserver.New(failingRegistry{registry.ErrClosed}, discovery.New(nil), failingDelegations{delegation.ErrClosed}, nil)
	require.NoError(t, err)
	cs = connect(t, srv)
	fails(t, call(t, cs, mcpserver.ToolListAgents, map[string]any{}), "unavailable")
	fails(t, call(t, cs, mcpserver.ToolDelegate, map[string]any{"targetName": "a", "task": "x"}), "unavailable")
}

func TestAuthorize(t *testing.T) {
	e := newEnv(t, &mcpserver.Options{Authorize: func(ctx context.Context, req *mcp.CallToolRequest) error {
		if mcpserver.RequiredScope(req.Params.Name) != "read" {
			return errors.New("this token may only read")
		}
		return nil
	}})
	e.register("finance", "Budgets", "budget")
	txt := fails(t, e.call(mcpserver.ToolRegister, registerArgs("x", "http://x.example.com")), "permission_denied")
	assert.Equal(t, "permission_denied: this token may only read", txt)
	fails(t, e.call(mcpserver.ToolUnregister, map[string]any{"name": "finance"}), "permission_denied")
	fails(t, e.call(mcpserver.ToolDelegate, map[string]any{"targetName": "finance", "task": "x"}), "permission_denied")
	ok(t, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget"}), &mcpserver.DiscoverResult{})
	ok(t, e.call(mcpserver.ToolListAgents, map[string]any{}), &mcpserver.ListAgentsResult{})
	_, err := e.reg.Get(context.Background(), "finance")
	require.NoError(t, err, "nothing was unregistered")
}

func TestNewNeedsItsCollaborators(t *testing.T) {
	e := newEnv(t, nil)
	_, err := mcpserver.New(nil, e.engine, e.del, nil)
	require.Error(t, err)
	_, err = mcpserver.New(e.reg, nil, e.del, nil)
	require.Error(t, err)
	_, err = mcpserver.New(e.reg, e.engine, nil, nil)
	require.Error(t, err)
	_, err = mcpserver.HTTPHandler(nil, nil)
	require.Error(t, err)
}
