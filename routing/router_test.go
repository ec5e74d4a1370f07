package routing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// kwRule maps a keyword to a classification.
type kwRule struct {
	keyword    string
	agent      string
	confidence float64
	ambiguous  bool
}

// keywordClassifier is a deterministic Classifier: the first rule whose
// keyword occurs in the text wins; otherwise the default agent at 0.3.
type keywordClassifier struct {
	rules []kwRule
	def   string

	mu    sync.Mutex
	texts []string
	err   error
}

func (k *keywordClassifier) Classify(ctx context.Context, text string) (Classification, error) {
	k.mu.Lock()
	k.texts = append(k.texts, text)
	err := k.err
	k.mu.Unlock()
	if err != nil {
		return Classification{}, err
	}
	lower := strings.ToLower(text)
	for _, r := range k.rules {
		if strings.Contains(lower, r.keyword) {
			return Classification{
				AgentID: r.agent, Confidence: r.confidence, Ambiguous: r.ambiguous,
				IntentSummary: "asks about " + r.keyword, DetectedLanguage: "en",
				Entities: map[string]any{"topic": r.keyword},
			}, nil
		}
	}
	return Classification{AgentID: k.def, Confidence: 0.3, IntentSummary: "general question", DetectedLanguage: "en", Entities: map[string]any{}}, nil
}

func (k *keywordClassifier) setErr(err error) {
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
}

func (k *keywordClassifier) calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.texts...)
}

// httpAgent is an http agent answering POST /task with "<name>: <task>",
// or 500 while failing.
type httpAgent struct {
	name  string
	srv   *httptest.Server
	fail  atomic.Bool
	calls atomic.Int64
	// result, if set, is the whole JSON result value.
	result atomic.Pointer[string]
	// body, if set, is the whole reply body.
	body atomic.Pointer[string]
	// last is the body of the last POST /task.
	last atomic.Pointer[map[string]any]
}

func newHTTPAgent(t *testing.T, name string) *httpAgent {
	a := &httpAgent{name: name}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		var body struct {
			Task string `json:"task"`
		}
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		var all map[string]any
		_ = json.Unmarshal(raw, &all)
		a.last.Store(&all)
		if a.fail.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if b := a.body.Load(); b != nil {
			fmt.Fprint(w, *b)
			return
		}
		if res := a.result.Load(); res != nil {
			fmt.Fprintf(w, `{"result":%s}`, *res)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"result": a.name + ": " + body.Task})
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// mcpAgent is an MCP agent whose handle_message records its arguments,
// counts a "step" in its workflow_state and completes the workflow when
// raw_input contains "done".
type mcpAgent struct {
	srv  *httptest.Server
	mu   sync.Mutex
	args []map[string]any
}

func newMCPAgent(t *testing.T, name string) *mcpAgent {
	a := &mcpAgent{}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "handle_message", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			a.mu.Lock()
			a.args = append(a.args, args)
			a.mu.Unlock()
			step := 0.0
			if ws, ok := args["workflow_state"].(map[string]any); ok {
				step, _ = ws["step"].(float64)
			}
			input, _ := args["raw_input"].(string)
			return &mcp.CallToolResult{StructuredContent: map[string]any{
				"content":           fmt.Sprintf("%s handled step %d", name, int(step)+1),
				"workflow_complete": strings.Contains(input, "done"),
				"workflow_state":    map[string]any{"step": step + 1},
			}}, nil
		})
	a.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *mcpAgent) calls() []map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]map[string]any(nil), a.args...)
}

type routerEnv struct {
	t        *testing.T
	ctx      context.Context
	clock    *clocktest.Clock
	reg      *registry.Registry
	sessions *session.Manager
	del      *delegation.Client
	breakers *breaker.Set
	cls      *keywordClassifier
	router   *Router

	helpdesk, finance *httpAgent
	hr                *mcpAgent
}

type envConfig struct {
	noDefault   bool
	router      *RouterOptions
	breakerOpts *breaker.Options
	logger      *slog.Logger
}

