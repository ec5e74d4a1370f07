package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/session"
)

// openSession returns the user's active session, creating it for agent if
// there is none, makes agent its active agent (unless agent is empty) and
// appends the user turn. A session closed by a concurrent request between
// these writes is replaced once.
func (r *Router) openSession(ctx context.Context, t *turn, agent string) (session.Session, error) {
	userTurn := session.Turn{Role: session.RoleUser, Content: t.req.Input, IntentSummary: t.cls.IntentSummary}
	var lastErr error
	for range 2 {
		s, created, err := r.sessions.GetOrCreate(ctx, session.Params{
			UserID:      t.user,
			EmployeeID:  t.req.EmployeeID,
			ActiveAgent: agent,
			Metadata:    t.req.Metadata,
		})
		if err != nil {
			return session.Session{}, fmt.Errorf("routing: open session: %w", err)
		}
		if !created && agent != "" && s.ActiveAgent != agent {
			if _, err := r.sessions.SetActiveAgent(ctx, s.ID, agent); err != nil {
				if lastErr = err; gone(err) {
					continue
				}
				return session.Session{}, fmt.Errorf("routing: set session agent: %w", err)
			}
		}
		// s is the state before this turn: its history is what the agent
		// gets as turn_history (the current message is raw_input).
		if _, err := r.sessions.AppendTurns(ctx, s.ID, userTurn); err != nil {
			if lastErr = err; gone(err) {
				continue
			}
			return session.Session{}, fmt.Errorf("routing: append user turn: %w", err)
		}
		return s, nil
	}
	return session.Session{}, fmt.Errorf("routing: open session: %w", lastErr)
}

// failure is one failed dispatch.
type failure struct {
	agent  string
	code   string    // error code (docs/API.md#errors)
	reason Reason    // ReasonAgentUnavailable or ReasonDispatchFailed
	detail string    // human text
	until  time.Time // when the agent's breaker half-opens; zero if unknown
}

// dispatch sends the message to t.dec.Agent, falling back to the default
// agent once, and keeps the session (steps 6 and 7 of [Router.Handle]).
func (r *Router) dispatch(ctx context.Context, t *turn) (resp Response, err error) {
	target := t.dec.Agent
	ctx, span := r.startDispatch(ctx, t)
	defer func() { endDispatch(span, target, &resp, err) }()
	var (
		sid   string
		trn   = r.turnFor(t)
		bg    = context.WithoutCancel(ctx)
		agent = target // the session's agent
	)
	if t.user != "" {
		s, err := r.openSession(ctx, t, target)
		if err != nil {
			return Response{}, err
		}
		sid = s.ID
		trn.SessionID = sid
		trn.History = historyOf(s.TurnHistory)
		trn.WorkflowState = s.WorkflowState
	} else {
		sid = t.req.SessionID
		trn.SessionID = sid
	}

	rec, fail := r.try(ctx, target, t.text, trn)
	var fails []*failure
	if fail != nil {
		if err := ctx.Err(); err != nil {
			// The caller gave up: no fallback, and the session stays as
			// it is (the agent may have handled the message).
			return Response{}, err
		}
		fails = append(fails, fail)
		if def := r.defaultAgent(); def != "" && def != target {
			t.dec = Decision{
				Action: ActionFallback,
				Reason: fail.reason,
				Detail: fail.detail + ", falling back to default",
				Agent:  def,
			}
			rec, fail = r.try(ctx, def, t.text, trn)
			if fail != nil {
				if err := ctx.Err(); err != nil {
					return Response{}, err
				}
				fails = append(fails, fail)
			}
		}
	}
	if fail != nil {
		if sid != "" && t.user != "" {
			if _, err := r.sessions.CloseSession(bg, sid, session.StatusError); err != nil && !gone(err) {
				r.log.Warn("routing: close failed session", "request_id", t.id, "session_id", sid, "err", err)
			}
		}
		return Response{}, r.unavailable(fails)
	}

	content, complete, state := replyOf(rec)
	answered := rec.TargetAgent
	if answered == "" {
		answered = t.dec.Agent
	}
	if sid != "" && t.user != "" {
		r.record(bg, t, sid, agent, answered, content, complete, state)
	}
	resp = r.reply(t, sid)
	resp.AgentID = answered
	resp.Response = content
	resp.WorkflowComplete = complete
	resp.DelegationID = rec.ID
	return resp, nil
}

// record writes the agent's turn, its agent and its workflow state to the
// session, and closes it when the workflow is complete. The reply is
// already in hand, so failures are logged, not returned.
func (r *Router) record(ctx context.Context, t *turn, sid, agent, answered, content string, complete bool, state map[string]any) {
	warn := func(what string, err error) {
		if err != nil && !gone(err) {
			r.log.Warn("routing: "+what, "request_id", t.id, "session_id", sid, "err", err)
		}
	}
	if answered != agent {
		// The session follows the agent that answered (a fallback).
		_, err := r.sessions.SetActiveAgent(ctx, sid, answered)
		warn("set session agent", err)
	}
	_, err := r.sessions.AppendTurns(ctx, sid, session.Turn{Role: session.RoleAgent, Content: content, Agent: answered})
	warn("append agent turn", err)
	if state != nil {
		_, err := r.sessions.SetWorkflowState(ctx, sid, state)
		warn("set workflow state", err)
	}
	if complete {
		_, err := r.sessions.CloseSession(ctx, sid, session.StatusCompleted)
		warn("close completed session", err)
	}
}

