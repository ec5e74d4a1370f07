package mcpserver

import (
	"context"
	"maps"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/routing"
)

// Tool names of the routing tools, served when Options.Router is set.
const (
	ToolRoute         = "mesh_route"
	ToolHandleMessage = "handle_message"
)

// Router routes a message through the orchestrator pipeline (classify,
// gate, dispatch; docs/API.md#how-a-message-is-routed): *routing.Router
// implements it.
type Router interface {
	Handle(ctx context.Context, req routing.Request) (routing.Response, error)
}

const (
	routeDescription = `Route a user's message to the agent that should handle it, and return that agent's answer. The mesh classifies the message against the registered agents, then routes it to the best one, asks a clarification question, or falls back to the default agent; the chosen agent is contacted over the network and may act on the world (not idempotent).

Use it when you have a user's request and do not know which agent should take it. Pass user_id to keep a conversation: the user's next messages go to the same agent (session bypass) until the agent completes the workflow; a Slack front-end may pass slack_user_id instead or as well. session_id, if given, must be a UUID; locale (a BCP 47 tag) is the language of clarification questions.

Returns {request_id, session_id, agent_id, decision: route|clarify|fallback, reason, confidence, response, workflow_complete, classification, clarification_question?, suggested_agent?, duration_ms, routing}. For decision clarify, response is a question for the user: send their answer as the next message with the same user_id.

Fails with invalid_argument (empty or over-long input, bad session_id), no_default_agent (nothing fits and no default agent is registered) or unavailable (every agent that could take it is down; retry later).`

	handleMessageDescription = `Handle one conversational turn: the handle_message tool that agentmesh calls on its mcp agents, so that this mesh can be registered as an mcp agent of another mesh. raw_input is routed for employee_id through this mesh's orchestrator exactly as mesh_route does (classification, session bypass, clarification, fallback), and the chosen agent is contacted over the network and may act on the world.

Use it from another agentmesh (or any orchestrator speaking the handle_message contract); people and models should prefer mesh_route.

Returns an AgentResponse {content, workflow_complete}: content is the answer (or a clarification question), workflow_complete is true when the routed agent completed its workflow. It is both the structured content and a JSON text block.

Fails with invalid_argument, no_default_agent or unavailable, as mesh_route.`
)

// RouteArgs are the arguments of mesh_route.
type RouteArgs struct {
	Input       string `json:"input" jsonschema:"The user's message, 1 to 10000 characters."`
	UserID      string `json:"user_id,omitempty" jsonschema:"Identifies the user, to keep a conversation (session) across messages. Omit for a one-off anonymous message."`
	SlackUserID string `json:"slack_user_id,omitempty" jsonschema:"The user's Slack member id (U… or W…), resolved by the mesh to the user's employee id and name when it has an identity directory or a Slack token."`
	SessionID   string `json:"session_id,omitempty" jsonschema:"The session to continue (a UUID). An identified user's active session wins over it."`
	Locale      string `json:"locale,omitempty" jsonschema:"The user's language as a BCP 47 tag (en, fr-CA...), for clarification questions."`
}

// HandleMessageTurn is one entry of handle_message's turn_history.
type HandleMessageTurn struct {
	Role          string `json:"role" jsonschema:"user or agent."`
	Content       string `json:"content"`
	Timestamp     string `json:"timestamp,omitempty"`
	IntentSummary string `json:"intent_summary,omitempty"`
}

// HandleMessageArgs are the arguments the mesh sends an mcp agent's
// handle_message tool (docs/AGENTS.md#mcp-agents).
type HandleMessageArgs struct {
	SessionID        string              `json:"session_id,omitempty" jsonschema:"The caller's session id; used when it is a UUID."`
	RequestID        string              `json:"request_id,omitempty" jsonschema:"The caller's request (delegation) id; becomes this mesh's request_id."`
	EmployeeID       string              `json:"employee_id,omitempty" jsonschema:"The user; their conversation is kept in a session of this mesh. Empty means anonymous."`
	DisplayName      string              `json:"display_name,omitempty" jsonschema:"The user's name, passed to the agent."`
	SlackUserID      string              `json:"slack_user_id,omitempty" jsonschema:"The user's Slack member id (U… or W…), resolved by this mesh to the user's employee id and name when it can."`
	RawInput         string              `json:"raw_input" jsonschema:"The user's message, routed through this mesh."`
	IntentSummary    string              `json:"intent_summary,omitempty" jsonschema:"The caller's summary of the message (informational)."`
	Entities         map[string]any      `json:"entities,omitempty" jsonschema:"Entities the caller found (informational)."`
	DetectedLanguage string              `json:"detected_language,omitempty" jsonschema:"The message's language (ISO 639-1); used as the locale."`
	TurnHistory      []HandleMessageTurn `json:"turn_history,omitempty" jsonschema:"The caller's history (informational: this mesh keeps its own)."`
	WorkflowState    map[string]any      `json:"workflow_state,omitempty" jsonschema:"The caller's workflow state (informational: this mesh keeps its own)."`
	Metadata         map[string]any      `json:"metadata,omitempty" jsonschema:"Passed to the routed agent and stored on a new session."`
}