// newRouterEnv builds a router over real parts: a memstore registry with
// a default http agent (helpdesk), an http agent (finance) and an MCP
// agent requiring clarification (hr), a real session manager, a real
// delegation client sharing the breakers, and a keyword classifier.
func newRouterEnv(t *testing.T, cfg envConfig) *routerEnv {
	t.Helper()
	ctx := context.Background()
	e := &routerEnv{t: t, ctx: ctx, clock: clocktest.New(time.Now())}
	var err error
	e.reg, err = registry.New(ctx, memstore.New(), &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.reg.Close() })

	bo := breaker.Options{}
	if cfg.breakerOpts != nil {
		bo = *cfg.breakerOpts
	}
	bo.Now = e.clock.Now
	e.breakers = breaker.NewSet(nil, &bo)

	e.sessions, err = session.NewManager(memstore.New(), &session.Options{Now: e.clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.sessions.Close() })

	e.del, err = delegation.New(ctx, e.reg, memstore.New(), &delegation.Options{Breakers: e.breakers})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.del.Close() })

	e.helpdesk = newHTTPAgent(t, "helpdesk")
	e.finance = newHTTPAgent(t, "finance")
	e.hr = newMCPAgent(t, "hr")
	if !cfg.noDefault {
		e.register(registry.Agent{Name: "helpdesk", DisplayName: "Help Desk", Description: "General help.", Endpoint: e.helpdesk.srv.URL, IsDefault: true})
	}
	e.register(registry.Agent{Name: "finance", DisplayName: "Finance", Description: "Budgets and cost centers.", Endpoint: e.finance.srv.URL})
	e.register(registry.Agent{
		Name: "hr", DisplayName: "HR", Description: "Leave and payroll.", Endpoint: e.hr.srv.URL,
		Protocol: registry.ProtocolMCP, ClarificationRequired: true,
		ClarificationContext: "Is this about leave, payroll or benefits?",
	})

	e.cls = &keywordClassifier{
		def: "helpdesk",
		rules: []kwRule{
			{"budget", "finance", 0.9, false},
			{"payroll", "hr", 0.9, false},
			{"leave", "hr", 0.5, false},
			{"costs", "finance", 0.5, false}, // finance does not ask: falls back
			{"ghost", "ghost", 0.99, false},
		},
	}
	if cfg.noDefault {
		e.cls.def = ""
	}
	ro := RouterOptions{}
	if cfg.router != nil {
		ro = *cfg.router
	}
	ro.Breakers = e.breakers
	ro.Now = e.clock.Now
	ro.Logger = cfg.logger
	e.router, err = New(e.cls, e.reg, e.del, e.sessions, &ro)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.router.Close() })
	return e
}

func (e *routerEnv) register(a registry.Agent) {
	e.t.Helper()
	_, _, err := e.reg.Register(e.ctx, a)
	require.NoError(e.t, err)
}

func (e *routerEnv) handle(req Request) Response {
	e.t.Helper()
	resp, err := e.router.Handle(e.ctx, req)
	require.NoError(e.t, err)
	return resp
}

func (e *routerEnv) active(user string) session.Session {
	e.t.Helper()
	s, err := e.sessions.Active(e.ctx, user)
	require.NoError(e.t, err)
	return s
}

func TestRouterRouteThenSessionBypass(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	resp := e.handle(Request{Input: "What is the budget for Engineering?", UserID: "alice"})
	assert.Equal(t, ActionRoute, resp.Decision)
	assert.Equal(t, ReasonConfidence, resp.Reason)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, 0.9, resp.Confidence)
	assert.Equal(t, "finance: What is the budget for Engineering?", resp.Response)
	assert.Equal(t, RoutingInfo{Action: ActionRoute, Reason: "Confidence 0.9 >= threshold 0.7"}, resp.Routing)
	assert.Equal(t, ResponseClassification{Intent: "asks about budget", Confidence: 0.9, Language: "en", Entities: map[string]any{"topic": "budget"}}, resp.Classification)
	assert.NotEmpty(t, resp.RequestID)
	assert.NotEmpty(t, resp.DelegationID)

	s := e.active("alice")
	assert.Equal(t, resp.SessionID, s.ID)
	assert.Equal(t, "finance", s.ActiveAgent)
	require.Len(t, s.TurnHistory, 2)
	assert.Equal(t, session.RoleUser, s.TurnHistory[0].Role)
	assert.Equal(t, "asks about budget", s.TurnHistory[0].IntentSummary)
	assert.Equal(t, session.RoleAgent, s.TurnHistory[1].Role)

	// The next message bypasses classification, even one the classifier
	// would send elsewhere.
	before := len(e.cls.calls())
	resp = e.handle(Request{Input: "and what about payroll?", UserID: "alice", Locale: "fr-FR"})
	assert.Equal(t, ActionRoute, resp.Decision)
	assert.Equal(t, ReasonSession, resp.Reason)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, s.ID, resp.SessionID)
	assert.Equal(t, 1.0, resp.Confidence)
	assert.Equal(t, "fr", resp.Classification.Language)
	assert.Len(t, e.cls.calls(), before, "bypass must not classify")
	assert.Len(t, e.active("alice").TurnHistory, 4)

	// employee_id identifies the user when user_id is absent.
	resp = e.handle(Request{Input: "budget again", EmployeeID: "alice"})
	assert.Equal(t, ReasonSession, resp.Reason)
	assert.Equal(t, s.ID, resp.SessionID)
}

