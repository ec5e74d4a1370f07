package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
)

// Tool names.
const (
	ToolRegister      = "mesh_register"
	ToolDiscover      = "mesh_discover"
	ToolUnregister    = "mesh_unregister"
	ToolDelegate      = "mesh_delegate"
	ToolGetDelegation = "mesh_get_delegation"
	ToolListAgents    = "mesh_list_agents"
)

// RequiredScope returns the HTTP API token scope
// (docs/SECURITY.md#tokens-and-scopes) that a call of the named tool
// needs — "read", "register", "delegate" or "route" — or "" for a name
// that is not one of this server's tools. A host mounting
// [HTTPHandler] behind the HTTP API's authentication checks it in
// Options.Authorize.
func RequiredScope(tool string) string {
	switch tool {
	case ToolDiscover, ToolGetDelegation, ToolListAgents:
		return "read"
	case ToolRegister, ToolUnregister:
		return "register"
	case ToolDelegate:
		return "delegate"
	case ToolRoute, ToolHandleMessage:
		return "route"
	}
	return ""
}

// Descriptions tell a model what each tool does to the world, when to use
// it, what it returns and how it fails.
const (
	registerDescription = `Register an agent in the mesh, or replace it: an upsert by name. A new name creates the agent (created: true); an existing name replaces that agent's whole record (created: false; registeredAt is kept), so send every field you want to keep. The agent is discoverable at once.

Use it to put an agent (for example yourself) on the mesh so that others can discover it and delegate tasks to it. protocol is http (the mesh POSTs {delegationId, task, context, callbackUrl?} to the endpoint and reads the JSON reply), mcp (the mesh calls the endpoint's handle_message tool) or a2a; inprocess is reserved to the host process and refused.

Returns {agent, created}: the stored record, without the auth token (write-only, never returned).

Fails with invalid_argument naming every bad field, endpoint_not_allowed (the endpoint policy refuses the URL: link-local or metadata addresses, private addresses unless allowed, non-http schemes, credentials in the URL), managed_by_file (the agent belongs to the mesh's agent directory and cannot be replaced here) or conflict (another agent is the default agent).`

	discoverDescription = `Find the agents that can handle a need, ranked by relevance. Read-only: changes nothing.

Use it before mesh_delegate to choose a target. The query is plain words, matched as whole words (with light stemming) against agent names, capabilities, descriptions and examples. Agents that match no word are not returned, nor are stale agents (TTL lapsed) or agents whose circuit breaker is open.

Returns {results: [{agent, score, coverage, matchedTerms, matchedCapabilities, matchedResources}]}, best first, score in (0, 1]. An empty list means no agent matched: try other words, or mesh_list_agents.

Fails with invalid_argument when the query has no letters or digits, or an option is out of range.`

	unregisterDescription = `Remove an agent from the mesh permanently. It is no longer listed or discoverable, and new delegations to it fail with not_found. There is no undo: registering the name again creates a new record. Delegations already running are not cancelled.

Use it to take an agent (for example yourself) off the mesh when it shuts down for good.

Returns {name, unregistered: true}.

Fails with not_found when no agent has that name (so a repeated call changes nothing), or managed_by_file when the agent belongs to the mesh's agent directory.`

	delegateDescription = `Send a task to an agent and get its result. The agent is named by targetName, or chosen by the mesh as the best discovery match for query (give one of the two). The mesh contacts the agent over the network and the agent may act on the world: every call is a new delegation with a new id (not idempotent).

By default the call waits for the agent's answer, up to timeoutMs (default 120000), and returns {id, targetAgent, success, status: completed, result, latencyMs}. With async: true it returns as soon as the agent accepted the task (status accepted); then poll mesh_get_delegation with the id. Prefer async for tasks that may take over a minute: many MCP clients give up on a request after 60 s.

context (a JSON object, or a string holding one) is passed to the agent. Its depth and chain keys count the hops so far: the mesh refuses a delegation at its maximum depth (5 by default) with depth_exceeded, and to an agent already on the chain with delegation_cycle.

Fails, with nothing sent, with invalid_argument, not_found (no agent of that name), no_match (no agent matches query), resource_not_covered, depth_exceeded or delegation_cycle. A delegation that ran and did not complete is a tool error too: its text starts with the code (agent_error: the agent answered with an error; agent_unreachable; agent_unavailable: its circuit breaker is open, retry later or pick another agent; bad_response; response_too_large; endpoint_not_allowed; timeout; canceled) followed by the delegation record as JSON, which is also the structured content.`

	getDelegationDescription = `Read a delegation record by id, optionally waiting for it to finish. Read-only: changes nothing.

Use it to follow an async mesh_delegate: pass waitSeconds (up to 60) to wait until the status is final (completed, failed, timeout or canceled), and call again while it is still accepted or running. Without waitSeconds it answers at once.

Returns the record: id, targetAgent, task, status, success, result (any JSON, once completed), error and code (when it did not complete), latencyMs, attempts, depth and timestamps. A delegation that failed is reported in the record (status failed, timeout or canceled, with code and error), not as a tool error. Finished records are kept for a limited time (7 days by default).

Fails with not_found for an unknown or expired id.`

	listAgentsDescription = `List the registered agents in name order, one page at a time. Read-only: changes nothing.

Use it to see everything on the mesh; mesh_discover ranks agents by relevance to a need instead. label (key=value) keeps only agents with that label.

Returns {agents, nextCursor}: pass nextCursor as cursor to get the next page; it is absent on the last page. Stale agents (TTL lapsed) are included and marked stale: true.

Fails with invalid_argument for a malformed label or a cursor this server did not issue.`
)

