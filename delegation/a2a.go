package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2alog "github.com/a2aproject/a2a-go/v2/log"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/registry"
)

const (
	// a2aPollFirst is the wait before the first GetTask of a task the
	// agent left working; each later wait doubles, up to a2aPollMax.
	a2aPollFirst = 100 * time.Millisecond
	// a2aPollMax caps the wait between two GetTask calls.
	a2aPollMax = time.Second
	// a2aPollFailures is how many transient GetTask failures in a row
	// (connection refused, 429, 502, 503, 504) a poll loop rides out.
	a2aPollFailures = 3
	// a2aTextLimit caps the agent text quoted in a TransportError.Message.
	a2aTextLimit = 1 << 10
)

// A2AOptions configures an [A2ATransport]. A nil *A2AOptions, like the zero
// value, means all defaults.
type A2AOptions struct {
	// HTTPClient sends every request to agents. Nil means a client from
	// netguard with a nil policy, which allows private addresses (the
	// library default of the endpoint policy); pass (*netguard.Policy).NewClient to
	// enforce an endpoint policy at dial time. The transport uses a copy
	// whose Transport is wrapped to observe statuses and cap replies, and
	// whose CheckRedirect refuses redirects. Its Timeout should be 0: the
	// context bounds each call.
	HTTPClient *http.Client

	// MaxResponseBytes caps each HTTP response body read from an agent,
	// JSON-RPC envelope included, and the result taken from it; a bigger
	// one fails with response_too_large. ≤ 0 means [MaxResultBytes]
	// (4 MiB).
	MaxResponseBytes int64

	// Propagator writes the trace context of each Send into its requests
	// (with propagation.TraceContext, the W3C traceparent and tracestate
	// headers). Nil means the global propagator
	// (otel.GetTextMapPropagator), a no-op unless the host installs one.
	Propagator propagation.TextMapPropagator

	// Logger receives what the a2a-go client logs (nothing in normal
	// operation). Nil means no logging.
	Logger *slog.Logger
}

// A2ATransport is the [Transport] for agents with protocol a2a:
// A2A 1.0 agents reached over the JSON-RPC binding at their endpoint (the
// URL of the Agent Card's JSON-RPC interface, see [a2acard.ToAgent]).
//
// Send calls SendMessage with header A2A-Version: 1.0, the agent's auth
// header and the task as one text part of a user message whose id is the
// delegation id (the same on every retry, so an agent may de-duplicate)
// and whose metadata is the message context. The agent's label
// [a2acard.LabelTenant], when set, is sent as the tenant. The reply is
// read as follows:
//
//   - a Message: completed, with its content as the result;
//   - a Task in state completed: completed, with the content of its
//     artifacts as the result (else its status message, else the last
//     agent message of its history);
//   - failed, rejected or canceled: a failure with code agent_error and
//     the agent's status message;
//   - input-required or auth-required: completed with Reply.NeedsInput
//     set and the agent's question (its status message) as the result;
//   - submitted or working: the task is polled with GetTask, first after
//     100 ms and then at doubling intervals up to 1 s, until it reaches
//     one of the states above or ctx ends (a Send without a deadline may
//     poll forever). Up to three transient GetTask failures in a row are
//     ridden out; the task is never sent again.
//
// Content is text parts concatenated as they are, with each data part (as
// JSON), URL part (as the URL) and raw part (as a placeholder) on a line
// of its own; the result is that text as a JSON string, except that
// content made of one data part alone is that data's JSON value.
//
// Failures are *[TransportError] values, classified like those of
// [HTTPTransport]: a failure to connect (refused, DNS) and HTTP 429, 502,
// 503 and 504 are retryable, other statuses (redirects included: they are
// never followed) and JSON-RPC errors are agent_error, a reply over
// MaxResponseBytes is response_too_large, a refusal by the endpoint policy
// endpoint_not_allowed. Only SendMessage failures may be retryable: once
// the agent has the task, a failure to poll it is final.
//
// JSON-RPC over HTTP has no session to keep, so nothing is cached per
// agent beyond the connections of the HTTP client; an agent's new endpoint
// or auth is used by the next Send. An A2ATransport holds no goroutines and
// is safe for concurrent use. Create one with [NewA2ATransport]; the zero
// value refuses every Send.
type A2ATransport struct {
	httpClient *http.Client // the agents' client, through a recorder
	userAgent  string
	maxBytes   int64
	logger     *slog.Logger
}