func TestRouterMCPTurnAndWorkflowComplete(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	resp := e.handle(Request{Input: "payroll question", UserID: "bob", EmployeeID: "E-7", DisplayName: "Bob",
		Metadata: map[string]any{"org": "acme", "agentmesh_owner_token": "ops"}})
	assert.Equal(t, "hr", resp.AgentID)
	assert.Equal(t, "hr handled step 1", resp.Response)
	assert.False(t, resp.WorkflowComplete)

	calls := e.hr.calls()
	require.Len(t, calls, 1)
	args := calls[0]
	assert.Equal(t, resp.SessionID, args["session_id"])
	assert.Equal(t, resp.DelegationID, args["request_id"])
	assert.Equal(t, "E-7", args["employee_id"])
	assert.Equal(t, "Bob", args["display_name"])
	assert.Equal(t, "payroll question", args["raw_input"])
	assert.Equal(t, "asks about payroll", args["intent_summary"])
	assert.Equal(t, map[string]any{"topic": "payroll"}, args["entities"])
	assert.Equal(t, "en", args["detected_language"])
	assert.Equal(t, []any{}, args["turn_history"])
	assert.Equal(t, map[string]any{}, args["workflow_state"])
	meta := args["metadata"].(map[string]any)
	assert.Equal(t, "acme", meta["org"])
	assert.NotContains(t, meta, "agentmesh_owner_token", "the mesh's own keys stay with the mesh")

	s := e.active("bob")
	assert.Equal(t, map[string]any{"step": 1.0}, s.WorkflowState)
	assert.Equal(t, "E-7", s.EmployeeID)

	// Second turn: bypass; the agent gets the history and the state.
	resp = e.handle(Request{Input: "next", UserID: "bob"})
	assert.Equal(t, ReasonSession, resp.Reason)
	assert.Equal(t, "hr handled step 2", resp.Response)
	args = e.hr.calls()[1]
	hist := args["turn_history"].([]any)
	require.Len(t, hist, 2)
	assert.Equal(t, "user", hist[0].(map[string]any)["role"])
	assert.Equal(t, "payroll question", hist[0].(map[string]any)["content"])
	assert.Equal(t, "agent", hist[1].(map[string]any)["role"])
	assert.Equal(t, map[string]any{"step": 1.0}, args["workflow_state"])

	// workflow_complete closes the session completed.
	resp = e.handle(Request{Input: "done, thanks", UserID: "bob"})
	assert.True(t, resp.WorkflowComplete)
	assert.Equal(t, "hr handled step 3", resp.Response)
	_, err := e.sessions.Active(e.ctx, "bob")
	require.ErrorIs(t, err, session.ErrNotFound)
	closed, err := e.sessions.Get(e.ctx, resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusCompleted, closed.Status)
	assert.Len(t, closed.TurnHistory, 6)
	assert.Equal(t, map[string]any{"step": 3.0}, closed.WorkflowState)

	// A new message starts a new conversation, classified again.
	resp = e.handle(Request{Input: "budget", UserID: "bob"})
	assert.Equal(t, ReasonConfidence, resp.Reason)
	assert.NotEqual(t, closed.ID, resp.SessionID)
}

func TestRouterClarifyThenResolve(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	resp := e.handle(Request{Input: "about my leave", UserID: "carol"})
	assert.Equal(t, ActionClarify, resp.Decision)
	assert.Equal(t, ReasonLowConfidence, resp.Reason)
	assert.Equal(t, "hr", resp.SuggestedAgent)
	assert.Empty(t, resp.AgentID)
	assert.Equal(t, "Could you tell me a bit more about what you need? Is this about leave, payroll or benefits?", resp.ClarificationQuestion)
	assert.Equal(t, resp.ClarificationQuestion, resp.Response)
	assert.Equal(t, 0.5, resp.Confidence)
	assert.Equal(t, "Below threshold 0.7, clarification required", resp.Routing.Reason)
	assert.Empty(t, e.hr.calls(), "clarify must not dispatch")
	assert.Zero(t, e.helpdesk.calls.Load())

	s := e.active("carol")
	assert.Equal(t, resp.SessionID, s.ID)
	require.NotNil(t, s.PendingClarification)
	assert.Equal(t, "hr", s.PendingClarification.SuggestedAgent)
	assert.Equal(t, "about my leave", s.PendingClarification.OriginalInput)
	assert.WithinDuration(t, e.clock.Now().Add(5*time.Minute), s.PendingClarification.Expires, time.Second)
	assert.Empty(t, s.ActiveAgent)
	require.Len(t, s.TurnHistory, 2, "the question is recorded")

	// The answer is classified together with the original input.
	resp = e.handle(Request{Input: "payroll, actually", UserID: "carol"})
	assert.Equal(t, "about my leave payroll, actually", e.cls.calls()[len(e.cls.calls())-1])
	assert.Equal(t, ActionRoute, resp.Decision)
	assert.Equal(t, ReasonConfidence, resp.Reason)
	assert.Equal(t, "hr", resp.AgentID)
	assert.Equal(t, s.ID, resp.SessionID)
	require.Len(t, e.hr.calls(), 1)
	assert.Equal(t, "about my leave payroll, actually", e.hr.calls()[0]["raw_input"])

	s = e.active("carol")
	assert.Nil(t, s.PendingClarification)
	assert.Equal(t, "hr", s.ActiveAgent)
	assert.Len(t, s.TurnHistory, 4)
}