// tools holds the collaborators of the tool handlers.
type tools struct {
	reg       Registry
	search    discovery.Searcher
	del       Delegations
	authorize func(context.Context, *mcp.CallToolRequest) error
	log       *slog.Logger
	router    Router
	routeMeta func(context.Context) map[string]any
	// outputs are the tools' output schemas, by name (see addTool).
	outputs map[string]any
	// fast are the tools whose plainly valid calls skip the SDK's
	// argument handling, by name (see fastCalls).
	fast map[string]fastCall
	// discoverArgs answers mesh_discover's decoded arguments (the stdio
	// transport of NewStdio decodes them itself).
	discoverArgs func(context.Context, *mcp.CallToolRequest, DiscoverArgs) (*mcp.CallToolResult, error)
	// discoverSize is the length of the last mesh_discover answer.
	discoverSize atomic.Int64
}

// add registers the six tools on srv, and the routing tools with a
// Router.
func (t *tools) add(srv *mcp.Server) error {
	t.outputs = make(map[string]any)
	t.fast = make(map[string]fastCall)
	// Pointer hints: nil would mean the MCP defaults (destructive, open
	// world), so every tool states both.
	f, tr := jsonschema.Ptr(false), jsonschema.Ptr(true)
	specs := []toolSpec{
		{
			tool: &mcp.Tool{Name: ToolRegister, Title: "Register an agent", Description: registerDescription,
				Annotations: &mcp.ToolAnnotations{Title: "Register an agent", ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: f, OpenWorldHint: f}},
			input:  registerInputSchema,
			output: inferSchema[RegisterResult],
			add:    func(tool *mcp.Tool) { addTool(srv, t.outputs, tool, handler(t, ToolRegister, t.register)) },
		},
		{
			tool: &mcp.Tool{Name: ToolDiscover, Title: "Discover agents", Description: discoverDescription,
				Annotations: &mcp.ToolAnnotations{Title: "Discover agents", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: f, OpenWorldHint: f}},
			input:  discoverInputSchema,
			output: inferSchema[DiscoverResult],
			add: func(tool *mcp.Tool) {
				h := handler(t, ToolDiscover, t.discover)
				addTool(srv, t.outputs, tool, h)
				t.fast[ToolDiscover] = fastTool(decodeDiscoverArgs, h)
				t.discoverArgs = respondFor(h)
			},
		},
		{
			tool: &mcp.Tool{Name: ToolUnregister, Title: "Unregister an agent", Description: unregisterDescription,
				Annotations: &mcp.ToolAnnotations{Title: "Unregister an agent", ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: tr, OpenWorldHint: f}},
			input:  unregisterInputSchema,
			output: inferSchema[UnregisterResult],
			add:    func(tool *mcp.Tool) { addTool(srv, t.outputs, tool, handler(t, ToolUnregister, t.unregister)) },
		},
		{
			tool: &mcp.Tool{Name: ToolDelegate, Title: "Delegate a task", Description: delegateDescription,
				Annotations: &mcp.ToolAnnotations{Title: "Delegate a task", ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: tr, OpenWorldHint: tr}},
			input:  delegateInputSchema,
			output: delegateOutputSchema,
			add:    func(tool *mcp.Tool) { addTool(srv, t.outputs, tool, handler(t, ToolDelegate, t.delegate)) },
		},
		{
			tool: &mcp.Tool{Name: ToolGetDelegation, Title: "Get a delegation", Description: getDelegationDescription,
				Annotations: &mcp.ToolAnnotations{Title: "Get a delegation", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: f, OpenWorldHint: f}},
			input:  getDelegationInputSchema,
			output: delegationOutputSchema,
			add:    func(tool *mcp.Tool) { addTool(srv, t.outputs, tool, handler(t, ToolGetDelegation, t.getDelegation)) },
		},
		{
			tool: &mcp.Tool{Name: ToolListAgents, Title: "List agents", Description: listAgentsDescription,
				Annotations: &mcp.ToolAnnotations{Title: "List agents", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: f, OpenWorldHint: f}},
			input:  listAgentsInputSchema,
			output: inferSchema[ListAgentsResult],
			add:    func(tool *mcp.Tool) { addTool(srv, t.outputs, tool, handler(t, ToolListAgents, t.listAgents)) },
		},
	}
	if t.router != nil {
		specs = append(specs, t.routingSpecs(srv)...)
	}
	for _, s := range specs {
		in, err := s.input()
		if err != nil {
			return fmt.Errorf("%s input schema: %w", s.tool.Name, err)
		}
		out, err := s.output()
		if err != nil {
			return fmt.Errorf("%s output schema: %w", s.tool.Name, err)
		}
		// Resolve here so a bad schema is an error from New, not a
		// panic from AddTool.
		for _, sch := range []*jsonschema.Schema{in, out} {
			if _, err := sch.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
				return fmt.Errorf("%s schema: %w", s.tool.Name, err)
			}
		}
		s.tool.InputSchema, s.tool.OutputSchema = in, out
		s.add(s.tool)
	}
	return nil
}

