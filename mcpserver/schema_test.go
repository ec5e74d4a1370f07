package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
)

func ptr[T any](v T) *T { return &v }

// The annotations of each tool (docs/MCP.md#tools), with the hints the
// docs leave open set explicitly: read-only tools are also idempotent and
// non-destructive; everything but delegation is closed-world.
var wantAnnotations = map[string]mcp.ToolAnnotations{
	mcpserver.ToolRegister:      {Title: "Register an agent", ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	mcpserver.ToolDiscover:      {Title: "Discover agents", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	mcpserver.ToolUnregister:    {Title: "Unregister an agent", ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	mcpserver.ToolDelegate:      {Title: "Delegate a task", ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	mcpserver.ToolGetDelegation: {Title: "Get a delegation", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	mcpserver.ToolListAgents:    {Title: "List agents", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
}

// Required and optional arguments of each tool (docs/MCP.md#tools), plus
// displayName, requiredResources and sourceAgent, which the HTTP API also
// takes.
var wantArgs = map[string]struct{ required, optional []string }{
	mcpserver.ToolRegister:      {[]string{"name", "description", "capabilities", "endpoint"}, []string{"displayName", "protocol", "examples", "resources", "labels", "auth", "ttlSeconds", "isDefault", "confidenceThreshold", "clarificationRequired", "clarificationContext"}},
	mcpserver.ToolDiscover:      {[]string{"query"}, []string{"limit", "labels", "requiredResources"}},
	mcpserver.ToolUnregister:    {[]string{"name"}, nil},
	mcpserver.ToolDelegate:      {[]string{"task"}, []string{"targetName", "query", "context", "requiredResources", "sourceAgent", "async", "timeoutMs"}},
	mcpserver.ToolGetDelegation: {[]string{"id"}, []string{"waitSeconds"}},
	mcpserver.ToolListAgents:    {nil, []string{"label", "limit", "cursor"}},
}

// The top-level result fields of each tool.
var wantResults = map[string]struct{ required, optional []string }{
	mcpserver.ToolRegister:      {[]string{"agent", "created"}, nil},
	mcpserver.ToolDiscover:      {[]string{"results"}, nil},
	mcpserver.ToolUnregister:    {[]string{"name", "unregistered"}, nil},
	mcpserver.ToolDelegate:      {[]string{"id", "targetAgent", "success", "status", "latencyMs"}, []string{"result", "error", "code"}},
	mcpserver.ToolGetDelegation: {[]string{"id", "targetAgent", "task", "status", "success", "latencyMs", "attempts", "depth", "createdAt", "updatedAt"}, []string{"sourceAgent", "result", "error", "code", "async", "needsInput", "response", "finishedAt", "deadline", "principal"}},
	mcpserver.ToolListAgents:    {[]string{"agents"}, []string{"nextCursor"}},
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}
	return tools
}

func TestInitialize(t *testing.T) {
	e := newEnv(t, nil)
	init := e.cs.InitializeResult()
	require.NotNil(t, init)
	assert.Equal(t, "agentmesh", init.ServerInfo.Name)
	assert.Equal(t, buildinfo.Version(), init.ServerInfo.Version)
	assert.Equal(t, mcpserver.DefaultInstructions, init.Instructions)
	for _, tool := range []string{"mesh_discover", "mesh_delegate", "mesh_get_delegation", "waitSeconds", "async"} {
		assert.Contains(t, init.Instructions, tool)
	}
	require.NotNil(t, init.Capabilities.Tools)
	assert.Nil(t, init.Capabilities.Logging, "no logging capability")
	require.NoError(t, e.cs.Ping(context.Background(), nil))

	custom := newEnv(t, &mcpserver.Options{Instructions: "custom"})
	assert.Equal(t, "custom", custom.cs.InitializeResult().Instructions)
}

func TestToolsList(t *testing.T) {
	e := newEnv(t, nil)
	tools := listTools(t, e.cs)
	require.Len(t, tools, 6)
	for name, want := range wantAnnotations {
		tool := tools[name]
		require.NotNil(t, tool, name)
		require.NotNil(t, tool.Annotations, name)
		assert.Equal(t, want, *tool.Annotations, name)
		assert.NotEmpty(t, tool.Title, name)
		assert.Greater(t, len(tool.Description), 300, "%s: a description a model can act on", name)
		assert.NotEmpty(t, mcpserver.RequiredScope(name), name)

		in := schemaMap(t, tool.InputSchema)
		assert.Equal(t, "object", in["type"], name)
		assert.Equal(t, false, in["additionalProperties"], "%s: unknown arguments are rejected", name)
		args := wantArgs[name]
		assert.ElementsMatch(t, args.required, stringsOf(in["required"]), "%s: required arguments", name)
		assert.ElementsMatch(t, append(slices.Clone(args.required), args.optional...), keysOf(in["properties"]), "%s: arguments", name)

		require.NotNil(t, tool.OutputSchema, "%s: output schema", name)
		out := schemaMap(t, tool.OutputSchema)
		assert.Equal(t, "object", out["type"], "%s: output schemas are objects", name)
		results := wantResults[name]
		assert.ElementsMatch(t, results.required, stringsOf(out["required"]), "%s: required results", name)
		assert.ElementsMatch(t, append(slices.Clone(results.required), results.optional...), keysOf(out["properties"]), "%s: results", name)
	}

	// The descriptions say what a model must know.
	for name, phrases := range map[string][]string{
		mcpserver.ToolRegister:      {"replaces", "upsert", "token", "invalid_argument", "endpoint_not_allowed", "managed_by_file", "inprocess"},
		mcpserver.ToolDiscover:      {"Read-only", "best first", "invalid_argument", "mesh_delegate"},
		mcpserver.ToolUnregister:    {"permanently", "no undo", "not_found", "managed_by_file"},
		mcpserver.ToolDelegate:      {"async", "mesh_get_delegation", "not idempotent", "not_found", "no_match", "depth_exceeded", "delegation_cycle", "agent_error", "agent_unavailable", "timeout", "structured content"},
		mcpserver.ToolGetDelegation: {"Read-only", "waitSeconds", "60", "not_found", "completed"},
		mcpserver.ToolListAgents:    {"Read-only", "nextCursor", "cursor", "invalid_argument"},
	} {
		for _, p := range phrases {
			assert.Contains(t, tools[name].Description, p, name)
		}
	}
	assert.Empty(t, mcpserver.RequiredScope("mesh_nope"))
	assert.Equal(t, "route", mcpserver.RequiredScope(mcpserver.ToolRoute))
	assert.Equal(t, "route", mcpserver.RequiredScope(mcpserver.ToolHandleMessage))
	assert.Equal(t, "read", mcpserver.RequiredScope(mcpserver.ToolDiscover))
	assert.Equal(t, "register", mcpserver.RequiredScope(mcpserver.ToolUnregister))
	assert.Equal(t, "delegate", mcpserver.RequiredScope(mcpserver.ToolDelegate))
}

// plainKeywords are the only schema keywords the tools may use: ones that
// every client's validator (Go, TypeScript/Ajv, Python/jsonschema) reads
// the same way. No $schema, $ref, $defs or formats; anyOf only for the
// context argument of mesh_delegate.
var plainKeywords = []string{
	"type", "properties", "required", "additionalProperties", "items", "description", "title",
	"enum", "default", "minimum", "maximum", "minLength", "maxLength", "maxItems", "maxProperties", "pattern", "anyOf",
}

// TestSchemasAreValidAndPlain checks every input and output schema
// against the JSON Schema 2020-12 meta-schema, compiles it with
// jsonschema-go (the validator of the Go SDK), and checks it uses only
// plain keywords and single types: no type unions, which strict Ajv
// refuses; the context argument of mesh_delegate (object or string) is
// the one anyOf.
func TestSchemasAreValidAndPlain(t *testing.T) {
	e := newEnv(t, nil)
	meta := metaSchema(t)
	for name, tool := range listTools(t, e.cs) {
		for kind, s := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			raw, err := json.Marshal(s)
			require.NoError(t, err)
			var instance any
			require.NoError(t, json.Unmarshal(raw, &instance))
			require.NoError(t, meta.Validate(instance), "%s %s schema against the 2020-12 meta-schema", name, kind)

			compile(t, s)
			walkSchema(t, instance, name+" "+kind, func(path string, m map[string]any) {
				for k := range m {
					assert.Contains(t, plainKeywords, k, "%s: keyword %q", path, k)
				}
				if anyOf, ok := m["anyOf"]; ok {
					assert.Equal(t, "mesh_delegate input.context", path, "only context has anyOf")
					assert.Equal(t, []any{map[string]any{"type": "object"}, map[string]any{"type": "string"}}, anyOf)
					return
				}
				switch typ := m["type"].(type) {
				case string:
				case nil:
					// any JSON value: the result of a delegation, the
					// values of workflow_state
					assert.True(t, strings.HasSuffix(path, ".result") || strings.Contains(path, "workflow_state"), "%s has no type", path)
				default:
					t.Errorf("%s: type %v: a union", path, typ)
				}
			})
		}
	}
}

// TestOutputsValidate calls every tool with good arguments (and the
// failing delegation, whose record is structured content too) and
// validates each structured result against the output schema the client
// got from tools/list, as strict clients do.
func TestOutputsValidate(t *testing.T) {
	e := newEnv(t, nil)
	tools := listTools(t, e.cs)
	e.register("flaky", "always fails", "chaos")
	e.register("reports", "writes quarterly reports", "reports")
	e.register("plain", "answers in plain text", "text")

	var reg mcpserver.RegisterResult
	results := map[string][]*mcp.CallToolResult{}
	add := func(name string, res *mcp.CallToolResult) *mcp.CallToolResult {
		results[name] = append(results[name], res)
		return res
	}
	ok(t, add(mcpserver.ToolRegister, e.call(mcpserver.ToolRegister, map[string]any{
		"name": "finance", "displayName": "Finance", "description": "Budgets and cost centers", "capabilities": []string{"budget", "cost-center"},
		"endpoint": e.urls["finance"], "protocol": "http", "examples": []string{"what is the budget of engineering"},
		"resources": []map[string]any{{"uri": "https://erp.example.com/finance/*", "description": "the ERP", "access": "read"}},
		"labels":    map[string]string{"team": "finance"}, "auth": map[string]any{"type": "bearer", "token": "s3cret"}, "ttlSeconds": 60,
	})), &reg)
	add(mcpserver.ToolDiscover, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget", "requiredResources": []string{"https://erp.example.com/finance/q3"}}))
	add(mcpserver.ToolDiscover, e.call(mcpserver.ToolDiscover, map[string]any{"query": "nothing matches this"}))
	add(mcpserver.ToolListAgents, e.call(mcpserver.ToolListAgents, map[string]any{"limit": 1}))
	add(mcpserver.ToolListAgents, e.call(mcpserver.ToolListAgents, map[string]any{"label": "team=nobody"}))
	for _, args := range []map[string]any{
		{"targetName": "finance", "task": "budget?"},
		{"targetName": "plain", "task": "say something"},
		{"targetName": "reports", "task": "Q3", "async": true},
		{"targetName": "flaky", "task": "fail"},
	} {
		res := add(mcpserver.ToolDelegate, e.call(mcpserver.ToolDelegate, args))
		var d mcpserver.DelegateResult
		decode(t, res.StructuredContent, &d)
		add(mcpserver.ToolGetDelegation, e.call(mcpserver.ToolGetDelegation, map[string]any{"id": d.ID}))
	}
	add(mcpserver.ToolUnregister, e.call(mcpserver.ToolUnregister, map[string]any{"name": "plain"}))

	for name, tool := range tools {
		rs := results[name]
		require.NotEmpty(t, rs, name)
		resolved := compile(t, tool.OutputSchema)
		for _, res := range rs {
			require.NotNil(t, res.StructuredContent, "%s: %s", name, text(res))
			raw, err := json.Marshal(res.StructuredContent)
			require.NoError(t, err)
			var v any
			require.NoError(t, json.Unmarshal(raw, &v))
			require.NoError(t, resolved.Validate(v), "%s result %s", name, raw)
			if !res.IsError {
				// The text content is the same JSON, for clients that
				// read only text.
				assert.JSONEq(t, string(raw), text(res), name)
			}
		}
	}

	// The result of a delegation is any JSON value: string, object,
	// array, number, boolean or null all validate.
	for _, name := range []string{mcpserver.ToolDelegate, mcpserver.ToolGetDelegation} {
		resolved := compile(t, tools[name].OutputSchema)
		var base map[string]any
		decode(t, results[name][0].StructuredContent, &base)
		for _, result := range []any{"text", map[string]any{"a": 1.0}, []any{1.0, "x"}, 3.5, true, nil} {
			v := map[string]any{}
			for k, x := range base {
				v[k] = x
			}
			v["result"] = result
			require.NoError(t, resolved.Validate(v), "%s with result %#v", name, result)
		}
	}
}

// TestWireFormsMatchTheLibrary checks that the tools return the same JSON
// as the library types (the HTTP API's wire form): every field of a
// redacted registry.Agent and of a public delegation.Record is in the
// tool's form, under the same name.
func TestWireFormsMatchTheLibrary(t *testing.T) {
	e := newEnv(t, nil)
	th := 0.5
	agent := registry.Agent{
		Name: "full", DisplayName: "Full", Description: "every field", Capabilities: []string{"all"}, Examples: []string{"ex"},
		Resources: []registry.Resource{{URI: "https://x.example.com/*", Description: "d", Access: "read"}},
		Endpoint:  "https://full.example.com/task", Protocol: registry.ProtocolMCP,
		Auth: &registry.Auth{Type: registry.AuthHeader, Token: "t", HeaderName: "X-Key"}, ConfidenceThreshold: &th,
		ClarificationRequired: true, ClarificationContext: "ask", Labels: map[string]string{"a": "b"}, TTLSeconds: 30,
	}
	stored, _, err := e.reg.Register(context.Background(), agent)
	require.NoError(t, err)
	stored.Stale, stored.IsDefault = true, true // set every optional field
	libJSON, err := json.Marshal(stored.Redacted())
	require.NoError(t, err)
	res := e.call(mcpserver.ToolListAgents, map[string]any{})
	var page mcpserver.ListAgentsResult
	ok(t, res, &page)
	require.Len(t, page.Agents, 1)
	page.Agents[0].Stale, page.Agents[0].IsDefault = true, true
	toolJSON, err := json.Marshal(page.Agents[0])
	require.NoError(t, err)
	assert.JSONEq(t, string(libJSON), string(toolJSON))

	now := time.Now().UTC()
	rec := delegation.Record{
		ID: "id", SourceAgent: "s", TargetAgent: "t", Task: "task", Status: delegation.StatusCompleted, Result: json.RawMessage(`{"x":1}`),
		Error: "e", Code: "c", LatencyMs: 1, Attempts: 2, Depth: 3, Async: true, NeedsInput: true,
		Response:  &delegation.AgentResponse{Content: "c", WorkflowComplete: true, WorkflowState: map[string]any{"k": "v"}},
		CreatedAt: now, UpdatedAt: now, FinishedAt: &now, Deadline: &now, SecretHash: []byte("secret"),
		Principal: "team-a",
	}
	recJSON, err := json.Marshal(rec.Public())
	require.NoError(t, err)
	var recKeys map[string]any
	require.NoError(t, json.Unmarshal(recJSON, &recKeys))
	out := schemaMap(t, listTools(t, e.cs)[mcpserver.ToolGetDelegation].OutputSchema)
	for k := range recKeys {
		assert.Contains(t, keysOf(out["properties"]), k, "record field %s", k)
	}
	assert.NotContains(t, keysOf(out["properties"]), "secretHash")
}

// metaSchema resolves the JSON Schema 2020-12 meta-schema from testdata.
func metaSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	load := func(path string) (*jsonschema.Schema, error) {
		b, err := os.ReadFile(filepath.Join("testdata", "draft2020-12", filepath.FromSlash(path)+".json"))
		if err != nil {
			return nil, err
		}
		var s jsonschema.Schema
		return &s, json.Unmarshal(b, &s)
	}
	root, err := load("schema")
	require.NoError(t, err)
	const prefix = "https://json-schema.org/draft/2020-12/"
	resolved, err := root.Resolve(&jsonschema.ResolveOptions{Loader: func(u *url.URL) (*jsonschema.Schema, error) {
		after, ok := strings.CutPrefix(u.String(), prefix)
		if !ok {
			return nil, fmt.Errorf("no meta-schema %s", u)
		}
		return load(after)
	}})
	require.NoError(t, err)
	// The meta-schema rejects what is not a schema.
	require.Error(t, resolved.Validate(map[string]any{"type": 3}))
	require.Error(t, resolved.Validate(map[string]any{"required": "name"}))
	return resolved
}

// compile resolves a schema as a client received it.
func compile(t *testing.T, s any) *jsonschema.Resolved {
	t.Helper()
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	var sch jsonschema.Schema
	require.NoError(t, json.Unmarshal(raw, &sch))
	resolved, err := sch.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	require.NoError(t, err)
	return resolved
}

// walkSchema calls fn on every (sub)schema of s with a dotted path.
func walkSchema(t *testing.T, s any, path string, fn func(path string, m map[string]any)) {
	m, ok := s.(map[string]any)
	if !ok {
		if b, isBool := s.(bool); isBool {
			// false: no additional properties; true: any value (the
			// values of workflow_state)
			assert.True(t, !b || strings.Contains(path, "workflow_state"), "%s: boolean schema %v", path, b)
			return
		}
		t.Errorf("%s: schema is %T", path, s)
		return
	}
	fn(path, m)
	if props, ok := m["properties"].(map[string]any); ok {
		for k, v := range props {
			walkSchema(t, v, path+"."+k, fn)
		}
	}
	if items, ok := m["items"]; ok {
		walkSchema(t, items, path+"[]", fn)
	}
	if ap, ok := m["additionalProperties"]; ok {
		walkSchema(t, ap, path+"{}", fn)
	}
}

func schemaMap(t *testing.T, s any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

func stringsOf(v any) []string {
	var out []string
	for _, x := range asSlice(v) {
		out = append(out, x.(string))
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func keysOf(v any) []string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