func TestRouterClarifyStillUnclearFallsBack(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	resp := e.handle(Request{Input: "about my leave", UserID: "dan"})
	require.Equal(t, ActionClarify, resp.Decision)

	// Still low confidence for hr: no second question, the default answers.
	resp = e.handle(Request{Input: "hmm, not sure", UserID: "dan"})
	assert.Equal(t, ActionFallback, resp.Decision)
	assert.Equal(t, ReasonClarificationUnresolved, resp.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
	assert.Contains(t, resp.Routing.Reason, "after clarification")
	assert.Equal(t, "helpdesk: about my leave hmm, not sure", resp.Response)
	s := e.active("dan")
	assert.Nil(t, s.PendingClarification)
	assert.Equal(t, "helpdesk", s.ActiveAgent)
}

func TestRouterClarificationLapses(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	resp := e.handle(Request{Input: "about my leave", UserID: "erin"})
	require.Equal(t, ActionClarify, resp.Decision)
	e.clock.Advance(5*time.Minute + time.Second)
	// The answer comes too late: classified on its own, in the same session.
	resp = e.handle(Request{Input: "budget please", UserID: "erin"})
	assert.Equal(t, "budget please", e.cls.calls()[len(e.cls.calls())-1])
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, ReasonConfidence, resp.Reason)
	assert.Equal(t, "finance", e.active("erin").ActiveAgent)
}

func TestRouterClarificationDisabled(t *testing.T) {
	e := newRouterEnv(t, envConfig{router: &RouterOptions{DisableClarification: true}})
	resp := e.handle(Request{Input: "about my leave", UserID: "fay"})
	assert.Equal(t, ActionFallback, resp.Decision)
	assert.Equal(t, ReasonLowConfidence, resp.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
}

func TestRouterAnonymous(t *testing.T) {
	store := &countingSessionStore{Store: memstore.New()}
	e := newRouterEnv(t, envConfig{})
	var err error
	e.sessions, err = session.NewManager(store, nil)
	require.NoError(t, err)
	e.router, err = New(e.cls, e.reg, e.del, e.sessions, &RouterOptions{Breakers: e.breakers})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.router.Close() })

	sid := "0f8fad5b-d9cb-469f-a165-70867728950e"
	resp := e.handle(Request{Input: "budget", SessionID: sid})
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, sid, resp.SessionID, "an anonymous session_id is echoed")

	// Clarification: the question, nothing stored; the next message is
	// classified on its own.
	resp = e.handle(Request{Input: "about my leave"})
	assert.Equal(t, ActionClarify, resp.Decision)
	assert.Empty(t, resp.SessionID)
	resp = e.handle(Request{Input: "payroll"})
	assert.Equal(t, "payroll", e.cls.calls()[len(e.cls.calls())-1])
	assert.Equal(t, "hr", resp.AgentID)
	assert.Equal(t, "", e.hr.calls()[0]["session_id"])

	// A second message is classified again: no session bypass.
	resp = e.handle(Request{Input: "budget"})
	assert.Equal(t, ReasonConfidence, resp.Reason)
	assert.Zero(t, store.calls.Load(), "anonymous requests must not touch the session store")
}

// countingSessionStore counts the calls that reach a session store.
type countingSessionStore struct {
	session.Store
	calls atomic.Int64
}

func (s *countingSessionStore) GetActiveSession(ctx context.Context, user string) (session.Session, error) {
	s.calls.Add(1)
	return s.Store.GetActiveSession(ctx, user)
}

func (s *countingSessionStore) UpdateActiveSession(ctx context.Context, user string, fn func(cur *session.Session) (upd, next *session.Session, err error)) error {
	s.calls.Add(1)
	return s.Store.UpdateActiveSession(ctx, user, fn)
}

func (s *countingSessionStore) UpdateSession(ctx context.Context, id string, fn func(cur *session.Session) (*session.Session, error)) error {
	s.calls.Add(1)
	return s.Store.UpdateSession(ctx, id, fn)
}

