package delegation

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// Transport sends one message to one agent over one protocol. The client
// picks the transport by the agent's Protocol.
//
// Send must honour ctx (its deadline is the delegation deadline), must not
// retry (the client owns retries), and must return a *[TransportError] for
// failures so the client can tell what is safe to retry.
// Implementations must be safe for concurrent use.
type Transport interface {
	Send(ctx context.Context, agent registry.Agent, msg Message) (Reply, error)
}

// TransportFunc adapts a function to the [Transport] interface.
type TransportFunc func(ctx context.Context, agent registry.Agent, msg Message) (Reply, error)

// Send calls f.
func (f TransportFunc) Send(ctx context.Context, agent registry.Agent, msg Message) (Reply, error) {
	return f(ctx, agent, msg)
}

// Message is what the mesh sends to an agent.
type Message struct {
	// DelegationID is the record id; the same on every retry, so agents
	// may de-duplicate.
	DelegationID string
	// SourceAgent is the delegating agent, when the request named one.
	// The http transport does not send it separately: it is the last
	// entry of Context["chain"].
	SourceAgent string
	// Task is the task text (the MCP transport's raw_input).
	Task string
	// Context is the caller's context plus the mesh's "depth" (an int:
	// hops including this one) and "chain" (a []string: the agents
	// already on the path, the source agent last). Transports must not
	// modify it.
	Context map[string]any
	// CallbackURL is where the agent may report later, after answering
	// 202: set for async delegations and for every delegation to an http
	// agent.
	CallbackURL string
	// Turn carries the routing fields of an MCP handle_message call; nil
	// for plain delegations.
	Turn *Turn
}

// Turn is the conversational context a routed request carries to an MCP
// agent's handle_message tool. Plain delegations leave it nil
// and the transport sends empty session fields.
type Turn struct {
	// UserID, Locale and EntryPoint are the routed request's; the http
	// transport sends them (handle_message has no field for them).
	UserID     string `json:"-"`
	Locale     string `json:"-"`
	EntryPoint string `json:"-"`

	SessionID        string         `json:"session_id"`
	EmployeeID       string         `json:"employee_id"`
	DisplayName      string         `json:"display_name"`
	IntentSummary    string         `json:"intent_summary"`
	Entities         map[string]any `json:"entities"`
	DetectedLanguage string         `json:"detected_language"`
	History          []TurnEntry    `json:"turn_history"`
	WorkflowState    map[string]any `json:"workflow_state"`
	Metadata         map[string]any `json:"metadata"`
}

// TurnEntry is one entry of a session's turn history.
type TurnEntry struct {
	Role          string `json:"role"` // "user" or "agent"
	Content       string `json:"content"`
	Timestamp     string `json:"timestamp"`
	IntentSummary string `json:"intent_summary,omitempty"`
	// Agent is the agent that answered an agent turn. The http transport
	// sends it; handle_message's turn entries have no such field.
	Agent string `json:"-"`
}

// Reply is an agent's answer.
type Reply struct {
	// Accepted is true when the agent took the task asynchronously (HTTP
	// 202) and will call back.
	Accepted bool
	// Result is the result value (JSON).
	Result json.RawMessage
	// Response is the AgentResponse of an MCP agent, or of an http agent
	// whose reply carries workflowComplete or workflowState.
	Response *AgentResponse
	// NeedsInput is true when the agent asks a question instead of
	// finishing (A2A input-required).
	NeedsInput bool
}

// transportDefaults fills in the options a transport over HTTP shares: a
// nil client means netguard's client with a nil policy (private addresses
// allowed, the library default), a nil RoundTripper http.DefaultTransport,
// and a nil logger one that discards. rt is the client's RoundTripper,
// which transports wrap.
func transportDefaults(hc *http.Client, logger *slog.Logger) (*http.Client, http.RoundTripper, *slog.Logger) {
	if hc == nil {
		hc = (*netguard.Policy)(nil).NewClient(nil)
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return hc, rt, logger
}
