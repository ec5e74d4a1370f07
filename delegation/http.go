package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// maxErrorBody is how much of a failed reply's body goes into the error.
const maxErrorBody = 1 << 10

// maxRetryAfter caps a Retry-After header; the delegation deadline caps it
// further.
const maxRetryAfter = time.Hour

// HTTPTransport is the [Transport] of protocol http: the agentkit-mesh
// POST /task contract.
//
// It POSTs {delegationId, task, context, callbackUrl?} as JSON to the
// agent's endpoint (callbackUrl when the message has one, as a [Client]
// gives every delegation; a routed message adds session {id, turns,
// workflowState}, user {id, employeeId, displayName}, locale, entryPoint
// and metadata) with Content-Type, X-Mesh-Delegation-Id,
// User-Agent (agentmesh/<version>) and the agent's auth header, and reads
// the reply:
//
//   - 200: the result is the body's "result" value if the body is a JSON
//     object with that key, else the whole JSON body; a body that is not
//     JSON is a string result. Top-level workflowComplete and
//     workflowState next to result are the conversation's (the record's
//     Response). A body over MaxResultBytes fails with code
//     response_too_large.
//   - 202: accepted; the agent will call back.
//   - anything else, redirects included (they are never followed): a
//     failure with the text "agent returned <status>: <first 1 KiB of
//     body>" and code agent_error. 429, 502, 503 and 504 are retryable,
//     with the agent's Retry-After.
//
// A failure to connect (refused, DNS) is retryable, with code
// agent_unreachable; a refusal by the endpoint policy is not, with code
// endpoint_not_allowed.
//
// The trace context of ctx, when it has one, is sent along with the global
// propagator (otel.GetTextMapPropagator; the transport of a [Client] uses
// Options.Propagator instead): with propagation.TraceContext, the W3C
// traceparent and tracestate headers. An HTTPTransport is safe for
// concurrent use. Create one with [NewHTTPTransport]; the zero value refuses
// every Send.
type HTTPTransport struct {
	client    *http.Client
	userAgent string
}

// NewHTTPTransport returns the http transport over client, which should
// come from [netguard.Policy.NewClient] (nil means the client of a nil
// Policy: private addresses allowed). The transport uses a copy of client
// that never follows redirects.
func NewHTTPTransport(client *http.Client) *HTTPTransport {
	return newHTTPTransport(client, nil)
}

// newHTTPTransport is NewHTTPTransport with the propagator of the trace
// context (nil means the global one).
func newHTTPTransport(client *http.Client, prop propagation.TextMapPropagator) *HTTPTransport {
	hc, rt, _ := transportDefaults(client, nil)
	return &HTTPTransport{
		client:    agentClient(hc, &recorder{base: rt, prop: tracing.Propagator(prop)}),
		userAgent: "agentmesh/" + buildinfo.Version(),
	}
}