func TestRouterDispatchFailureFallsBackOnce(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	e.finance.fail.Store(true)
	resp := e.handle(Request{Input: "budget", UserID: "gil"})
	assert.Equal(t, ActionFallback, resp.Decision)
	assert.Equal(t, ReasonDispatchFailed, resp.Reason)
	assert.Equal(t, "Dispatch to 'finance' failed (agent_error), falling back to default", resp.Routing.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
	assert.Equal(t, "helpdesk: budget", resp.Response)
	assert.Equal(t, 0.9, resp.Confidence, "confidence is the classifier's, whatever the decision")
	assert.EqualValues(t, 1, e.finance.calls.Load(), "500 is not retried")
	assert.EqualValues(t, 1, e.helpdesk.calls.Load())
	s := e.active("gil")
	assert.Equal(t, "helpdesk", s.ActiveAgent, "the session follows the agent that answered")
	assert.Len(t, s.TurnHistory, 2)
}

func TestRouterBreakerOpenFallsBack(t *testing.T) {
	e := newRouterEnv(t, envConfig{breakerOpts: &breaker.Options{FailureThreshold: 1}})
	e.finance.fail.Store(true)
	resp := e.handle(Request{Input: "budget"})
	require.Equal(t, ReasonDispatchFailed, resp.Reason)
	require.Equal(t, breaker.StateOpen, e.breakers.Get("finance").State())

	resp = e.handle(Request{Input: "budget"})
	assert.Equal(t, ActionFallback, resp.Decision)
	assert.Equal(t, ReasonAgentUnavailable, resp.Reason)
	assert.Equal(t, "Agent 'finance' unavailable (circuit breaker open), falling back to default", resp.Routing.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
	assert.EqualValues(t, 1, e.finance.calls.Load(), "an open breaker is not called")

	// A session whose agent's breaker is open also falls back.
	e.finance.fail.Store(false)
	e.clock.Advance(31 * time.Second) // half-open: the probe succeeds
	resp = e.handle(Request{Input: "budget", UserID: "hal"})
	require.Equal(t, "finance", resp.AgentID)
	e.finance.fail.Store(true)
	resp = e.handle(Request{Input: "more", UserID: "hal"})
	require.Equal(t, ReasonDispatchFailed, resp.Reason) // the probe failed: open again
	e.finance.fail.Store(false)
	_, err := e.sessions.SetActiveAgent(e.ctx, resp.SessionID, "finance")
	require.NoError(t, err)
	resp = e.handle(Request{Input: "more", UserID: "hal"})
	assert.Equal(t, ReasonAgentUnavailable, resp.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
}

func TestRouterAllAgentsDown(t *testing.T) {
	e := newRouterEnv(t, envConfig{breakerOpts: &breaker.Options{FailureThreshold: 1}})
	resp := e.handle(Request{Input: "budget", UserID: "ivy"})
	sid := resp.SessionID
	e.finance.fail.Store(true)
	e.helpdesk.fail.Store(true)

	_, err := e.router.Handle(e.ctx, Request{Input: "more", UserID: "ivy"})
	require.ErrorIs(t, err, ErrUnavailable)
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, []string{"finance", "helpdesk"}, ue.Agents)
	assert.Equal(t, []string{"agent_error", "agent_error"}, ue.Codes)
	assert.Equal(t, DefaultRetryAfter, ue.RetryAfter)
	assert.Equal(t, "routing: no agent available: finance: agent_error, helpdesk: agent_error", err.Error())

	// No dangling active session: closed error.
	_, err = e.sessions.Active(e.ctx, "ivy")
	require.ErrorIs(t, err, session.ErrNotFound)
	s, err := e.sessions.Get(e.ctx, sid)
	require.NoError(t, err)
	assert.Equal(t, session.StatusError, s.Status)
	assert.Len(t, s.TurnHistory, 3, "the failed turn's user message is kept")

	// Now both breakers are open: Retry-After is when the first half-opens.
	e.clock.Advance(10 * time.Second)
	_, err = e.router.Handle(e.ctx, Request{Input: "budget"})
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, []string{"agent_unavailable", "agent_unavailable"}, ue.Codes)
	assert.Equal(t, 20*time.Second, ue.RetryAfter)
	assert.EqualValues(t, 1, e.helpdesk.calls.Load(), "open breakers are not called")
}

func TestRouterDefaultFailingIsUnavailable(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	e.helpdesk.fail.Store(true)
	// The gate routes to the default (rule 2): nothing to fall back to.
	_, err := e.router.Handle(e.ctx, Request{Input: "hello there", UserID: "jo"})
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, []string{"helpdesk"}, ue.Agents)
	_, err = e.sessions.Active(e.ctx, "jo")
	require.ErrorIs(t, err, session.ErrNotFound, "the session is closed error")
}