// toolSpec is one tool with its schemas and its registration.
type toolSpec struct {
	tool   *mcp.Tool
	input  func() (*jsonschema.Schema, error)
	output func() (*jsonschema.Schema, error)
	add    func(*mcp.Tool)
}

// routingSpecs are the routing tools, for a server with a Router.
func (t *tools) routingSpecs(srv *mcp.Server) []toolSpec {
	tr := jsonschema.Ptr(true)
	return []toolSpec{
		{
			tool: &mcp.Tool{Name: ToolRoute, Title: "Route a message", Description: routeDescription,
				Annotations: &mcp.ToolAnnotations{Title: "Route a message", ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: tr, OpenWorldHint: tr}},
			input:  routeInputSchema,
			output: inferSchema[routing.Response],
			add:    func(tool *mcp.Tool) { addTool(srv, t.outputs, tool, handler(t, ToolRoute, t.route)) },
		},
		{
			tool: &mcp.Tool{Name: ToolHandleMessage, Title: "Handle a conversational turn", Description: handleMessageDescription,
				Annotations: &mcp.ToolAnnotations{Title: "Handle a conversational turn", ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: tr, OpenWorldHint: tr}},
			input:  handleMessageInputSchema,
			output: inferSchema[AgentResponse],
			add:    func(tool *mcp.Tool) { addTool(srv, t.outputs, tool, handler(t, ToolHandleMessage, t.handleMessage)) },
		},
	}
}

func routeInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[RouteArgs]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s,
		at(lenRange(1, routing.MaxInputRunes), "input"),
		at(maxLen(512), "user_id"),
		at(maxLen(routing.MaxSlackUserIDLen), "slack_user_id"),
		at(maxLen(36), "session_id"),
		at(maxLen(64), "locale"),
	)
}

// handleMessageInputSchema accepts keys it does not know: callers of the
// handle_message contract may send more than the arguments it documents
// (docs/AGENTS.md#mcp-agents).
func handleMessageInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[HandleMessageArgs]()
	if err != nil {
		return nil, err
	}
	s.AdditionalProperties = nil
	return s, applyEdits(s,
		at(lenRange(1, routing.MaxInputRunes), "raw_input"),
		at(maxLen(512), "employee_id"),
		at(maxLen(routing.MaxSlackUserIDLen), "slack_user_id"),
	)
}

func (t *tools) route(ctx context.Context, in RouteArgs) (*mcp.CallToolResult, routing.Response, error) {
	resp, err := t.router.Handle(ctx, routing.Request{
		Input:       in.Input,
		UserID:      in.UserID,
		SlackUserID: in.SlackUserID,
		SessionID:   in.SessionID,
		Locale:      in.Locale,
		Metadata:    t.routeMetadata(ctx, nil),
	})
	if err != nil {
		return nil, routing.Response{}, err
	}
	if resp.Classification.Entities == nil {
		resp.Classification.Entities = map[string]any{}
	}
	return nil, resp, nil
}

func (t *tools) handleMessage(ctx context.Context, in HandleMessageArgs) (*mcp.CallToolResult, AgentResponse, error) {
	req := routing.Request{
		Input:       in.RawInput,
		EmployeeID:  in.EmployeeID,
		DisplayName: in.DisplayName,
		SlackUserID: in.SlackUserID,
		Locale:      in.DetectedLanguage,
		Metadata:    t.routeMetadata(ctx, in.Metadata),
		RequestID:   in.RequestID,
		EntryPoint:  ToolHandleMessage,
	}
	if routing.IsSessionID(in.SessionID) {
		req.SessionID = in.SessionID
	}
	resp, err := t.router.Handle(ctx, req)
	if err != nil {
		return nil, AgentResponse{}, err
	}
	content := resp.Response
	if strings.TrimSpace(content) == "" {
		// An AgentResponse needs a non-empty content
		// (docs/AGENTS.md#mcp-agents).
		content = "(the agent " + resp.AgentID + " returned no text)"
	}
	return nil, AgentResponse{Content: content, WorkflowComplete: resp.WorkflowComplete}, nil
}

// routeMetadata returns meta overlaid with Options.RouteMetadata's values
// for ctx, in a new map (nil when both are empty).
func (t *tools) routeMetadata(ctx context.Context, meta map[string]any) map[string]any {
	var extra map[string]any
	if t.routeMeta != nil {
		extra = t.routeMeta(ctx)
	}
	if len(meta) == 0 && len(extra) == 0 {
		return nil
	}
	out := make(map[string]any, len(meta)+len(extra))
	maps.Copy(out, meta)
	maps.Copy(out, extra)
	return out
}
