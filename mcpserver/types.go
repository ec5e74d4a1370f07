package mcpserver

import (
	"encoding/json"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// The argument and result types of the tools. Their JSON schemas are
// inferred from these types (github.com/google/jsonschema-go: a field is
// required unless its json tag has omitempty; the jsonschema tag is the
// property's description) and then tightened in schema.go. Every result
// type is an object, and every slice in a result is non-nil, so the
// results validate against their declared output schemas.

// RegisterArgs are the arguments of mesh_register.
type RegisterArgs struct {
	Name         string            `json:"name" jsonschema:"Unique agent name: a letter or digit, then letters, digits, dot, underscore or hyphen (at most 128 characters). Case-sensitive. Registering an existing name replaces that agent."`
	DisplayName  string            `json:"displayName,omitempty" jsonschema:"Human-friendly name; defaults to name."`
	Description  string            `json:"description" jsonschema:"What the agent does, in plain words; discovery matches queries against it. May be empty only if capabilities is not."`
	Capabilities []string          `json:"capabilities" jsonschema:"Short capability keywords such as budget or code-review; weighted highest by discovery."`
	Endpoint     string            `json:"endpoint" jsonschema:"Absolute http or https URL the mesh sends tasks to: POST /task for protocol http, the MCP Streamable HTTP endpoint for protocol mcp."`
	Protocol     string            `json:"protocol,omitempty" jsonschema:"How the mesh talks to the agent: http (default), mcp or a2a."`
	Examples     []string          `json:"examples,omitempty" jsonschema:"Example requests the agent handles, used for routing."`
	Resources    []ResourceArg     `json:"resources,omitempty" jsonschema:"Resources the agent can act on, for requiredResources filters."`
	Labels       map[string]string `json:"labels,omitempty" jsonschema:"Free-form labels (lowercase keys), for filtering discovery and listings."`
	Auth         *AuthArg          `json:"auth,omitempty" jsonschema:"How the mesh authenticates to the agent. The token is stored but never returned."`
	TTLSeconds   int               `json:"ttlSeconds,omitempty" jsonschema:"0 (default) means the agent never expires; otherwise 5 to 86400: without re-registration within this many seconds the agent is marked stale and left out of discovery, and it is removed after 3 more TTLs."`

	// Routing: how mesh_route and the orchestrator treat the agent.
	IsDefault             bool     `json:"isDefault,omitempty" jsonschema:"The default agent takes the messages no other agent is confident about. At most one agent is the default: registering a second one fails with conflict."`
	ConfidenceThreshold   *float64 `json:"confidenceThreshold,omitempty" jsonschema:"Classification confidence (0 to 1) needed to route a message to this agent; default 0.7, always 0 for the default agent."`
	ClarificationRequired bool     `json:"clarificationRequired,omitempty" jsonschema:"Ask the user a clarifying question before routing an uncertain message to this agent."`
	ClarificationContext  string   `json:"clarificationContext,omitempty" jsonschema:"The question (or its context) asked when clarification is required."`
}

// ResourceArg is a resource of [RegisterArgs].
type ResourceArg struct {
	URI         string `json:"uri" jsonschema:"URI of the resource, or a path prefix ending in /* for everything below it."`
	Description string `json:"description,omitempty" jsonschema:"What the resource is."`
	Access      string `json:"access,omitempty" jsonschema:"Access the agent has: read, write or admin."`
}

// AuthArg is the auth of [RegisterArgs].
type AuthArg struct {
	Type       string `json:"type" jsonschema:"none, bearer (Authorization: Bearer <token>) or header (<headerName>: <token>)."`
	Token      string `json:"token,omitempty" jsonschema:"The secret; write-only."`
	HeaderName string `json:"headerName,omitempty" jsonschema:"Header carrying the token, for type header."`
}

// RegisterResult is the result of mesh_register.
type RegisterResult struct {
	Agent   Agent `json:"agent" jsonschema:"The stored agent record (without the auth token)."`
	Created bool  `json:"created" jsonschema:"True if the name was new, false if an existing agent was replaced."`
}

// Agent is an agent record as the tools return it: the JSON form of
// registry.Agent without the auth token (docs/AGENTS.md#the-agent-record).
type Agent struct {
	Name                  string            `json:"name"`
	DisplayName           string            `json:"displayName"`
	Description           string            `json:"description"`
	Capabilities          []string          `json:"capabilities"`
	Examples              []string          `json:"examples,omitempty"`
	Resources             []Resource        `json:"resources,omitempty"`
	Endpoint              string            `json:"endpoint"`
	Protocol              string            `json:"protocol"`
	Auth                  *Auth             `json:"auth,omitempty"`
	IsDefault             bool              `json:"isDefault,omitempty"`
	ConfidenceThreshold   *float64          `json:"confidenceThreshold,omitempty"`
	ClarificationRequired bool              `json:"clarificationRequired,omitempty"`
	ClarificationContext  string            `json:"clarificationContext,omitempty"`
	Labels                map[string]string `json:"labels,omitempty"`
	TTLSeconds            int               `json:"ttlSeconds,omitempty"`
	RegisteredAt          time.Time         `json:"registeredAt" jsonschema:"RFC 3339 time of the first registration."`
	UpdatedAt             time.Time         `json:"updatedAt" jsonschema:"RFC 3339 time of the last registration."`
	LastSeen              time.Time         `json:"lastSeen" jsonschema:"RFC 3339 time of the last registration or heartbeat."`
	Source                string            `json:"source,omitempty" jsonschema:"api, or file for agents of the agent directory (which cannot be replaced or unregistered through this server)."`
	Stale                 bool              `json:"stale,omitempty" jsonschema:"True when the agent's TTL lapsed: it is left out of discovery."`
	Owner                 string            `json:"owner,omitempty" jsonschema:"The principal that registered the agent: only it or an admin may replace or unregister it. Empty for agents of the agent directory."`
}

// Resource is a resource of an [Agent].
type Resource struct {
	URI         string `json:"uri"`
	Description string `json:"description,omitempty"`
	Access      string `json:"access,omitempty"`
}

// Auth is the auth of an [Agent], without its token.
type Auth struct {
	Type       string `json:"type"`
	HeaderName string `json:"headerName,omitempty"`
}

// DiscoverArgs are the arguments of mesh_discover.
type DiscoverArgs struct {
	Query             string            `json:"query" jsonschema:"What you need done, in plain words (for example: budget for the engineering team). Matched by whole words against agent names, capabilities, descriptions and examples."`
	Limit             int               `json:"limit,omitempty" jsonschema:"Maximum number of results, 1 to 100 (default 10)."`
	Labels            map[string]string `json:"labels,omitempty" jsonschema:"Only agents carrying every one of these labels with these values."`
	RequiredResources []string          `json:"requiredResources,omitempty" jsonschema:"Only agents whose resources cover every one of these URIs."`
}

// DiscoverResult is the result of mesh_discover.
type DiscoverResult struct {
	Results []Match `json:"results" jsonschema:"Matching agents, best first; empty when none matched."`
}

// Match is one ranked agent of a [DiscoverResult].
type Match struct {
	Agent               Agent      `json:"agent"`
	Score               float64    `json:"score" jsonschema:"Relevance in (0, 1], higher is better."`
	Coverage            float64    `json:"coverage" jsonschema:"Fraction of the query's words that matched."`
	MatchedTerms        []string   `json:"matchedTerms" jsonschema:"The query words that matched."`
	MatchedCapabilities []string   `json:"matchedCapabilities" jsonschema:"The agent's capabilities that contain a matched word."`
	MatchedResources    []Resource `json:"matchedResources" jsonschema:"The agent's resources that cover a required resource."`
}

// UnregisterArgs are the arguments of mesh_unregister.
type UnregisterArgs struct {
	Name string `json:"name" jsonschema:"Name of the agent to remove."`
}

// UnregisterResult is the result of mesh_unregister.
type UnregisterResult struct {
	Name         string `json:"name" jsonschema:"The removed agent."`
	Unregistered bool   `json:"unregistered" jsonschema:"Always true: the agent is gone."`
}

// DelegateArgs are the arguments of mesh_delegate.
type DelegateArgs struct {
	TargetName        string   `json:"targetName,omitempty" jsonschema:"Name of the agent to send the task to. Give targetName or query, not both."`
	Query             string   `json:"query,omitempty" jsonschema:"Instead of targetName: let the mesh pick the best discovery match for this query."`
	Task              string   `json:"task" jsonschema:"The task, in plain words, as the agent should receive it."`
	Context           any      `json:"context,omitempty" jsonschema:"Extra context for the agent: a JSON object, or a string holding one. Its depth and chain keys are the delegation hop count and path so far (set them when you are an agent delegating onward)."`
	RequiredResources []string `json:"requiredResources,omitempty" jsonschema:"Resource URIs the target must cover; refused with resource_not_covered otherwise."`
	SourceAgent       string   `json:"sourceAgent,omitempty" jsonschema:"Your own agent name, if you are a registered agent: it is added to the chain so the task cannot come back to you."`
	Async             bool     `json:"async,omitempty" jsonschema:"False (default): wait for the agent's answer. True: return as soon as the agent accepted the task (status accepted) and poll mesh_get_delegation with the returned id."`
	TimeoutMs         int64    `json:"timeoutMs,omitempty" jsonschema:"Deadline of the delegation in milliseconds, 1 to 3600000 (default 120000)."`
}

// DelegateResult is the result of mesh_delegate: the fields of the
// delegation record that the HTTP API's POST /v1/delegate returns.
type DelegateResult struct {
	ID          string `json:"id" jsonschema:"Delegation id, for mesh_get_delegation."`
	TargetAgent string `json:"targetAgent" jsonschema:"The agent the task went to."`
	Success     bool   `json:"success" jsonschema:"True when the task completed (or, for async, was accepted)."`
	Status      string `json:"status" jsonschema:"completed, accepted (async: poll mesh_get_delegation), failed, timeout or canceled."`
	Result      any    `json:"result,omitempty" jsonschema:"The agent's result: any JSON value."`
	Error       string `json:"error,omitempty" jsonschema:"What went wrong, when the delegation did not complete."`
	Code        string `json:"code,omitempty" jsonschema:"Machine-readable failure code (agent_error, agent_unreachable, agent_unavailable, timeout, ...)."`
	LatencyMs   int64  `json:"latencyMs" jsonschema:"Time the delegation took, in milliseconds."`
}

// GetDelegationArgs are the arguments of mesh_get_delegation.
type GetDelegationArgs struct {
	ID          string `json:"id" jsonschema:"Delegation id returned by mesh_delegate."`
	WaitSeconds int    `json:"waitSeconds,omitempty" jsonschema:"Wait up to this many seconds (0 to 60, default 0: answer at once) for the delegation to finish before answering."`
}

// Delegation is a delegation record (docs/API.md#delegations) as
// mesh_get_delegation returns it, with the success flag of [DelegateResult].
type Delegation struct {
	ID          string         `json:"id"`
	SourceAgent string         `json:"sourceAgent,omitempty"`
	TargetAgent string         `json:"targetAgent"`
	Task        string         `json:"task"`
	Status      string         `json:"status" jsonschema:"pending, running or accepted (not finished: poll again), or the final completed, failed, timeout or canceled."`
	Success     bool           `json:"success" jsonschema:"True when completed, or accepted and still waiting for the agent."`
	Result      any            `json:"result,omitempty" jsonschema:"The agent's result: any JSON value."`
	Error       string         `json:"error,omitempty"`
	Code        string         `json:"code,omitempty"`
	LatencyMs   int64          `json:"latencyMs"`
	Attempts    int            `json:"attempts"`
	Depth       int            `json:"depth"`
	Async       bool           `json:"async,omitempty"`
	NeedsInput  bool           `json:"needsInput,omitempty" jsonschema:"True when the agent asks a question instead of finishing: the result is its question."`
	Response    *AgentResponse `json:"response,omitempty" jsonschema:"The whole reply of an MCP agent."`
	CreatedAt   time.Time      `json:"createdAt"`
	UpdatedAt   time.Time      `json:"updatedAt"`
	FinishedAt  *time.Time     `json:"finishedAt,omitempty"`
	Deadline    *time.Time     `json:"deadline,omitempty" jsonschema:"When an accepted async delegation times out."`
	Principal   string         `json:"principal,omitempty" jsonschema:"The principal that started the delegation: only it and admins see the record."`
}

// AgentResponse is the reply of an MCP agent's handle_message tool.
type AgentResponse struct {
	Content          string         `json:"content"`
	WorkflowComplete bool           `json:"workflow_complete"`
	WorkflowState    map[string]any `json:"workflow_state,omitempty"`
}

// ListAgentsArgs are the arguments of mesh_list_agents.
type ListAgentsArgs struct {
	Label  string `json:"label,omitempty" jsonschema:"Only agents carrying this label, written key=value."`
	Limit  int    `json:"limit,omitempty" jsonschema:"Page size, 1 to 1000 (default 100)."`
	Cursor string `json:"cursor,omitempty" jsonschema:"nextCursor of the previous page, to continue the listing."`
}

// ListAgentsResult is the result of mesh_list_agents.
type ListAgentsResult struct {
	Agents     []Agent `json:"agents" jsonschema:"Agents in name order, stale ones included (marked stale)."`
	NextCursor string  `json:"nextCursor,omitempty" jsonschema:"Pass as cursor to get the next page; absent on the last page."`
}

// agentOut converts a registry record to its tool form. The token is
// dropped even if the caller passed a record that still had it.
func agentOut(a registry.Agent) Agent {
	out := Agent{
		Name:                  a.Name,
		DisplayName:           a.DisplayName,
		Description:           a.Description,
		Capabilities:          nonNil(a.Capabilities),
		Examples:              a.Examples,
		Endpoint:              a.Endpoint,
		Protocol:              string(a.Protocol),
		IsDefault:             a.IsDefault,
		ConfidenceThreshold:   a.ConfidenceThreshold,
		ClarificationRequired: a.ClarificationRequired,
		ClarificationContext:  a.ClarificationContext,
		Labels:                a.Labels,
		TTLSeconds:            a.TTLSeconds,
		RegisteredAt:          a.RegisteredAt,
		UpdatedAt:             a.UpdatedAt,
		LastSeen:              a.LastSeen,
		Source:                string(a.Source),
		Stale:                 a.Stale,
		Owner:                 a.Owner,
	}
	if out.DisplayName == "" {
		out.DisplayName = a.Name
	}
	if out.Protocol == "" {
		out.Protocol = string(registry.ProtocolHTTP)
	}
	if a.Auth != nil {
		out.Auth = &Auth{Type: a.Auth.Type, HeaderName: a.Auth.HeaderName}
	}
	out.Resources = resourcesOut(a.Resources)
	if len(out.Resources) == 0 {
		out.Resources = nil
	}
	return out
}

func resourcesOut(rs []registry.Resource) []Resource {
	out := make([]Resource, len(rs))
	for i, r := range rs {
		out[i] = Resource(r)
	}
	return out
}

func matchOut(r discovery.Result) Match {
	return Match{
		Agent:               agentOut(r.Agent),
		Score:               r.Score,
		Coverage:            r.Coverage,
		MatchedTerms:        nonNil(r.MatchedTerms),
		MatchedCapabilities: nonNil(r.MatchedCapabilities),
		MatchedResources:    resourcesOut(r.MatchedResources),
	}
}

// success is the success flag of the HTTP API: a completed delegation, or
// an async one the agent accepted.
func success(s delegation.Status) bool {
	return s == delegation.StatusCompleted || s == delegation.StatusAccepted
}

func delegateOut(r delegation.Record) DelegateResult {
	return DelegateResult{
		ID:          r.ID,
		TargetAgent: r.TargetAgent,
		Success:     success(r.Status),
		Status:      string(r.Status),
		Result:      rawValue(r.Result),
		Error:       r.Error,
		Code:        r.Code,
		LatencyMs:   r.LatencyMs,
	}
}

func delegationOut(r delegation.Record) Delegation {
	d := Delegation{
		ID:          r.ID,
		SourceAgent: r.SourceAgent,
		TargetAgent: r.TargetAgent,
		Task:        r.Task,
		Status:      string(r.Status),
		Success:     success(r.Status),
		Result:      rawValue(r.Result),
		Error:       r.Error,
		Code:        r.Code,
		LatencyMs:   r.LatencyMs,
		Attempts:    r.Attempts,
		Depth:       r.Depth,
		Async:       r.Async,
		NeedsInput:  r.NeedsInput,
		CreatedAt:   r.CreatedAt,
		UpdatedAt:   r.UpdatedAt,
		FinishedAt:  r.FinishedAt,
		Deadline:    r.Deadline,
		Principal:   r.Principal,
	}
	if r.Response != nil {
		d.Response = &AgentResponse{
			Content:          r.Response.Content,
			WorkflowComplete: r.Response.WorkflowComplete,
			WorkflowState:    r.Response.WorkflowState,
		}
	}
	return d
}

// rawValue returns a record's result as a value that marshals back to the
// same JSON, or nil (field omitted) when there is none. A JSON null result
// stays an explicit null.
func rawValue(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