func TestRouterFailureWithoutDefaultClosesError(t *testing.T) {
	e := newRouterEnv(t, envConfig{noDefault: true})
	e.finance.fail.Store(true)
	_, err := e.router.Handle(e.ctx, Request{Input: "budget", UserID: "kim"})
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = e.sessions.Active(e.ctx, "kim")
	require.ErrorIs(t, err, session.ErrNotFound)
}

func TestRouterNoDefaultAgent(t *testing.T) {
	e := newRouterEnv(t, envConfig{noDefault: true})
	// Rule 5 without a default.
	_, err := e.router.Handle(e.ctx, Request{Input: "costs", UserID: "lee"})
	require.ErrorIs(t, err, ErrNoDefaultAgent)
	// Rule 1 without a default.
	_, err = e.router.Handle(e.ctx, Request{Input: "ghost"})
	require.ErrorIs(t, err, ErrNoDefaultAgent)
	// A classifier failure without a default.
	e.cls.setErr(ErrNoAgents)
	_, err = e.router.Handle(e.ctx, Request{Input: "budget"})
	require.ErrorIs(t, err, ErrNoDefaultAgent)
	_, err = e.sessions.Active(e.ctx, "lee")
	require.ErrorIs(t, err, session.ErrNotFound, "nothing stored")
	// Routing still works.
	e.cls.setErr(nil)
	assert.Equal(t, "finance", e.handle(Request{Input: "budget"}).AgentID)
}