// NewA2ATransport returns an A2ATransport with the given options. The
// options are copied.
func NewA2ATransport(opts *A2AOptions) *A2ATransport {
	var o A2AOptions
	if opts != nil {
		o = *opts
	}
	hc, rt, logger := transportDefaults(o.HTTPClient, o.Logger)
	maxBytes := o.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = MaxResultBytes
	}
	// The recorder keeps the head of a reply other than 200, which the
	// SDK drops.
	rec := &recorder{base: rt, prop: tracing.Propagator(o.Propagator), maxBytes: maxBytes, keepHead: true}
	return &A2ATransport{
		httpClient: agentClient(hc, rec),
		userAgent:  "agentmesh/" + buildinfo.Version(),
		maxBytes:   maxBytes,
		logger:     logger,
	}
}

// Send sends msg to the agent with SendMessage and waits for the task's
// outcome. It implements [Transport].
func (t *A2ATransport) Send(ctx context.Context, agent registry.Agent, msg Message) (Reply, error) {
	if t.httpClient == nil {
		return Reply{}, &TransportError{Code: apierr.CodeInvalidArgument, Message: "a2a transport not initialised: use NewA2ATransport"}
	}
	if err := checkEndpoint(agent.Endpoint); err != nil {
		return Reply{}, err
	}
	params, err := t.serviceParams(agent)
	if err != nil {
		return Reply{}, err
	}
	// The SDK logs through the context's logger, by default slog's global
	// one; library code must not write there.
	ctx = a2alog.AttachLogger(ctx, t.logger)
	ctx, call := t.newCall(ctx, agent, params)

	res, err := call.rpc.SendMessage(ctx, call.params, a2aSendRequest(msg, call.tenant))
	if err != nil {
		return Reply{}, call.classify(ctx, err)
	}
	switch r := res.(type) {
	case *a2a.Message:
		return t.reply(a2aContent(r.Parts))
	case *a2a.Task:
		return t.await(ctx, call, r)
	}
	// Unreachable: the SDK returns a Message or a Task, or an error.
	return Reply{}, &TransportError{
		Code:    CodeBadResponse,
		Message: fmt.Sprintf("agent replied with %T, want a Message or a Task", res),
	}
}

// serviceParams returns the headers of every request to agent: the A2A
// version, the User-Agent and the agent's auth.
func (t *A2ATransport) serviceParams(agent registry.Agent) (a2aclient.ServiceParams, error) {
	params := a2aclient.ServiceParams{
		a2a.SvcParamVersion: {string(a2a.Version)},
		"User-Agent":        {t.userAgent},
	}
	auth := agent.Auth
	if auth == nil || auth.Token == "" {
		return params, nil
	}
	switch auth.Type {
	case "", registry.AuthNone:
	case registry.AuthBearer:
		params["Authorization"] = []string{"Bearer " + auth.Token}
	case registry.AuthHeader:
		if auth.HeaderName != "" {
			params[auth.HeaderName] = []string{auth.Token}
		}
	default:
		return nil, &TransportError{
			Code:    apierr.CodeInvalidArgument,
			Message: fmt.Sprintf("agent auth type %q is not supported", auth.Type),
		}
	}
	return params, nil
}

