package delegation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/registry"
)

// a2aExec runs one task of a test agent: the events it yields are the
// agent's answer.
type a2aExec func(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error]

// a2aTestAgent is a real A2A 1.0 agent: a2a-go's request handler behind its
// JSON-RPC binding on an httptest server. It records every HTTP request
// and every message its executor receives.
type a2aTestAgent struct {
	t   *testing.T
	srv *httptest.Server

	// intercept, when set, answers a request instead of the agent (it
	// sees the JSON-RPC method). It returns false to pass it on.
	intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request, method string) bool]

	mu       sync.Mutex
	requests []a2aTestRequest
	execs    []*a2asrv.ExecutorContext
}

type a2aTestRequest struct {
	method string // JSON-RPC method
	header http.Header
}

// a2aAgentOpts configures newA2ATestAgent.
type a2aAgentOpts struct {
	// returnImmediately makes SendMessage answer with the task as soon
	// as it exists, as an agent that works in the background does; the
	// mesh must then poll with GetTask.
	returnImmediately bool
}

func newA2ATestAgent(t *testing.T, exec a2aExec, opts a2aAgentOpts) *a2aTestAgent {
	t.Helper()
	a := &a2aTestAgent{t: t}
	var h a2asrv.RequestHandler = a2asrv.NewHandler(a2aTestExecutor{a: a, exec: exec})
	if opts.returnImmediately {
		h = returnImmediately{h}
	}
	rpc := a2asrv.NewJSONRPCHandler(h)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var env struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &env)
		a.mu.Lock()
		a.requests = append(a.requests, a2aTestRequest{env.Method, r.Header.Clone()})
		a.mu.Unlock()
		if f := a.intercept.Load(); f != nil && (*f)(w, r, env.Method) {
			return
		}
		rpc.ServeHTTP(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *a2aTestAgent) setIntercept(f func(w http.ResponseWriter, r *http.Request, method string) bool) {
	a.intercept.Store(&f)
}

// record is the agent's registry record.
func (a *a2aTestAgent) record(name string) registry.Agent {
	return registry.Agent{Name: name, Description: "a2a agent " + name, Endpoint: a.srv.URL, Protocol: registry.ProtocolA2A}
}

func (a *a2aTestAgent) allRequests() []a2aTestRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]a2aTestRequest(nil), a.requests...)
}

// count returns how many requests called the JSON-RPC method.
func (a *a2aTestAgent) count(method string) int {
	n := 0
	for _, r := range a.allRequests() {
		if r.method == method {
			n++
		}
	}
	return n
}

func (a *a2aTestAgent) lastExec() *a2asrv.ExecutorContext {
	a.mu.Lock()
	defer a.mu.Unlock()
	require.NotEmpty(a.t, a.execs, "the agent ran no task")
	return a.execs[len(a.execs)-1]
}

// a2aTestExecutor is the agent's executor: it records the request and
// runs exec.
type a2aTestExecutor struct {
	a    *a2aTestAgent
	exec a2aExec
}

func (e a2aTestExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.a.mu.Lock()
	e.a.execs = append(e.a.execs, ec)
	e.a.mu.Unlock()
	return e.exec(ctx, ec)
}

func (e a2aTestExecutor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return events(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil))
}

// returnImmediately is a request handler whose SendMessage returns the
// task as soon as it is created.
type returnImmediately struct{ a2asrv.RequestHandler }

func (h returnImmediately) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	cp := *req
	cfg := a2a.SendMessageConfig{}
	if req.Config != nil {
		cfg = *req.Config
	}
	cfg.ReturnImmediately = true
	cp.Config = &cfg
	return h.RequestHandler.SendMessage(ctx, &cp)
}

// events yields evs in order.
func events(evs ...a2a.Event) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// replyMessage answers every task with an agent message of parts.
func replyMessage(parts ...*a2a.Part) a2aExec {
	return func(_ context.Context, _ *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		return events(a2a.NewMessage(a2a.MessageRoleAgent, parts...))
	}
}