// handler adapts a tool function to the SDK's typed handler: it marks the
// call as having reached a handler (see argumentErrors), applies
// Options.Authorize, turns a panic into an internal error, and turns
// errors into isError results with their code (docs/MCP.md#errors). A
// function returns a *toolError, an error of the library packages, or —
// for a result that is an error but carries structured content (a failed
// delegation) — a result with IsError set and a nil error.
func handler[In, Out any](t *tools, name string, fn func(context.Context, In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		markRan(ctx)
		defer func() {
			if p := recover(); p != nil {
				t.log.Error("mcpserver: tool panicked", "tool", name, "panic", fmt.Sprint(p))
				var zero Out
				res, out, err = nil, zero, errInternal
			}
		}()
		if t.authorize != nil {
			if aerr := t.authorize(ctx, req); aerr != nil {
				return nil, out, &toolError{apierr.CodePermissionDenied, aerr.Error()}
			}
		}
		res, out, err = fn(ctx, in)
		if err != nil {
			te, internal := classify(err)
			if internal {
				t.log.Error("mcpserver: tool failed", "tool", name, "err", err)
			}
			var zero Out
			// A plain error makes the SDK build an isError result with
			// the text only and no structured content.
			return nil, zero, te
		}
		return res, out, nil
	}
}

// viaMCP marks ctx so that the registry change it makes is audited as
// done through MCP.
func viaMCP(ctx context.Context) context.Context { return audit.WithVia(ctx, "mcp") }