// a2aSendRequest is the SendMessage request of msg: the task as one text
// part of a user message, the message context as its metadata. A routed
// message's session is the A2A context (contextId), and its conversation
// (session, user, locale, entryPoint, metadata: what an http agent gets
// in its POST /task body) is added to the metadata. Without a delegation
// id (a Transport used on its own) the message id is random.
func a2aSendRequest(msg Message, tenant string) *a2a.SendMessageRequest {
	id := msg.DelegationID
	if id == "" {
		id = a2a.NewMessageID()
	}
	m := &a2a.Message{
		ID:       id,
		Role:     a2a.MessageRoleUser,
		Parts:    a2a.ContentParts{a2a.NewTextPart(msg.Task)},
		Metadata: msg.Context, // only encoded: never modified
	}
	if msg.Turn != nil {
		b := newTaskBody(msg)
		meta := maps.Clone(msg.Context)
		if meta == nil {
			meta = map[string]any{}
		}
		add := func(key string, v any, set bool) {
			if set {
				meta[key] = v
			}
		}
		add("session", b.Session, b.Session != nil)
		add("user", b.User, b.User != nil)
		add("locale", b.Locale, b.Locale != "")
		add("entryPoint", b.EntryPoint, b.EntryPoint != "")
		add("metadata", b.Metadata, len(b.Metadata) > 0)
		m.Metadata = meta
		if b.Session != nil {
			m.ContextID = b.Session.ID
		}
	}
	return &a2a.SendMessageRequest{Tenant: tenant, Message: m}
}

// await waits for task to reach a state that ends the delegation, polling
// it with GetTask.
func (t *A2ATransport) await(ctx context.Context, call *a2aCall, task *a2a.Task) (Reply, error) {
	wait, failures := a2aPollFirst, 0
	for {
		content, final, err := a2aTaskOutcome(task)
		if final {
			if err != nil {
				return Reply{}, err
			}
			reply, err := t.reply(content)
			if err != nil {
				return Reply{}, err
			}
			reply.NeedsInput = a2aNeedsInput(task.Status.State)
			return reply, nil
		}
		if task.ID == "" {
			return Reply{}, &TransportError{
				Code:    CodeBadResponse,
				Message: "agent returned an unfinished task without an id: it cannot be polled",
			}
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return Reply{}, contextError(err, "waiting for the agent's task to finish")
		}
		next, err := call.rpc.GetTask(ctx, call.params, &a2a.GetTaskRequest{Tenant: call.tenant, ID: task.ID})
		if err != nil {
			terr := call.classify(ctx, err)
			if terr.Retryable && failures < a2aPollFailures && ctx.Err() == nil {
				failures++
				wait = max(min(2*wait, a2aPollMax), terr.RetryAfter)
				continue
			}
			// The agent has the task: resending it is never safe.
			terr.Retryable, terr.RetryAfter = false, 0
			terr.Message = "polling the agent's task: " + terr.Message
			return Reply{}, terr
		}
		if next == nil {
			return Reply{}, &TransportError{Code: CodeBadResponse, Message: "agent answered GetTask without a task"}
		}
		task, failures, wait = next, 0, min(2*wait, a2aPollMax)
	}
}

// reply is the Reply of content, refused when its result is over the cap.
func (t *A2ATransport) reply(content a2aResult) (Reply, error) {
	result := content.json()
	if int64(len(result)) > t.maxBytes {
		return Reply{}, &TransportError{
			Code:    CodeResponseTooLarge,
			Message: fmt.Sprintf("agent result is over the limit of %d bytes", t.maxBytes),
		}
	}
	return Reply{Result: result}, nil
}