// endTask answers every task by creating it, adding an artifact per parts
// list, and ending it in state with the agent message msg (none if "").
func endTask(state a2a.TaskState, msg string, artifacts ...[]*a2a.Part) a2aExec {
	return func(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		evs := []a2a.Event{a2a.NewSubmittedTask(ec, ec.Message)}
		for _, parts := range artifacts {
			evs = append(evs, a2a.NewArtifactEvent(ec, parts...))
		}
		var status *a2a.Message
		if msg != "" {
			status = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(msg))
		}
		return events(append(evs, a2a.NewStatusUpdateEvent(ec, state, status))...)
	}
}

// workUntil answers every task by creating it, reporting it working, and
// completing it with an artifact "done" once release is closed (or
// never, if ctx ends first).
func workUntil(release <-chan struct{}) a2aExec {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		return func(yield func(a2a.Event, error) bool) {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
				!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
			if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("done")), nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
}

// A2A agents (docs/AGENTS.md#a2a-agents): SendMessage over JSON-RPC with
// A2A-Version 1.0, the task as a text part of a user message whose id is the
// delegation id, the context as its metadata, the agent's auth and tenant; a
// Message reply completes the delegation with its text.
func TestA2AMessageReply(t *testing.T) {
	e := newEnv(t, nil)
	a := newA2ATestAgent(t, replyMessage(a2a.NewTextPart("Budget: "), a2a.NewTextPart("42k EUR")), a2aAgentOpts{})
	rec := a.record("finance")
	rec.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}
	rec.Labels = map[string]string{a2acard.LabelTenant: "acme"}
	e.register(rec)

	got := e.delegate(delegation.Request{
		Target: "finance", Task: "Get budget for Engineering", SourceAgent: "hr-agent",
		Context: map[string]any{"costCenter": "ENG-1"},
	})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.JSONEq(t, `"Budget: 42k EUR"`, string(got.Result))
	assert.False(t, got.NeedsInput)
	assert.Equal(t, 1, got.Attempts)

	reqs := a.allRequests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "SendMessage", reqs[0].method)
	h := reqs[0].header
	assert.Equal(t, "1.0", h.Get("A2A-Version"))
	assert.Equal(t, "Bearer s3cret", h.Get("Authorization"))
	assert.Equal(t, "agentmesh/"+buildinfo.Version(), h.Get("User-Agent"))
	assert.Equal(t, "application/json", h.Get("Content-Type"))

	ec := a.lastExec()
	m := ec.Message
	assert.Equal(t, got.ID, m.ID, "the message id is the delegation id")
	assert.Equal(t, a2a.MessageRoleUser, m.Role)
	require.Len(t, m.Parts, 1)
	assert.Equal(t, "Get budget for Engineering", m.Parts[0].Text())
	assert.Equal(t, map[string]any{"costCenter": "ENG-1", "depth": 1.0, "chain": []any{"hr-agent"}}, m.Metadata)
	assert.Equal(t, "acme", ec.Tenant)

	stored := e.stored(got.ID)
	assert.Equal(t, delegation.StatusCompleted, stored.Status)
	assert.JSONEq(t, `"Budget: 42k EUR"`, string(stored.Result))
}

// A routed message reaches an A2A agent with its session as the A2A
// contextId and the conversation in the message metadata, next to the
// mesh's depth and chain.
func TestA2ARoutedMessageCarriesTheConversation(t *testing.T) {
	e := newEnv(t, nil)
	a := newA2ATestAgent(t, replyMessage(a2a.NewTextPart("ok")), a2aAgentOpts{})
	e.register(a.record("finance"))
	got := e.delegate(delegation.Request{
		Target: "finance", Task: "and next year?",
		Turn: &delegation.Turn{
			SessionID: "0b8f7c3e-2d2a-4d39-9f43-6f0c1f7f3a11", UserID: "quinn", EmployeeID: "E-7", DisplayName: "Quinn",
			Locale:  "fr-CA",
			History: []delegation.TurnEntry{{Role: "user", Content: "What is the budget?", Timestamp: "2026-01-02T03:04:05Z"}},
		},
	})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	m := a.lastExec().Message
	assert.Equal(t, "0b8f7c3e-2d2a-4d39-9f43-6f0c1f7f3a11", m.ContextID)
	assert.Equal(t, map[string]any{
		"depth": 1.0, "chain": []any{},
		"session": map[string]any{"id": "0b8f7c3e-2d2a-4d39-9f43-6f0c1f7f3a11", "workflowState": map[string]any{},
			"turns": []any{map[string]any{"role": "user", "content": "What is the budget?", "time": "2026-01-02T03:04:05Z"}}},
		"user":   map[string]any{"id": "quinn", "employeeId": "E-7", "displayName": "Quinn"},
		"locale": "fr-CA",
	}, m.Metadata)
}