func (t *tools) register(ctx context.Context, in RegisterArgs) (*mcp.CallToolResult, RegisterResult, error) {
	if in.Protocol == string(registry.ProtocolInProcess) {
		return nil, RegisterResult{}, invalidArg("protocol: inprocess agents can only be registered by the process hosting the mesh; use http, mcp or a2a")
	}
	a := registry.Agent{
		Name:         in.Name,
		DisplayName:  in.DisplayName,
		Description:  in.Description,
		Capabilities: in.Capabilities,
		Examples:     in.Examples,
		Endpoint:     in.Endpoint,
		Protocol:     registry.Protocol(in.Protocol),
		Labels:       in.Labels,
		TTLSeconds:   in.TTLSeconds,

		IsDefault:             in.IsDefault,
		ConfidenceThreshold:   in.ConfidenceThreshold,
		ClarificationRequired: in.ClarificationRequired,
		ClarificationContext:  in.ClarificationContext,
	}
	for _, r := range in.Resources {
		a.Resources = append(a.Resources, registry.Resource(r))
	}
	if in.Auth != nil {
		a.Auth = &registry.Auth{Type: in.Auth.Type, Token: in.Auth.Token, HeaderName: in.Auth.HeaderName}
	}
	stored, created, err := t.reg.Register(viaMCP(ctx), a)
	if err != nil {
		return nil, RegisterResult{}, err
	}
	return nil, RegisterResult{Agent: agentOut(stored.Redacted()), Created: created}, nil
}

// discover answers a [DiscoverResult]: encoded by the engine itself when
// the searcher is one (the bytes json.Marshal would give, from each
// record's cached encoding; TestDiscoverFastPathMatches holds them equal), else
// built from the results.
func (t *tools) discover(ctx context.Context, in DiscoverArgs) (*mcp.CallToolResult, any, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	q := &discovery.Query{
		Limit:             in.Limit,
		Labels:            in.Labels,
		RequiredResources: in.RequiredResources,
	}
	if js, ok := t.search.(discovery.JSONSearcher); ok {
		lent, _ := ctx.Value(answerKey{}).(*answerBuffers)
		if ts, ok := js.(discovery.JSONTextSearcher); ok && lent != nil {
			b, text, err := ts.AppendSearchJSONText(append(lent.json[:0], `{"results":`...), append(lent.text[:0], `{\"results\":`...), in.Query, q)
			if err != nil {
				return nil, nil, err
			}
			lent.json, lent.text = append(b, '}'), append(text, '}')
			return nil, json.RawMessage(lent.json), nil
		}
		var buf []byte
		if lent != nil {
			buf = lent.json[:0]
		} else {
			// Sized by the last answer, so that a typical one is
			// written without the buffer growing.
			buf = make([]byte, 0, t.discoverSize.Load()+1<<10)
		}
		b, err := js.AppendSearchJSON(append(buf, `{"results":`...), in.Query, q)
		if err != nil {
			return nil, nil, err
		}
		b = append(b, '}')
		t.discoverSize.Store(int64(len(b)))
		if lent != nil {
			lent.json = b // grown, for the next answer
		}
		return nil, json.RawMessage(b), nil
	}
	var results []discovery.Result
	var err error
	if cs, ok := t.search.(ContextSearcher); ok {
		results, err = cs.SearchContext(ctx, in.Query, q)
	} else {
		results, err = t.search.Search(in.Query, q)
	}
	if err != nil {
		return nil, nil, err
	}
	return nil, discoverResult(results), nil
}

// answerBuffers are lent to mesh_discover for its answer, through the
// context (answerKey), by a caller that is done with the answer once it
// has written it (the stdio reply), so that they serve the next call:
// the answer's JSON and, from a [discovery.JSONTextSearcher], its text
// copy (the JSON escaped as the inside of a JSON string), which the
// caller writes as it is. Without them each answer gets a buffer of its
// own, and the SDK escapes the text copy. text is empty unless it holds
// the copy of this call's answer: lendAnswer empties it.
type answerBuffers struct {
	json, text []byte
}

// answerKey is the context key of the *answerBuffers lent to
// mesh_discover.
type answerKey struct{}

// lendAnswer returns ctx lending bufs to mesh_discover's answer, with no
// text copy from an earlier one: the buffers are recycled, across
// servers of one process whose searchers may not write one.
func lendAnswer(ctx context.Context, bufs *answerBuffers) context.Context {
	bufs.text = bufs.text[:0]
	return context.WithValue(ctx, answerKey{}, bufs)
}

func discoverResult(results []discovery.Result) DiscoverResult {
	out := DiscoverResult{Results: make([]Match, len(results))}
	for i, r := range results {
		out.Results[i] = matchOut(r)
	}
	return out
}