// taskBody is the request body of POST /task. A routed message (one with
// a Turn) adds the conversation: session, user, locale, entryPoint and
// metadata, which agents that do not know them ignore.
type taskBody struct {
	DelegationID string         `json:"delegationId"`
	Task         string         `json:"task"`
	Context      map[string]any `json:"context"`
	CallbackURL  string         `json:"callbackUrl,omitempty"`
	Session      *taskSession   `json:"session,omitempty"`
	User         *taskUser      `json:"user,omitempty"`
	Locale       string         `json:"locale,omitempty"`
	EntryPoint   string         `json:"entryPoint,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// taskSession is the session of a routed message: its id, its turns
// before this message (oldest first, at most the session's cap) and the
// state the agent last returned.
type taskSession struct {
	ID            string         `json:"id"`
	Turns         []taskTurn     `json:"turns"`
	WorkflowState map[string]any `json:"workflowState"`
}

// taskTurn is one turn of a taskSession.
type taskTurn struct {
	Role    string `json:"role"` // user or agent
	Content string `json:"content"`
	Agent   string `json:"agent,omitempty"` // who answered, for an agent turn
	Time    string `json:"time,omitempty"`  // RFC 3339
}

// taskUser is who sent a routed message.
type taskUser struct {
	ID          string `json:"id,omitempty"`
	EmployeeID  string `json:"employeeId,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

// newTaskBody is the POST /task body of msg.
func newTaskBody(msg Message) taskBody {
	b := taskBody{DelegationID: msg.DelegationID, Task: msg.Task, Context: msg.Context, CallbackURL: msg.CallbackURL}
	tr := msg.Turn
	if tr == nil {
		return b
	}
	if tr.SessionID != "" {
		s := &taskSession{ID: tr.SessionID, Turns: make([]taskTurn, len(tr.History)), WorkflowState: tr.WorkflowState}
		for i, e := range tr.History {
			s.Turns[i] = taskTurn{Role: e.Role, Content: e.Content, Agent: e.Agent, Time: e.Timestamp}
		}
		if s.WorkflowState == nil {
			s.WorkflowState = map[string]any{}
		}
		b.Session = s
	}
	if tr.UserID != "" || tr.EmployeeID != "" || tr.DisplayName != "" {
		b.User = &taskUser{ID: tr.UserID, EmployeeID: tr.EmployeeID, DisplayName: tr.DisplayName}
	}
	b.Locale, b.EntryPoint, b.Metadata = tr.Locale, tr.EntryPoint, tr.Metadata
	return b
}

// Send implements [Transport].
func (t *HTTPTransport) Send(ctx context.Context, a registry.Agent, msg Message) (Reply, error) {
	if t.client == nil {
		return Reply{}, &TransportError{Code: apierr.CodeInvalidArgument, Message: "http transport not initialised: use NewHTTPTransport"}
	}
	// The body is not pooled: the http.Transport may still be reading it
	// after Do returns (a reply that comes before the body is written).
	body, err := json.Marshal(newTaskBody(msg))
	if err != nil {
		return Reply{}, &TransportError{Code: apierr.CodeInvalidArgument, Message: "the task does not encode as JSON", Err: err}
	}

	reqCtx, ex := withExchange(ctx)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, a.Endpoint, bytes.NewReader(body))
	if err != nil {
		return Reply{}, &TransportError{Code: CodeAgentUnreachable, Message: "invalid agent endpoint", Err: err}
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["X-Mesh-Delegation-Id"] = []string{msg.DelegationID}
	h["User-Agent"] = []string{t.userAgent}
	if auth := a.Auth; auth != nil && auth.Token != "" {
		switch auth.Type {
		case registry.AuthBearer:
			h["Authorization"] = []string{"Bearer " + auth.Token}
		case registry.AuthHeader:
			if auth.HeaderName != "" {
				h.Set(auth.HeaderName, auth.Token)
			}
		}
	}

	resp, err := t.client.Do(req)
	if err != nil {
		return Reply{}, requestError(ctx, err, ex.snapshot().connected)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		body, err := readBody(resp, MaxResultBytes)
		if err != nil {
			return Reply{}, bodyError(ctx, err)
		}
		return decodeReply(body), nil
	case http.StatusAccepted:
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10) // let the connection be reused
		return Reply{Accepted: true}, nil
	}
	head := readHead(resp.Body)
	return Reply{}, statusError(resp.StatusCode, resp.Header.Get("Retry-After"), headDetail(head), nil)
}

// errTooLarge is the error of readBody for a body over its limit.
var errTooLarge = errors.New("delegation: reply too large")