// A2A agents (docs/AGENTS.md#a2a-agents): auth type header sends
// <headerName>: <token>, on every request (SendMessage and each GetTask).
func TestA2AHeaderAuthOnEveryRequest(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	a := newA2ATestAgent(t, workUntil(release), a2aAgentOpts{returnImmediately: true})
	time.AfterFunc(250*time.Millisecond, func() { close(release) })
	rec := a.record("keyed")
	rec.Auth = &registry.Auth{Type: registry.AuthHeader, HeaderName: "X-Api-Key", Token: "k3y"}
	e.register(rec)

	got := e.delegate(delegation.Request{Target: "keyed", Task: "t"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	reqs := a.allRequests()
	require.GreaterOrEqual(t, len(reqs), 2, "SendMessage and at least one GetTask")
	for _, r := range reqs {
		assert.Equal(t, "k3y", r.header.Get("X-Api-Key"), r.method)
		assert.Empty(t, r.header.Get("Authorization"), r.method)
		assert.Equal(t, "1.0", r.header.Get("A2A-Version"), r.method)
	}
}

// A2A agents (docs/AGENTS.md#a2a-agents): a completed task's result is its
// artifacts' content; a task with no artifacts gives its status message; one
// data part alone is kept as JSON.
func TestA2ACompletedTask(t *testing.T) {
	e := newEnv(t, nil)
	for i, tc := range []struct {
		exec a2aExec
		want string
	}{
		{endTask(a2a.TaskStateCompleted, "", []*a2a.Part{a2a.NewTextPart("Engineering: 42k")}), `"Engineering: 42k"`},
		{endTask(a2a.TaskStateCompleted, "ignored",
			[]*a2a.Part{a2a.NewTextPart("part one, "), a2a.NewTextPart("part two")},
			[]*a2a.Part{a2a.NewTextPart("second artifact")}),
			`"part one, part two\nsecond artifact"`},
		{endTask(a2a.TaskStateCompleted, "", []*a2a.Part{a2a.NewDataPart(map[string]any{"budget": 42})}), `{"budget":42}`},
		{endTask(a2a.TaskStateCompleted, "", []*a2a.Part{a2a.NewTextPart("Total:"), a2a.NewDataPart([]any{1, 2})}), `"Total:\n[1,2]"`},
		{endTask(a2a.TaskStateCompleted, "all done, no artifact"), `"all done, no artifact"`},
		{endTask(a2a.TaskStateCompleted, ""), `""`},
	} {
		name := fmt.Sprintf("agent%d", i)
		e.register(newA2ATestAgent(t, tc.exec, a2aAgentOpts{}).record(name))
		got := e.delegate(delegation.Request{Target: name, Task: "t"})
		require.Equal(t, delegation.StatusCompleted, got.Status, "%s: %s", name, got.Error)
		assert.JSONEq(t, tc.want, string(got.Result), name)
		assert.False(t, got.NeedsInput, name)
	}
}

// A2A agents (docs/AGENTS.md#a2a-agents): a task left working is polled with
// GetTask until it is final.
func TestA2AWorkingTaskPolled(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	a := newA2ATestAgent(t, workUntil(release), a2aAgentOpts{returnImmediately: true})
	e.register(a.record("slow"))
	time.AfterFunc(400*time.Millisecond, func() { close(release) })

	start := time.Now()
	got := e.delegate(delegation.Request{Target: "slow", Task: "t"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.JSONEq(t, `"done"`, string(got.Result))
	assert.Equal(t, 1, got.Attempts)
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
	assert.Equal(t, 1, a.count("SendMessage"), "the task is sent once")
	// 100, 200, 400 ms, ...: three or four polls in 400 ms, not dozens.
	assert.GreaterOrEqual(t, a.count("GetTask"), 2)
	assert.LessOrEqual(t, a.count("GetTask"), 6)
}

// A2A agents (docs/AGENTS.md#a2a-agents): input-required ends the delegation
// completed, with the agent's question as the result and needsInput on the
// record (also in the store); auth-required is treated the same.
func TestA2AInputRequired(t *testing.T) {
	e := newEnv(t, nil)
	e.register(newA2ATestAgent(t, endTask(a2a.TaskStateInputRequired, "Which cost center?"), a2aAgentOpts{}).record("asks"))
	e.register(newA2ATestAgent(t, endTask(a2a.TaskStateAuthRequired, "Sign in at https://idp.example"), a2aAgentOpts{}).record("auth"))
	e.register(newA2ATestAgent(t, endTask(a2a.TaskStateInputRequired, ""), a2aAgentOpts{}).record("mute"))

	got := e.delegate(delegation.Request{Target: "asks", Task: "Get the budget"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.True(t, got.NeedsInput)
	assert.JSONEq(t, `"Which cost center?"`, string(got.Result))

	stored := e.stored(got.ID)
	assert.True(t, stored.NeedsInput)
	raw, err := json.Marshal(stored)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"needsInput":true`)

	got = e.delegate(delegation.Request{Target: "auth", Task: "t"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.True(t, got.NeedsInput)
	assert.JSONEq(t, `"Sign in at https://idp.example"`, string(got.Result))

	got = e.delegate(delegation.Request{Target: "mute", Task: "t"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.True(t, got.NeedsInput)
	assert.Contains(t, string(got.Result), "needs more input")
}

// A2A agents (docs/AGENTS.md#a2a-agents): a polled task that ends in
// input-required also sets needsInput.
func TestA2AInputRequiredAfterPolling(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	exec := func(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		return func(yield func(a2a.Event, error) bool) {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
			q := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("Which year?"))
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, q), nil)
		}
	}
	e.register(newA2ATestAgent(t, exec, a2aAgentOpts{returnImmediately: true}).record("later"))
	time.AfterFunc(150*time.Millisecond, func() { close(release) })

	got := e.delegate(delegation.Request{Target: "later", Task: "t"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.True(t, got.NeedsInput)
	assert.JSONEq(t, `"Which year?"`, string(got.Result))
}

// A2A agents (docs/AGENTS.md#a2a-agents): failed, rejected and canceled tasks
// fail the delegation with the agent's status message; nothing is retried.
func TestA2AFailedTask(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name  string
		state a2a.TaskState
		msg   string
		want  string
	}{
		{"broken", a2a.TaskStateFailed, "budget system down", "agent task failed: budget system down"},
		{"picky", a2a.TaskStateRejected, "not my job", "agent rejected the task: not my job"},
		{"quitter", a2a.TaskStateCanceled, "", "agent canceled the task: (no details)"},
	} {
		a := newA2ATestAgent(t, endTask(tc.state, tc.msg), a2aAgentOpts{})
		e.register(a.record(tc.name))
		got := e.delegate(delegation.Request{Target: tc.name, Task: "t"})
		assert.Equal(t, delegation.StatusFailed, got.Status, tc.name)
		assert.Equal(t, delegation.CodeAgentError, got.Code, tc.name)
		assert.Equal(t, tc.want, got.Error, tc.name)
		assert.Empty(t, got.Result, tc.name)
		assert.False(t, got.NeedsInput, tc.name)
		assert.Equal(t, 1, got.Attempts, tc.name)
		assert.Equal(t, 1, a.count("SendMessage"), tc.name)
		assert.Equal(t, delegation.StatusFailed, e.stored(got.ID).Status, tc.name)
	}
	assert.Empty(t, e.sleeps.all())
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): an agent that is
// down (connection refused) is retried twice, then failed agent_unreachable
// with attempts 3.
func TestA2AAgentDown(t *testing.T) {
	e := newEnv(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	e.register(registry.Agent{Name: "down", Description: "gone", Endpoint: "http://" + addr + "/a2a", Protocol: registry.ProtocolA2A})

	got := e.delegate(delegation.Request{Target: "down", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, got.Status)
	assert.Equal(t, delegation.CodeAgentUnreachable, got.Code)
	assert.Contains(t, got.Error, "cannot connect to the agent")
	assert.Equal(t, 3, got.Attempts)
	assert.Len(t, e.sleeps.all(), 2)
}

// Outbound calls (docs/SECURITY.md#outbound-calls-ssrf): the endpoint policy
// is enforced at dial time, for a name that resolves to a private address
// too; nothing reaches the agent and the refusal is not retried.
func TestA2AEndpointPolicyAtDialTime(t *testing.T) {
	a := newA2ATestAgent(t, replyMessage(a2a.NewTextPart("should not be here")), a2aAgentOpts{})
	port := a.srv.Listener.Addr().(*net.TCPAddr).Port
	client, lookups := loopbackPolicyClient(t)
	e := newEnv(t, &delegation.Options{HTTPClient: client})
	e.register(registry.Agent{Name: "sneaky", Description: "d", Protocol: registry.ProtocolA2A,
		Endpoint: fmt.Sprintf("http://agent.example.com:%d/", port)})

	got := e.delegate(delegation.Request{Target: "sneaky", Task: "t"})
	assertRefusedAtDialTime(t, got)
	assert.Empty(t, a.allRequests(), "the refused address was contacted")
	assert.Equal(t, 1, lookups.get())
}

// Deadlines (docs/AGENTS.md#when-your-agent-is-slow-or-fails): the delegation
// deadline ends a task left working: timeout, with the agent polled meanwhile
// and the task sent once.
func TestA2ADeadlineWhileWorking(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	a := newA2ATestAgent(t, workUntil(release), a2aAgentOpts{returnImmediately: true})
	e.register(a.record("forever"))

	start := time.Now()
	got := e.delegate(delegation.Request{Target: "forever", Task: "t", Timeout: 400 * time.Millisecond})
	elapsed := time.Since(start)
	assert.Equal(t, delegation.StatusTimeout, got.Status)
	assert.Equal(t, delegation.CodeTimeout, got.Code)
	assert.Equal(t, 1, got.Attempts)
	assert.Less(t, elapsed, 2*time.Second, "Delegate returns promptly at the deadline")
	assert.Equal(t, 1, a.count("SendMessage"))
	assert.GreaterOrEqual(t, a.count("GetTask"), 1)
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): HTTP 503 (with
// Retry-After) is retried; other statuses, redirects and JSON-RPC errors are
// not.
func TestA2AErrorReplies(t *testing.T) {
	e := newEnv(t, nil)
	type reply struct {
		name     string
		handler  func(w http.ResponseWriter, r *http.Request, method string) bool
		code     string
		errText  string
		attempts int
	}
	for _, tc := range []reply{
		{"busy", func(w http.ResponseWriter, r *http.Request, _ string) bool {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return true
		}, delegation.CodeAgentError, "agent returned 503: overloaded", 3},
		{"broken", func(w http.ResponseWriter, r *http.Request, _ string) bool {
			http.Error(w, "boom", http.StatusInternalServerError)
			return true
		}, delegation.CodeAgentError, "agent returned 500: boom", 1},
		{"moved", func(w http.ResponseWriter, r *http.Request, _ string) bool {
			http.Redirect(w, r, "http://example.com/", http.StatusTemporaryRedirect)
			return true
		}, delegation.CodeAgentError, "agent returned 307: ", 1},
		{"garbage", func(w http.ResponseWriter, r *http.Request, _ string) bool {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"1","result":{"nonsense":true}}`)
			return true
		}, delegation.CodeBadResponse, "the agent's reply is not a valid A2A JSON-RPC response", 1},
		{"old", func(w http.ResponseWriter, r *http.Request, _ string) bool {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"1","error":{"code":-32009,"message":"A2A 0.3 only"}}`)
			return true
		}, delegation.CodeAgentError, "agent returned A2A error VERSION_NOT_SUPPORTED: A2A 0.3 only", 1},
	} {
		a := newA2ATestAgent(t, replyMessage(a2a.NewTextPart("unused")), a2aAgentOpts{})
		a.setIntercept(tc.handler)
		e.register(a.record(tc.name))
		got := e.delegate(delegation.Request{Target: tc.name, Task: "t"})
		assert.Equal(t, delegation.StatusFailed, got.Status, tc.name)
		assert.Equal(t, tc.code, got.Code, tc.name)
		assert.True(t, strings.HasPrefix(got.Error, tc.errText), "%s: %s", tc.name, got.Error)
		assert.Equal(t, tc.attempts, got.Attempts, tc.name)
		assert.Len(t, a.allRequests(), tc.attempts, tc.name)
	}
}

// An executor error becomes the agent's JSON-RPC error: agent_error, not
// retried.
func TestA2AExecutorError(t *testing.T) {
	e := newEnv(t, nil)
	exec := func(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
		return func(yield func(a2a.Event, error) bool) {
			yield(nil, a2a.NewError(a2a.ErrUnsupportedContentType, "text only, please"))
		}
	}
	e.register(newA2ATestAgent(t, exec, a2aAgentOpts{}).record("fussy"))
	got := e.delegate(delegation.Request{Target: "fussy", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, got.Status)
	assert.Equal(t, delegation.CodeAgentError, got.Code)
	assert.Contains(t, got.Error, "agent returned A2A error CONTENT_TYPE_NOT_SUPPORTED")
	assert.Contains(t, got.Error, "text only, please")
	assert.Equal(t, 1, got.Attempts)
}

// While polling, transient GetTask failures are ridden out; persistent
// ones fail the delegation without a retry (the agent has the task).
func TestA2APollFailures(t *testing.T) {
	e := newEnv(t, nil)
	failGetTask := func(n int) func(w http.ResponseWriter, r *http.Request, method string) bool {
		var seen atomic.Int64
		return func(w http.ResponseWriter, r *http.Request, method string) bool {
			if method != "GetTask" || seen.Add(1) > int64(n) {
				return false
			}
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return true
		}
	}

	// The task stays working until two GetTasks have failed, so the
	// transport must poll through both failures to see it complete.
	release := make(chan struct{})
	var (
		failures atomic.Int64
		once     sync.Once
	)
	flaky := newA2ATestAgent(t, workUntil(release), a2aAgentOpts{returnImmediately: true})
	flaky.setIntercept(func(w http.ResponseWriter, r *http.Request, method string) bool {
		if method != "GetTask" {
			return false
		}
		if failures.Load() >= 2 {
			once.Do(func() { close(release) })
			return false
		}
		failures.Add(1)
		http.Error(w, "restarting", http.StatusServiceUnavailable)
		return true
	})
	e.register(flaky.record("flaky"))
	got := e.delegate(delegation.Request{Target: "flaky", Task: "t"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.JSONEq(t, `"done"`, string(got.Result))
	assert.Equal(t, 1, got.Attempts)
	assert.Equal(t, int64(2), failures.Load())
	assert.GreaterOrEqual(t, flaky.count("GetTask"), 3, "two failed polls, then at least one that saw the task")

	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	gone := newA2ATestAgent(t, workUntil(stuck), a2aAgentOpts{returnImmediately: true})
	gone.setIntercept(failGetTask(100))
	e.register(gone.record("gone"))
	got = e.delegate(delegation.Request{Target: "gone", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, got.Status)
	assert.Equal(t, delegation.CodeAgentError, got.Code)
	assert.Equal(t, "polling the agent's task: agent returned 503: restarting", got.Error)
	assert.Equal(t, 1, got.Attempts, "a failure after the agent took the task is not retried")
	assert.Equal(t, 1, gone.count("SendMessage"))
	assert.Equal(t, 4, gone.count("GetTask"))
}

// Input limits (docs/SECURITY.md#input): an agent reply over 4 MiB fails with
// response_too_large.
func TestA2AReplyTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	big := strings.Repeat("a", delegation.MaxResultBytes+1)
	e.register(newA2ATestAgent(t, replyMessage(a2a.NewTextPart(big)), a2aAgentOpts{}).record("chatty"))
	got := e.delegate(delegation.Request{Target: "chatty", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, got.Status)
	assert.Equal(t, delegation.CodeResponseTooLarge, got.Code)
	assert.Equal(t, "agent reply is over the limit of 4194304 bytes", got.Error)
	assert.Empty(t, got.Result)
	assert.Equal(t, 1, got.Attempts)
}

// The transport on its own: Send returns at ctx's deadline while a
// blocking SendMessage waits for the agent, with a timeout error that is
// not retryable; the zero value refuses to send; an unsupported auth
// type, a non-http endpoint and a context that is not JSON are refused
// before anything is sent.
func TestA2ATransportDirect(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	a := newA2ATestAgent(t, workUntil(release), a2aAgentOpts{})
	tr := delegation.NewA2ATransport(nil)
	msg := delegation.Message{DelegationID: "9f1c2b8e-1d7a-4c55-8a7e-3f1e2d4c5b6a", Task: "t"}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tr.Send(ctx, a.record("blocking"), msg)
	var te *delegation.TransportError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, delegation.CodeTimeout, te.Code)
	assert.False(t, te.Retryable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)

	_, err = (&delegation.A2ATransport{}).Send(context.Background(), a.record("x"), msg)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, apierr.CodeInvalidArgument, te.Code)

	bad := a.record("x")
	bad.Auth = &registry.Auth{Type: "oauth", Token: "t"}
	_, err = tr.Send(context.Background(), bad, msg)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, apierr.CodeInvalidArgument, te.Code)

	_, err = tr.Send(context.Background(), registry.Agent{Name: "x", Endpoint: "inprocess:x"}, msg)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, delegation.CodeEndpointNotAllowed, te.Code)

	odd := msg
	odd.Context = map[string]any{"ch": make(chan int)}
	_, err = tr.Send(context.Background(), a.record("x"), odd)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, apierr.CodeInvalidArgument, te.Code)
	assert.False(t, te.Retryable)
	assert.Equal(t, 1, a.count("SendMessage"), "refused sends reach no agent")
}

// End to end (docs/AGENTS.md#a2a-agents): an agent imported from its Agent
// Card (served by a2a-go) is delegated to through its card's JSON-RPC
// interface.
func TestA2AImportedCardEndToEnd(t *testing.T) {
	e := newEnv(t, nil)
	a := newA2ATestAgent(t, endTask(a2a.TaskStateCompleted, "", []*a2a.Part{a2a.NewTextPart("42 widgets")}), a2aAgentOpts{})
	mux := http.NewServeMux()
	mux.Handle("POST /rpc", http.StripPrefix("/rpc", a.srv.Config.Handler))
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)
	mux.Handle("GET /.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{
		Name:        "Inventory Agent",
		Description: "Counts things in the warehouse",
		Version:     "2.1.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(site.URL+"/rpc", a2a.TransportProtocolJSONRPC),
		},
		Skills: []a2a.AgentSkill{{ID: "count", Name: "count stock", Description: "Counts stock", Tags: []string{"inventory"}}},
	}))

	card, err := a2acard.Fetch(context.Background(), nil, site.URL+"/.well-known/agent-card.json")
	require.NoError(t, err)
	rec, err := a2acard.ToAgent(card, site.URL+"/.well-known/agent-card.json")
	require.NoError(t, err)
	e.register(rec)

	got := e.delegate(delegation.Request{Target: rec.Name, Task: "How many widgets?"})
	require.Equal(t, delegation.StatusCompleted, got.Status, got.Error)
	assert.JSONEq(t, `"42 widgets"`, string(got.Result))
	assert.Equal(t, "How many widgets?", a.lastExec().Message.Parts[0].Text())
	listed, err := e.c.List(context.Background(), delegation.ListFilter{Target: rec.Name})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, delegation.StatusCompleted, listed[0].Status)
}

// A canceled delegation stops polling at once.
func TestA2ACancelWhilePolling(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	a := newA2ATestAgent(t, workUntil(release), a2aAgentOpts{returnImmediately: true})
	e.register(a.record("slow"))

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(250*time.Millisecond, cancel)
	start := time.Now()
	got, err := e.c.Delegate(ctx, delegation.Request{Target: "slow", Task: "t"})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, got.Status)
	assert.Equal(t, delegation.CodeCanceled, got.Code)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, 1, got.Attempts)
	assert.Equal(t, 1, a.count("SendMessage"))
}