func (t *tools) unregister(ctx context.Context, in UnregisterArgs) (*mcp.CallToolResult, UnregisterResult, error) {
	if err := t.reg.Delete(viaMCP(ctx), in.Name); err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			err = &toolError{apierr.CodeNotFound, fmt.Sprintf("no agent named %q", in.Name)}
		}
		return nil, UnregisterResult{}, err
	}
	return nil, UnregisterResult{Name: in.Name, Unregistered: true}, nil
}

func (t *tools) delegate(ctx context.Context, in DelegateArgs) (*mcp.CallToolResult, DelegateResult, error) {
	switch {
	case in.TargetName == "" && in.Query == "":
		return nil, DelegateResult{}, invalidArg("targetName: give targetName (an agent name) or query")
	case in.TargetName != "" && in.Query != "":
		return nil, DelegateResult{}, invalidArg("targetName: give targetName or query, not both")
	}
	taskCtx, err := parseContext(in.Context)
	if err != nil {
		return nil, DelegateResult{}, err
	}
	rec, err := t.del.Delegate(ctx, delegation.Request{
		Target:      in.TargetName,
		Query:       in.Query,
		Resources:   in.RequiredResources,
		Task:        in.Task,
		Context:     taskCtx,
		SourceAgent: in.SourceAgent,
		Async:       in.Async,
		Timeout:     time.Duration(in.TimeoutMs) * time.Millisecond,
	})
	if err != nil {
		if errors.Is(err, delegation.ErrNotFound) && in.TargetName != "" {
			err = &toolError{apierr.CodeNotFound, fmt.Sprintf("no agent named %q (use mesh_discover or mesh_list_agents to find one)", in.TargetName)}
		}
		return nil, DelegateResult{}, err
	}
	out := delegateOut(rec.Public())
	if !out.Success {
		return delegationFailure(rec, out), out, nil
	}
	return nil, out, nil
}

// parseContext accepts the context argument as a JSON object or as a
// string holding one ("" and absent mean none).
func parseContext(v any) (map[string]any, error) {
	switch c := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return c, nil
	case string:
		if strings.TrimSpace(c) == "" {
			return nil, nil
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(c), &m); err != nil || m == nil {
			return nil, invalidArg("context: the string must hold a JSON object, such as {\"customer\": \"acme\"}")
		}
		return m, nil
	}
	return nil, invalidArg("context: must be a JSON object, or a string holding one")
}

func (t *tools) getDelegation(ctx context.Context, in GetDelegationArgs) (*mcp.CallToolResult, Delegation, error) {
	var (
		rec delegation.Record
		err error
	)
	if in.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(min(in.WaitSeconds, maxWaitSeconds))*time.Second)
		rec, err = t.del.Wait(wctx, in.ID)
		cancel()
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			// The wait is over: answer with the record as it is now.
			if rec.ID == "" {
				rec, err = t.del.Get(ctx, in.ID)
			} else {
				err = nil
			}
		}
	} else {
		rec, err = t.del.Get(ctx, in.ID)
	}
	if err != nil {
		if errors.Is(err, delegation.ErrNotFound) {
			err = &toolError{apierr.CodeNotFound, fmt.Sprintf("no delegation with id %q (finished records are kept for a limited time, 7 days by default)", in.ID)}
		}
		return nil, Delegation{}, err
	}
	return nil, delegationOut(rec.Public()), nil
}

func (t *tools) listAgents(ctx context.Context, in ListAgentsArgs) (*mcp.CallToolResult, ListAgentsResult, error) {
	opts := registry.ListOptions{Limit: in.Limit, Cursor: in.Cursor}
	if in.Label != "" {
		k, v, ok := strings.Cut(in.Label, "=")
		if !ok || k == "" {
			return nil, ListAgentsResult{}, invalidArg("label: must be written key=value, such as team=finance")
		}
		opts.Labels = map[string]string{k: v}
	}
	page, err := t.reg.List(ctx, opts)
	if err != nil {
		return nil, ListAgentsResult{}, err
	}
	out := ListAgentsResult{Agents: make([]Agent, len(page.Agents)), NextCursor: page.NextCursor}
	for i, a := range page.Agents {
		out.Agents[i] = agentOut(a.Redacted())
	}
	return nil, out, nil
}