// a2aNeedsInput reports whether a task in state s waits for the caller.
func a2aNeedsInput(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// a2aTaskOutcome reads what task's state means for the delegation. final
// is false while the agent is still at it (submitted, working). A final
// task gives its content (the result, or the agent's question) or, when it
// did not complete, a *TransportError with the agent's status message.
func a2aTaskOutcome(task *a2a.Task) (content a2aResult, final bool, err error) {
	status := task.Status
	switch s := status.State; s {
	case a2a.TaskStateSubmitted, a2a.TaskStateWorking:
		return a2aResult{}, false, nil
	case a2a.TaskStateCompleted:
		result := a2aFirstContent(
			a2aArtifactParts(task.Artifacts),
			a2aMessageParts(status.Message),
			a2aLastAgentParts(task.History),
		)
		return result, true, nil
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		q := a2aFirstContent(a2aMessageParts(status.Message), a2aLastAgentParts(task.History))
		if q.empty() {
			q = a2aResult{text: "the agent needs more input (it asked no question)"}
			if s == a2a.TaskStateAuthRequired {
				q.text = "the agent requires authentication (it gave no details)"
			}
		}
		return q, true, nil
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateCanceled:
		why := strings.TrimSpace(a2aContent(a2aMessageParts(status.Message)...).text)
		if why == "" {
			why = "(no details)"
		}
		return a2aResult{}, true, &TransportError{
			Code:    CodeAgentError,
			Message: a2aEndedVerb(s) + ": " + truncateText(why, a2aTextLimit),
		}
	default:
		return a2aResult{}, true, &TransportError{
			Code:    CodeBadResponse,
			Message: fmt.Sprintf("agent task is in unknown state %q", truncateText(string(s), 64)),
		}
	}
}

// a2aEndedVerb says how a task that did not complete ended.
func a2aEndedVerb(s a2a.TaskState) string {
	switch s {
	case a2a.TaskStateRejected:
		return "agent rejected the task"
	case a2a.TaskStateCanceled:
		return "agent canceled the task"
	}
	return "agent task failed"
}

// a2aArtifactParts returns the parts of each artifact.
func a2aArtifactParts(artifacts []*a2a.Artifact) []a2a.ContentParts {
	var out []a2a.ContentParts
	for _, a := range artifacts {
		if a != nil {
			out = append(out, a.Parts)
		}
	}
	return out
}

// a2aMessageParts returns the parts of m, if any.
func a2aMessageParts(m *a2a.Message) []a2a.ContentParts {
	if m == nil {
		return nil
	}
	return []a2a.ContentParts{m.Parts}
}

// a2aLastAgentParts returns the parts of the last agent message of
// history, if any.
func a2aLastAgentParts(history []*a2a.Message) []a2a.ContentParts {
	for i := len(history) - 1; i >= 0; i-- {
		if m := history[i]; m != nil && m.Role == a2a.MessageRoleAgent {
			return []a2a.ContentParts{m.Parts}
		}
	}
	return nil
}

// a2aFirstContent returns the content of the first candidate that is not
// empty (an empty text when none has content).
func a2aFirstContent(candidates ...[]a2a.ContentParts) a2aResult {
	for _, c := range candidates {
		if r := a2aContent(c...); !r.empty() {
			return r
		}
	}
	return a2aResult{}
}

// a2aResult is the content of a message or of a task's artifacts.
type a2aResult struct {
	// text is the content as text.
	text string
	// data is the JSON of the only part, when that part is a data part.
	data json.RawMessage
}

// empty reports whether r has no content.
func (r a2aResult) empty() bool { return r.data == nil && strings.TrimSpace(r.text) == "" }

// json is the delegation result of r: its data, else its text as a JSON
// string.
func (r a2aResult) json() json.RawMessage {
	if r.data != nil {
		return r.data
	}
	b, _ := json.Marshal(r.text) // a string always encodes
	return b
}

// a2aContent renders groups of parts (one message, or the artifacts of a
// task in order) as an a2aResult. Text parts are concatenated as they are
// (an agent that streams a reply appends its chunks as parts); any other
// part is rendered by a2aPartLine on a line of its own; successive groups
// are separated by a newline. Nil parts are skipped.
func a2aContent(groups ...a2a.ContentParts) a2aResult {
	var (
		b    strings.Builder
		n    int             // parts rendered
		data json.RawMessage // the JSON of the first part, if it is a data part
	)
	for i, parts := range groups {
		if i > 0 {
			a2aNewline(&b)
		}
		for _, p := range parts {
			if p == nil || p.Content == nil {
				continue
			}
			n++
			if text, ok := p.Content.(a2a.Text); ok {
				b.WriteString(strings.ToValidUTF8(string(text), "\uFFFD"))
				continue
			}
			line := a2aPartLine(p)
			if _, ok := p.Content.(a2a.Data); ok && n == 1 {
				data = json.RawMessage(line)
			}
			a2aNewline(&b)
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	r := a2aResult{text: strings.TrimSuffix(b.String(), "\n")}
	if n == 1 {
		r.data = data
	}
	return r
}

// a2aNewline starts a new line in b, unless b is empty or at the start of
// a line.
func a2aNewline(b *strings.Builder) {
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
}

// a2aPartLine renders a part other than text: a data part as its JSON, a
// URL part as the URL, a raw part as a placeholder naming its size, media
// type and filename.
func a2aPartLine(p *a2a.Part) string {
	switch c := p.Content.(type) {
	case a2a.Data:
		data, err := json.Marshal(c.Value)
		if err != nil { // unreachable for a decoded JSON value
			return "null"
		}
		return string(data)
	case a2a.URL:
		return strings.ToValidUTF8(string(c), "\uFFFD")
	case a2a.Raw:
		return fmt.Sprintf("[%d bytes of %s]", len(c), a2aRawLabel(p))
	}
	return fmt.Sprintf("[%T part]", p.Content) // unreachable: the union is sealed
}

// a2aRawLabel names the content of a raw part: its filename and media
// type, when given.
func a2aRawLabel(p *a2a.Part) string {
	label := "binary content"
	if mt := strings.TrimSpace(p.MediaType); mt != "" {
		label = truncateText(mt, 128)
	}
	if name := strings.TrimSpace(p.Filename); name != "" {
		label += " " + fmt.Sprintf("%q", truncateText(name, 256))
	}
	return label
}

// a2aCall is the A2A client of one Send: an a2a-go JSON-RPC transport over
// the transport's HTTP client, whose [recorder] reports to the exchange of
// the Send.
//
// Why a2a-go's client and not a JSON-RPC client of our own: it takes our
// *http.Client (so the endpoint policy applies at dial time) and our
// headers as ServiceParams, and owns the A2A wire format (method names,
// the JSON-RPC envelope, the Task/Message union, error codes). What it
// lacks — it reports HTTP statuses only as text and reads replies without
// a size limit — the recorder adds. Its transport is used directly
// rather than through a2aclient.Client, which would add the tenant and
// service parameters found in the caller's context (those of an A2A
// request the mesh is serving) to every call.
type a2aCall struct {
	rpc      a2aclient.Transport
	params   a2aclient.ServiceParams
	tenant   string
	ex       *exchange
	maxBytes int64
}

// newCall returns the client of one Send to agent, and the context its
// requests must be made with.
func (t *A2ATransport) newCall(ctx context.Context, agent registry.Agent, params a2aclient.ServiceParams) (context.Context, *a2aCall) {
	ctx, ex := withExchange(ctx)
	return ctx, &a2aCall{
		rpc:      a2aclient.NewJSONRPCTransport(agent.Endpoint, t.httpClient),
		params:   params,
		tenant:   agent.Labels[a2acard.LabelTenant],
		ex:       ex,
		maxBytes: t.maxBytes,
	}
}

// classify turns the error of a call into a *TransportError from what the
// round tripper saw, without matching error strings. Messages are fixed
// phrases plus the agent's own words; the SDK's text, which may quote the
// endpoint URL, stays in Err.
func (c *a2aCall) classify(ctx context.Context, err error) *TransportError {
	seen := c.ex.snapshot()
	var a2aErr *a2a.Error
	switch {
	case seen.rtErr != nil:
		return requestError(ctx, seen.rtErr, seen.connected)
	case ctx.Err() != nil:
		return contextError(ctx.Err(), "waiting for the agent")
	case !seen.sent:
		return &TransportError{Code: apierr.CodeInvalidArgument, Err: err,
			Message: "the request to the agent cannot be built (is the context JSON?)"}
	case seen.tooLarge:
		return &TransportError{Code: CodeResponseTooLarge, Status: seen.status,
			Message: fmt.Sprintf("agent reply is over the limit of %d bytes", c.maxBytes), Err: err}
	case seen.status != http.StatusOK:
		return statusError(seen.status, seen.retryAfter, headDetail(seen.head), err)
	case errors.As(err, &a2aErr):
		msg := strings.TrimSpace(a2aErr.Message)
		return &TransportError{Code: CodeAgentError, Err: err,
			Message: fmt.Sprintf("agent returned A2A error %s: %s",
				a2a.ErrorReason(a2aErr.Err), truncateText(msg, a2aTextLimit))}
	case seen.bodyErr != nil:
		return &TransportError{Code: CodeAgentUnreachable, Err: err,
			Message: "the agent's connection broke before the reply was complete"}
	}
	return &TransportError{Code: CodeBadResponse, Err: err,
		Message: "the agent's reply is not a valid A2A JSON-RPC response"}
}