// try dispatches once to the agent called name.
func (r *Router) try(ctx context.Context, name, task string, trn *delegation.Turn) (delegation.Record, *failure) {
	if b := r.breakers.Lookup(name); b != nil {
		if snap := b.Snapshot(); snap.State == breaker.StateOpen {
			return delegation.Record{}, &failure{
				agent:  name,
				code:   delegation.CodeAgentUnavailable,
				reason: ReasonAgentUnavailable,
				detail: fmt.Sprintf("Agent %s unavailable (circuit breaker open)", quoteID(name)),
				until:  snap.OpenUntil,
			}
		}
	}
	rec, err := r.dispatcher.Delegate(ctx, delegation.Request{
		Target:  name,
		Task:    task,
		Timeout: r.timeout,
		Turn:    trn,
	})
	if err != nil {
		code := delegation.Code(err)
		if code == "" {
			code = delegation.CodeAgentUnreachable
		}
		return rec, &failure{
			agent:  name,
			code:   code,
			reason: ReasonDispatchFailed,
			detail: fmt.Sprintf("Dispatch to %s refused (%s)", quoteID(name), code),
		}
	}
	switch {
	case rec.Status == delegation.StatusCompleted:
		return rec, nil
	case rec.Code == delegation.CodeAgentUnavailable:
		return rec, &failure{
			agent:  name,
			code:   rec.Code,
			reason: ReasonAgentUnavailable,
			detail: fmt.Sprintf("Agent %s unavailable", quoteID(name)),
		}
	}
	code := rec.Code
	if code == "" {
		code = string(rec.Status) // accepted: an async answer cannot reply to this turn
	}
	return rec, &failure{
		agent:  name,
		code:   code,
		reason: ReasonDispatchFailed,
		detail: fmt.Sprintf("Dispatch to %s failed (%s)", quoteID(name), code),
	}
}

// unavailable builds the error for a request no agent could take.
func (r *Router) unavailable(fails []*failure) error {
	now := r.now()
	e := &UnavailableError{}
	for _, f := range fails {
		e.Agents = append(e.Agents, f.agent)
		e.Codes = append(e.Codes, f.code)
		after := r.retryAfter
		if !f.until.IsZero() {
			after = f.until.Sub(now)
		}
		if e.RetryAfter == 0 || after < e.RetryAfter {
			e.RetryAfter = after
		}
	}
	// Whole seconds (Retry-After's unit), rounded up, at least one.
	e.RetryAfter = max(time.Second, (e.RetryAfter + time.Second - 1).Truncate(time.Second))
	return e
}

// turnFor builds the handle_message fields of t, without the session's.
func (r *Router) turnFor(t *turn) *delegation.Turn {
	employee := t.req.EmployeeID
	if employee == "" {
		employee = t.user
	}
	display := t.req.DisplayName
	if display == "" {
		display = employee
	}
	return &delegation.Turn{
		UserID:           t.user,
		Locale:           t.req.Locale,
		EntryPoint:       t.req.EntryPoint,
		EmployeeID:       employee,
		DisplayName:      display,
		IntentSummary:    t.cls.IntentSummary,
		Entities:         t.cls.Entities,
		DetectedLanguage: t.cls.DetectedLanguage,
		History:          []delegation.TurnEntry{},
		WorkflowState:    map[string]any{},
		Metadata:         agentMetadata(t.req.Metadata),
	}
}

// ReservedMetadataPrefix starts the metadata keys that are the mesh's own
// (such as the HTTP API's session owner): they are kept on the session but
// never sent to agents.
const ReservedMetadataPrefix = "agentmesh_"

// agentMetadata is m without its reserved keys: m itself when it has none.
func agentMetadata(m map[string]any) map[string]any {
	reserved := false
	for k := range m {
		if strings.HasPrefix(k, ReservedMetadataPrefix) {
			reserved = true
			break
		}
	}
	if !reserved {
		return m
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, ReservedMetadataPrefix) {
			out[k] = v
		}
	}
	return out
}

// historyOf converts a session history to handle_message turn entries.
func historyOf(h []session.Turn) []delegation.TurnEntry {
	out := make([]delegation.TurnEntry, 0, len(h))
	for _, e := range h {
		out = append(out, delegation.TurnEntry{
			Role:          string(e.Role),
			Content:       e.Content,
			Timestamp:     e.Timestamp.UTC().Format(time.RFC3339Nano),
			IntentSummary: e.IntentSummary,
			Agent:         e.Agent,
		})
	}
	return out
}

// replyOf reads the answer of a completed delegation: an MCP agent's
// AgentResponse; for other agents the result, taken as an AgentResponse
// when it is a JSON object with a non-blank string "content", else as a
// string (a JSON string unquoted, any other JSON as its text).
func replyOf(rec delegation.Record) (content string, complete bool, state map[string]any) {
	if ar := rec.Response; ar != nil {
		return ar.Content, ar.WorkflowComplete, ar.WorkflowState
	}
	if len(rec.Result) == 0 {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(rec.Result, &s); err == nil {
		return s, false, nil
	}
	var ar struct {
		Content          *string        `json:"content"`
		WorkflowComplete *bool          `json:"workflow_complete"`
		WorkflowState    map[string]any `json:"workflow_state"`
	}
	if err := json.Unmarshal(rec.Result, &ar); err == nil && ar.Content != nil && strings.TrimSpace(*ar.Content) != "" {
		return *ar.Content, ar.WorkflowComplete != nil && *ar.WorkflowComplete, ar.WorkflowState
	}
	return string(rec.Result), false, nil
}
