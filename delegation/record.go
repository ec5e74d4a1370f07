package delegation

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/internal/jsonvalue"
)

// Status is the state of a delegation (docs/API.md#delegations). A final
// status stays final: a late callback cannot overturn it.
//
//	pending → running → completed | failed | timeout | canceled
//	running → accepted (async) → completed | failed | timeout | canceled
type Status string

// Delegation statuses.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusAccepted  Status = "accepted"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusTimeout   Status = "timeout"
	StatusCanceled  Status = "canceled"
)

// Final reports whether s is a final status: once a record is final it
// never changes again.
func (s Status) Final() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusTimeout, StatusCanceled:
		return true
	}
	return false
}

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusAccepted:
		return true
	}
	return s.Final()
}

// AgentResponse is the reply of an MCP agent's handle_message tool, or
// the conversation fields of an http agent's reply (workflowComplete and
// workflowState next to result, Content then being the result's text).
// The whole response is kept on the record.
type AgentResponse struct {
	Content          string         `json:"content"`
	WorkflowComplete bool           `json:"workflow_complete"`
	WorkflowState    map[string]any `json:"workflow_state,omitempty"`
}

// Record is the persisted delegation record (docs/API.md#delegations). Its
// JSON form is the wire form of the HTTP API and the MCP tools, except
// SecretHash, which [Record.Public] clears.
type Record struct {
	ID          string          `json:"id"`
	SourceAgent string          `json:"sourceAgent,omitempty"`
	TargetAgent string          `json:"targetAgent"`
	Task        string          `json:"task"`
	Status      Status          `json:"status"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	Code        string          `json:"code,omitempty"`
	LatencyMs   int64           `json:"latencyMs"`
	Attempts    int             `json:"attempts"`
	Depth       int             `json:"depth"`
	Async       bool            `json:"async,omitempty"`
	// NeedsInput is set when an A2A agent ended in input-required: the
	// result is its question.
	NeedsInput bool `json:"needsInput,omitempty"`
	// Response is the whole AgentResponse of an MCP agent.
	Response   *AgentResponse `json:"response,omitempty"`
	CreatedAt  time.Time      `json:"createdAt"`
	UpdatedAt  time.Time      `json:"updatedAt"`
	FinishedAt *time.Time     `json:"finishedAt,omitempty"`
	// Deadline is when an accepted (async) delegation times out.
	Deadline *time.Time `json:"deadline,omitempty"`
	// SecretHash is the SHA-256 of the callback secret (async and http
	// delegations). Stored, never returned by read paths.
	SecretHash []byte `json:"secretHash,omitempty"`
	// Owner is the owner id of the client that created the record, when
	// its store is an [OwnerStore] (several replicas over one etcd); empty
	// otherwise. While the record is running, it belongs to that owner:
	// when the owner dies, another client interrupts it. An opaque id
	// (the client logs it when it takes it), shown on read paths so that
	// an operator can tell which replica ran a delegation.
	Owner string `json:"owner,omitempty"`
	// Principal is the principal that started the delegation (see
	// package principal), when the caller had one; a record without one
	// is principal.Default's. Only it and admins see the record: for
	// others Get, Wait and Cancel answer [ErrNotFound] and List leaves it
	// out.
	Principal string `json:"principal,omitempty"`
}

// Clone returns a deep copy of r: its byte slices, times and response are
// copied, and the response's WorkflowState at every depth.
func (r Record) Clone() Record {
	r.Result = bytes.Clone(r.Result)
	r.SecretHash = bytes.Clone(r.SecretHash)
	if r.Response != nil {
		resp := *r.Response
		resp.WorkflowState = jsonvalue.CloneMap(resp.WorkflowState)
		r.Response = &resp
	}
	r.FinishedAt = clonePtr(r.FinishedAt)
	r.Deadline = clonePtr(r.Deadline)
	return r
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Public returns a copy of r for read paths: without the callback secret
// hash.
func (r Record) Public() Record {
	r.SecretHash = nil
	return r
}

// Failure describes a record that did not complete, for a caller to read:
// its code (the status when the record has none, like canceled) and its
// error message (a sentence naming the status when the record has none).
func (r Record) Failure() (code, msg string) {
	code = r.Code
	if code == "" {
		code = string(r.Status)
	}
	msg = strings.TrimSpace(r.Error)
	if msg == "" {
		msg = "the delegation ended " + string(r.Status)
	}
	return code, msg
}

// newID returns a new delegation id: a version 7 UUID, whose first 48
// bits are the creation time in milliseconds (then a counter and random
// bits), so a store keyed by id appends new records instead of writing
// them all over its pages. An id is a name, not a secret: what guards a
// record is its principal, and a callback its own secret.
func newID() string {
	return uuid.Must(uuid.NewV7()).String()
}