func TestRouterUnknownAgentFallsBack(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	resp := e.handle(Request{Input: "ghost"})
	assert.Equal(t, ActionFallback, resp.Decision)
	assert.Equal(t, ReasonUnknownAgent, resp.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
	assert.Equal(t, 0.99, resp.Confidence)
}

func TestRouterClassifierErrorFallsBack(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	e.cls.setErr(ErrNoAgents)
	resp := e.handle(Request{Input: "budget", Locale: "de-DE"})
	assert.Equal(t, ActionFallback, resp.Decision)
	assert.Equal(t, ReasonClassifierError, resp.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
	assert.Equal(t, "de", resp.Classification.Language)
	assert.Equal(t, map[string]any{}, resp.Classification.Entities)
}

// A classifier still learning its first model is not a classifier
// failure: the request is refused as unavailable (to be retried), never
// sent to the default agent, and nothing is dispatched.
func TestRouterNotReadyIsUnavailable(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	e.cls.setErr(ErrNotReady)
	_, err := e.router.Handle(e.ctx, Request{Input: "budget", UserID: "ann"})
	require.ErrorIs(t, err, ErrNotReady)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Zero(t, e.helpdesk.calls.Load(), "no fallback to the default agent")
	assert.Zero(t, e.finance.calls.Load())
}

func TestRouterSessionAgentGone(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	first := e.handle(Request{Input: "budget", UserID: "max"})
	require.NoError(t, e.reg.Delete(e.ctx, "finance"))

	resp := e.handle(Request{Input: "budget again", UserID: "max"})
	// Reclassified: finance is unknown now, so the default takes it.
	assert.Equal(t, ActionFallback, resp.Decision)
	assert.Equal(t, ReasonUnknownAgent, resp.Reason)
	assert.Equal(t, "helpdesk", resp.AgentID)
	assert.NotEqual(t, first.SessionID, resp.SessionID)
	old, err := e.sessions.Get(e.ctx, first.SessionID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusAbandoned, old.Status)
	assert.Equal(t, "helpdesk", e.active("max").ActiveAgent)
}

func TestRouterConcurrentRequestsOneSession(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := e.router.Handle(e.ctx, Request{Input: fmt.Sprintf("budget %d", i), UserID: "nia"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s := e.active("nia")
	require.Len(t, s.TurnHistory, 2*n, "no turn lost")
	users := 0
	for _, tr := range s.TurnHistory {
		if tr.Role == session.RoleUser {
			users++
		}
	}
	assert.Equal(t, n, users)
	assert.EqualValues(t, n, e.finance.calls.Load())
}

func TestRouterHTTPAgentResponseObject(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	res := `{"content":"all set","workflow_complete":true,"workflow_state":{"k":"v"}}`
	e.finance.result.Store(&res)
	resp := e.handle(Request{Input: "budget", UserID: "oli"})
	assert.Equal(t, "all set", resp.Response)
	assert.True(t, resp.WorkflowComplete)
	s, err := e.sessions.Get(e.ctx, resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusCompleted, s.Status)
	assert.Equal(t, map[string]any{"k": "v"}, s.WorkflowState)

	other := `{"total": 3}`
	e.finance.result.Store(&other)
	resp = e.handle(Request{Input: "budget"})
	assert.JSONEq(t, `{"total":3}`, resp.Response, "other JSON is passed as its text")
}

// A routed message reaches an http agent with its conversation: the
// session (id, earlier turns, state), the user, locale and metadata, as
// fields next to the task that older agents ignore.
func TestRouterHTTPAgentGetsTheConversation(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	first := e.handle(Request{Input: "What is the budget?", UserID: "quinn", Locale: "fr-CA", EntryPoint: "slack", Metadata: map[string]any{"channel": "c1"}})
	got := *e.finance.last.Load()
	assert.Equal(t, "What is the budget?", got["task"])
	assert.Equal(t, map[string]any{"id": first.SessionID, "turns": []any{}, "workflowState": map[string]any{}}, got["session"], "the first turn: no earlier turns")
	assert.Equal(t, map[string]any{"id": "quinn", "employeeId": "quinn", "displayName": "quinn"}, got["user"])
	assert.Equal(t, "fr-CA", got["locale"])
	assert.Equal(t, "slack", got["entryPoint"])
	assert.Equal(t, map[string]any{"channel": "c1"}, got["metadata"])

	e.handle(Request{Input: "and for next year?", UserID: "quinn"})
	got = *e.finance.last.Load()
	sess, _ := got["session"].(map[string]any)
	require.NotNil(t, sess, "%v", got)
	assert.Equal(t, first.SessionID, sess["id"], "the same conversation")
	turns, _ := sess["turns"].([]any)
	require.Len(t, turns, 2, "the first message and its answer: %v", sess)
	assert.Equal(t, "user", turns[0].(map[string]any)["role"])
	assert.Equal(t, "What is the budget?", turns[0].(map[string]any)["content"])
	assert.Equal(t, "agent", turns[1].(map[string]any)["role"])
	assert.Equal(t, "finance", turns[1].(map[string]any)["agent"], "who answered")
	assert.NotEmpty(t, turns[1].(map[string]any)["time"])

	// A plain delegation carries none of it.
	_, err := e.del.Delegate(e.ctx, delegation.Request{Target: "finance", Task: "plain"})
	require.NoError(t, err)
	got = *e.finance.last.Load()
	for _, k := range []string{"session", "user", "locale", "entryPoint", "metadata"} {
		assert.NotContains(t, got, k)
	}
}

// An http agent ends the conversation and sets its state with top-level
// workflowComplete and workflowState next to its result.
func TestRouterHTTPAgentConversationFields(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	body := `{"result":"Booked for Friday.","workflowState":{"step":2}}`
	e.finance.body.Store(&body)
	resp := e.handle(Request{Input: "budget", UserID: "pia"})
	assert.Equal(t, "Booked for Friday.", resp.Response)
	assert.False(t, resp.WorkflowComplete)
	s, err := e.sessions.Get(e.ctx, resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusActive, s.Status, "a state alone keeps the session going")
	assert.Equal(t, map[string]any{"step": float64(2)}, s.WorkflowState)

	body = `{"result":{"content":"All done."},"workflowComplete":true,"workflowState":{"step":3}}`
	e.finance.body.Store(&body)
	resp = e.handle(Request{Input: "budget", UserID: "pia"})
	assert.Equal(t, "All done.", resp.Response)
	assert.True(t, resp.WorkflowComplete)
	s, err = e.sessions.Get(e.ctx, resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusCompleted, s.Status)
	assert.Equal(t, map[string]any{"step": float64(3)}, s.WorkflowState)
}

func TestRouterValidation(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	for name, req := range map[string]Request{
		"empty input":     {},
		"blank input":     {Input: " \n\t"},
		"too long":        {Input: strings.Repeat("é", MaxInputRunes+1)},
		"invalid utf-8":   {Input: "budget \xff"},
		"bad session id":  {Input: "budget", SessionID: "not-a-uuid"},
		"long user id":    {Input: "budget", UserID: strings.Repeat("u", session.MaxUserIDLen+1)},
		"long employeeid": {Input: "budget", EmployeeID: strings.Repeat("u", session.MaxUserIDLen+1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.router.Handle(e.ctx, req)
			require.ErrorIs(t, err, ErrInvalidRequest)
		})
	}
	// The limits themselves pass.
	resp := e.handle(Request{Input: strings.Repeat("é", MaxInputRunes-7) + " budget", SessionID: "0F8FAD5B-D9CB-469F-A165-70867728950E"})
	assert.Equal(t, "finance", resp.AgentID)
}

func TestRouterResponseJSON(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	resp := e.handle(Request{Input: "budget", UserID: "pam"})
	b, err := json.Marshal(resp)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"request_id", "session_id", "agent_id", "decision", "reason", "confidence", "response",
		"workflow_complete", "classification", "duration_ms", "routing"} {
		assert.Contains(t, m, k)
	}
	assert.NotContains(t, m, "clarification_question")
	assert.Equal(t, map[string]any{"intent": "asks about budget", "confidence": 0.9, "language": "en", "entities": map[string]any{"topic": "budget"}}, m["classification"])
	assert.Equal(t, map[string]any{"action": "route", "reason": "Confidence 0.9 >= threshold 0.7"}, m["routing"])

	resp = e.handle(Request{Input: "about my leave", UserID: "quinn"})
	b, err = json.Marshal(resp)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"clarification_question":`)
	assert.Contains(t, string(b), `"suggested_agent":"hr"`)
	assert.Contains(t, string(b), `"decision":"clarify"`)
}

func TestRouterLogsWithoutInput(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newRouterEnv(t, envConfig{logger: logger})
	e.handle(Request{Input: "secret budget for alice@example.com", UserID: "rex"})
	_, _ = e.router.Handle(e.ctx, Request{Input: "ghost secret", SessionID: "bad"})
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	assert.Contains(t, out, `"msg":"routing: decision"`)
	assert.Contains(t, out, `"decision":"route"`)
	assert.Contains(t, out, `"input_sha256"`)
	assert.NotContains(t, out, "secret")
	assert.NotContains(t, out, "rex")
	assert.NotContains(t, out, `"level":"INFO"`)
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestRouterCanceledContext(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := e.router.Handle(ctx, Request{Input: "budget"})
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, e.helpdesk.calls.Load(), "no fallback for a caller that gave up")
}

func TestNewRouterRequiresParts(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	_, err := New(nil, e.reg, e.del, nil, nil)
	require.Error(t, err)
	_, err = New(e.cls, nil, e.del, nil, nil)
	require.Error(t, err)
	_, err = New(e.cls, e.reg, nil, nil, nil)
	require.Error(t, err)
	// Without sessions every request is anonymous.
	r, err := New(e.cls, e.reg, e.del, nil, nil)
	require.NoError(t, err)
	defer r.Close()
	resp, err := r.Handle(e.ctx, Request{Input: "about my leave", UserID: "sam"})
	require.NoError(t, err)
	assert.Equal(t, ActionClarify, resp.Decision)
	assert.Empty(t, resp.SessionID)
}

func TestIsSessionID(t *testing.T) {
	assert.True(t, IsSessionID(uuid.NewString()))
	assert.True(t, IsSessionID("00000000-0000-0000-0000-000000000000"))
	assert.True(t, IsSessionID("0F8FAD5B-D9CB-469F-A165-70867728950E"), "either case")
	assert.False(t, IsSessionID("0f8fad5b-d9cb-469f-a165-70867728950"))
	assert.False(t, IsSessionID("0f8fad5bxd9cb-469f-a165-70867728950e"))
	assert.False(t, IsSessionID("0f8fad5b-d9cb-469f-a165-70867728950g"))
	assert.False(t, IsSessionID("{0f8fad5b-d9cb-469f-a165-70867728950e}"), "braced form")
	assert.False(t, IsSessionID("urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e"), "URN form")
	assert.False(t, IsSessionID("0f8fad5bd9cb469fa16570867728950e"), "unhyphenated form")
	assert.False(t, IsSessionID(""))
}

func TestRouterWithLexical(t *testing.T) {
	e := newRouterEnv(t, envConfig{})
	low := 0.2
	e.register(registry.Agent{
		Name: "finance", DisplayName: "Finance", Description: "Budgets, cost centers and expense reports.",
		Endpoint: e.finance.srv.URL, ConfidenceThreshold: &low,
		Examples: []string{"What is the budget for Engineering?", "Which cost center pays for this?",
			"Submit my expense report", "How much budget is left this quarter?", "Show the cost center of marketing"},
	})
	e.register(registry.Agent{
		Name: "helpdesk", DisplayName: "Help Desk", Description: "General help.", Endpoint: e.helpdesk.srv.URL, IsDefault: true,
		Examples: []string{"hello", "I need help", "what can you do?", "who are you?"},
	})
	lex := NewLexical(nil)
	defer lex.Close()
	stop := lex.Follow(e.reg)
	defer stop()
	require.NoError(t, lex.Sync(e.ctx))

	r, err := New(lex, e.reg, e.del, e.sessions, &RouterOptions{Breakers: e.breakers, Now: e.clock.Now})
	require.NoError(t, err)
	defer r.Close()
	resp, err := r.Handle(e.ctx, Request{Input: "how much budget does engineering have left?", UserID: "una"})
	require.NoError(t, err)
	t.Logf("lexical: %+v", resp.Classification)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, ActionRoute, resp.Decision)
	assert.Equal(t, "en", resp.Classification.Language)
}
