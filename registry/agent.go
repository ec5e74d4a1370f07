package registry

import (
	"maps"
	"slices"
	"time"
)

// Protocol is how the mesh talks to an agent.
type Protocol string

// The protocols an agent may speak (docs/AGENTS.md#the-agent-record).
const (
	// ProtocolHTTP is the agentkit-mesh POST /task contract (the default).
	ProtocolHTTP Protocol = "http"
	// ProtocolMCP is an MCP Streamable HTTP server exposing handle_message.
	ProtocolMCP Protocol = "mcp"
	// ProtocolA2A is an A2A 1.0 agent.
	ProtocolA2A Protocol = "a2a"
	// ProtocolInProcess is a Go handler registered by the host embedding the
	// library. Its endpoint is "inprocess:<name>". The front-ends refuse it.
	ProtocolInProcess Protocol = "inprocess"
)

// Source says who owns an agent record.
type Source string

// The sources of an agent record.
const (
	// SourceAPI marks agents registered through the API or the library.
	SourceAPI Source = "api"
	// SourceFile marks agents loaded from the YAML agent directory. The API
	// refuses to replace or delete them.
	SourceFile Source = "file"
)

// Access levels of a [Resource].
const (
	AccessRead  = "read"
	AccessWrite = "write"
	AccessAdmin = "admin"
)

// Auth types of an agent's [Auth].
const (
	AuthNone   = "none"
	AuthBearer = "bearer"
	AuthHeader = "header"
)

// DefaultConfidenceThreshold is the routing threshold of an agent that does not
// set one.
const DefaultConfidenceThreshold = 0.7

// Resource is something an agent can act on, named by URI (or by a
// "/*"-style prefix for non-URL names).
type Resource struct {
	URI         string `json:"uri"`
	Description string `json:"description,omitempty"`
	Access      string `json:"access,omitempty"`
}

// Auth is how the mesh authenticates to an agent. Token is write-only: every
// read path of [Registry] clears it.
type Auth struct {
	Type       string `json:"type"`
	Token      string `json:"token,omitempty"`
	HeaderName string `json:"headerName,omitempty"`
}

// Agent is the agent record (docs/AGENTS.md#the-agent-record).
//
// The JSON form is the wire form of the HTTP API and the MCP tools. Stores
// persist the same form, token included.
type Agent struct {
	Name                  string            `json:"name"`
	DisplayName           string            `json:"displayName,omitempty"`
	Description           string            `json:"description"`
	Capabilities          []string          `json:"capabilities"`
	Examples              []string          `json:"examples,omitempty"`
	Resources             []Resource        `json:"resources,omitempty"`
	Endpoint              string            `json:"endpoint"`
	Protocol              Protocol          `json:"protocol,omitempty"`
	Auth                  *Auth             `json:"auth,omitempty"`
	IsDefault             bool              `json:"isDefault,omitempty"`
	ConfidenceThreshold   *float64          `json:"confidenceThreshold,omitempty"`
	ClarificationRequired bool              `json:"clarificationRequired,omitempty"`
	ClarificationContext  string            `json:"clarificationContext,omitempty"`
	Labels                map[string]string `json:"labels,omitempty"`
	TTLSeconds            int               `json:"ttlSeconds,omitempty"`

	// Set by the registry; ignored on input.
	RegisteredAt time.Time `json:"registeredAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	LastSeen     time.Time `json:"lastSeen"`
	Source       Source    `json:"source,omitempty"`
	// Owner is the principal that registered an API agent (see package
	// principal): only it or an admin may replace, delete or heartbeat
	// the agent. A caller with a principal cannot set it; records stored
	// without one are read as owned by principal.Default. Empty for the
	// agents of the agent directory.
	Owner string `json:"owner,omitempty"`
	// Stale is computed on read: the agent has a TTL and no heartbeat or
	// re-registration within it. Stale agents are left out of discovery and
	// routing. Never stored.
	Stale bool `json:"stale,omitempty"`
}

// Threshold returns the agent's routing confidence threshold: the set value,
// [DefaultConfidenceThreshold] when unset, and 0 for the default agent.
func (a *Agent) Threshold() float64 {
	switch {
	case a.IsDefault:
		return 0
	case a.ConfidenceThreshold == nil:
		return DefaultConfidenceThreshold
	default:
		return *a.ConfidenceThreshold
	}
}

// StaleAt reports whether the agent is stale at t: it has a TTL and was last
// seen more than one TTL before t.
func (a *Agent) StaleAt(t time.Time) bool {
	return a.TTLSeconds > 0 && t.Sub(a.LastSeen) > a.ttl()
}

// ExpiredAt reports whether the agent's grace period is over at t: it has a
// TTL and was last seen more than TTL + 3×TTL before t, so the registry
// removes it.
func (a *Agent) ExpiredAt(t time.Time) bool {
	return a.TTLSeconds > 0 && t.Sub(a.LastSeen) > (1+GraceTTLs)*a.ttl()
}

// GraceTTLs is how many TTLs a stale agent is kept before it is removed.
const GraceTTLs = 3

func (a *Agent) ttl() time.Duration { return time.Duration(a.TTLSeconds) * time.Second }

// Clone returns a deep copy of a.
func (a Agent) Clone() Agent {
	a.Capabilities = slices.Clone(a.Capabilities)
	a.Examples = slices.Clone(a.Examples)
	a.Resources = slices.Clone(a.Resources)
	a.Labels = maps.Clone(a.Labels)
	if a.Auth != nil {
		auth := *a.Auth
		a.Auth = &auth
	}
	if a.ConfidenceThreshold != nil {
		th := *a.ConfidenceThreshold
		a.ConfidenceThreshold = &th
	}
	return a
}

// Redacted returns a deep copy of a without the auth token: the form every
// read path returns.
func (a Agent) Redacted() Agent {
	c := a.Clone()
	if c.Auth != nil {
		c.Auth.Token = ""
	}
	return c
}

// RedactedView is a without its credential's token, like [Agent.Redacted],
// but sharing a's slices and maps instead of copying them: for a reader
// that keeps a record no one modifies, such as the Agent of an [Event],
// at the cost of no allocation (one, when a has a token).
func (a Agent) RedactedView() Agent {
	if a.Auth != nil && a.Auth.Token != "" {
		auth := *a.Auth
		auth.Token = ""
		a.Auth = &auth
	}
	return a
}