// readBody reads resp's body, refusing one over limit bytes.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, errTooLarge
	}
	size := int64(512)
	if resp.ContentLength > 0 {
		size = resp.ContentLength + 1 // +1: reach EOF without growing
	}
	b := make([]byte, 0, size)
	buf := bytes.NewBuffer(b)
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// bodyError maps a failure to read a reply body.
func bodyError(ctx context.Context, err error) *TransportError {
	switch {
	case errors.Is(err, errTooLarge):
		return &TransportError{Code: CodeResponseTooLarge, Status: http.StatusOK,
			Message: fmt.Sprintf("agent reply is over the limit of %d bytes", MaxResultBytes)}
	case ctx.Err() != nil:
		return &TransportError{Code: CodeTimeout, Message: "the deadline passed while reading the agent's reply", Err: err}
	default:
		return &TransportError{Code: CodeBadResponse, Message: "reading the agent's reply failed: " + cause(err), Err: err}
	}
}

// requestError maps an error of http.Client.Do. connected says whether a
// connection to the agent was obtained: before that, the request certainly
// did not reach the agent's handler and may be retried.
func requestError(ctx context.Context, err error, connected bool) *TransportError {
	if te := refusalError(err, nil); te != nil {
		return te
	}
	switch {
	case ctx.Err() != nil:
		return &TransportError{Code: CodeTimeout, Message: "no reply before the deadline", Err: err}
	case !connected:
		return &TransportError{Code: CodeAgentUnreachable, Retryable: true,
			Message: "cannot connect to the agent: " + netguard.DialCause(err), Err: err}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &TransportError{Code: CodeAgentUnreachable,
			Message: "the agent closed the connection without a reply: " + cause(err), Err: err}
	default:
		return &TransportError{Code: CodeBadResponse, Message: "the agent's reply is not valid HTTP: " + cause(err), Err: err}
	}
}

// cause is the text of err without the "Post \"<url>\": " prefix of a
// *url.Error (the URL may carry a query the user would not want repeated).
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err.Error()
	}
	return err.Error()
}

// decodeResult interprets the body of a 200 reply of POST /task: the value of
// its "result" key if it is a JSON object with one, else the whole JSON
// value, else (not JSON) the body as a JSON string.
func decodeResult(body []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		s, _ := json.Marshal(strings.ToValidUTF8(string(body), "\uFFFD"))
		return s
	}
	if trimmed[0] == '{' {
		if r, ok := resultField(trimmed); ok {
			return r
		}
	}
	return trimmed
}

// decodeReply is the Reply of an http agent's 200: its result
// ([decodeResult]) and, when the body is an object with a top-level
// workflowComplete or workflowState next to result, the conversation the
// agent reports, as the AgentResponse the router reads: Content is the
// result's text, WorkflowComplete ends the session, WorkflowState
// replaces the session's state.
func decodeReply(body []byte) Reply {
	r := Reply{Result: decodeResult(body)}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"workflow`)) {
		return r // the common reply: no conversation fields, no second decoding
	}
	var conv struct {
		WorkflowComplete *bool          `json:"workflowComplete"`
		WorkflowState    map[string]any `json:"workflowState"`
	}
	if json.Unmarshal(trimmed, &conv) != nil || conv.WorkflowComplete == nil && conv.WorkflowState == nil {
		return r
	}
	r.Response = &AgentResponse{
		Content:          resultText(r.Result),
		WorkflowComplete: conv.WorkflowComplete != nil && *conv.WorkflowComplete,
		WorkflowState:    conv.WorkflowState,
	}
	return r
}

// resultText is the text of a result: a JSON string unquoted, the
// "content" string of an object that has one, else the JSON itself.
func resultText(result json.RawMessage) string {
	var s string
	if json.Unmarshal(result, &s) == nil {
		return s
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(result, &obj) == nil && obj.Content != nil {
		return *obj.Content
	}
	return string(result)
}

// resultField returns the raw value of the top-level key "result" of a
// valid JSON object (the last one, if the key repeats).
func resultField(obj []byte) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // the opening brace
		return nil, false
	}
	var (
		val   json.RawMessage
		found bool
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if key, _ := tok.(string); key == "result" {
			val, found = v, true
		}
	}
	return val, found
}
