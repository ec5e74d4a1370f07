package agentkit

import (
	"context"
	"math"
)

// Task is a task from the mesh: the JSON body of its POST to the agent's
// endpoint (docs/AGENTS.md, "The request"). Fields the mesh adds in later
// versions are ignored.
type Task struct {
	// DelegationID is the id of the delegation record. It is the same on
	// every attempt of one delegation: use it as the idempotency key of
	// anything with side effects.
	DelegationID string `json:"delegationId"`
	// Task is the task text, or the user's current message on a routed
	// delivery.
	Task string `json:"task"`
	// Context is the caller's context with the mesh's "depth" and
	// "chain" (see [Task.Depth] and [Task.Chain]); the other keys are
	// the caller's.
	Context map[string]any `json:"context,omitempty"`
	// CallbackURL is where an async agent reports its outcome. An
	// [Agent] with Options.Async posts to it itself.
	CallbackURL string `json:"callbackUrl,omitempty"`
	// Session is the conversation of a routed message from a known user;
	// nil on a plain delegation.
	Session *Session `json:"session,omitempty"`
	// User is who sent a routed message; nil on a plain delegation.
	User *User `json:"user,omitempty"`
	// Locale (a BCP 47 tag) and EntryPoint (the client's name) are the
	// routed request's, when it set them.
	Locale     string `json:"locale,omitempty"`
	EntryPoint string `json:"entryPoint,omitempty"`
	// Metadata is the routed request's metadata, without the mesh's own
	// keys.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Depth is the number of delegation hops to this agent, this one
// included (the context's "depth"); 0 when the context has none.
func (t Task) Depth() int {
	d, ok := t.Context["depth"].(float64)
	if !ok || d < 0 || d > math.MaxInt32 {
		return 0
	}
	return int(d)
}

// Chain is the agents already on the delegation's path, the delegating
// agent last (the context's "chain"). An agent that delegates further
// cannot delegate to any of them (delegation_cycle).
func (t Task) Chain() []string {
	raw, _ := t.Context["chain"].([]any)
	chain := make([]string, 0, len(raw))
	for _, v := range raw {
		if s, ok := v.(string); ok {
			chain = append(chain, s)
		}
	}
	return chain
}

// Session is the conversation a routed message belongs to.
type Session struct {
	// ID is the session id.
	ID string `json:"id"`
	// Turns are the turns before this message, oldest first.
	Turns []Turn `json:"turns"`
	// WorkflowState is the state the agent last returned ([Reply]
	// WorkflowState); empty on the first turn.
	WorkflowState map[string]any `json:"workflowState"`
}

// Turn is one turn of a [Session].
type Turn struct {
	// Role is "user" or "agent".
	Role    string `json:"role"`
	Content string `json:"content"`
	// Agent is the agent that answered, on an agent turn.
	Agent string `json:"agent,omitempty"`
	// Time is when the turn was added, in RFC 3339 (UTC).
	Time string `json:"time,omitempty"`
}

// User is who sent a routed message. EmployeeID defaults to ID and
// DisplayName to EmployeeID.
type User struct {
	ID          string `json:"id,omitempty"`
	EmployeeID  string `json:"employeeId,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

// Reply is an agent's answer to a [Task].
type Reply struct {
	// Result is the delegation's result: any value that encodes as JSON
	// (a string, a struct, a json.RawMessage, …); nil is JSON null. A
	// routed message's user sees a string result as it is, or the
	// "content" string of an object result.
	Result any
	// WorkflowComplete ends the routed conversation: the user's next
	// message is classified again.
	WorkflowComplete bool
	// WorkflowState, when not nil, replaces the session's state: the
	// agent gets it back as Session.WorkflowState on the next turn.
	WorkflowState map[string]any
}

// Handler answers a task. Its ctx ends when the mesh gives up on the
// request (its deadline, or a cancelled delegation) or, for an async
// agent, after Options.AsyncTimeout or when the agent is shut down
// without waiting. A returned error fails the delegation with code
// agent_error and the error's text, which ends up on the delegation
// record: keep it short and free of secrets. A panic fails it too.
//
// Handlers run concurrently, one call per task.
type Handler func(ctx context.Context, t Task) (Reply, error)
