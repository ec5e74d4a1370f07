package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// mcpTestAgent is a real go-sdk MCP server on an httptest listener whose
// handle_message tool is reply. It records every request it receives.
type mcpTestAgent struct {
	t       *testing.T
	srv     *httptest.Server
	reply   mcp.ToolHandler
	opts    *mcp.StreamableHTTPOptions
	handler atomic.Pointer[http.Handler]

	// intercept, when set, answers a request instead of the MCP handler
	// (it sees the JSON-RPC method). It returns false to pass it on.
	intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request, method string) bool]

	mu       sync.Mutex
	requests []mcpTestRequest
	args     []map[string]any // arguments of each handle_message call
}

type mcpTestRequest struct {
	httpMethod string
	rpcMethod  string
	header     http.Header
}

// newMCPTestAgent starts an agent. opts configures its Streamable HTTP
// handler (nil: stateful, SSE replies).
func newMCPTestAgent(t *testing.T, reply mcp.ToolHandler, opts *mcp.StreamableHTTPOptions) *mcpTestAgent {
	t.Helper()
	a := &mcpTestAgent{t: t, reply: reply, opts: opts}
	a.handler.Store(a.newHandler())
	a.srv = httptest.NewServer(http.HandlerFunc(a.serveHTTP))
	t.Cleanup(a.srv.Close)
	return a
}

// newHandler returns a fresh MCP server and handler: no sessions survive.
func (a *mcpTestAgent) newHandler() *http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        mcpToolName,
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		a.mu.Lock()
		a.args = append(a.args, args)
		a.mu.Unlock()
		return a.reply(ctx, req)
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, a.opts)
	return &h
}

func (a *mcpTestAgent) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var rpc struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &rpc)
	a.mu.Lock()
	a.requests = append(a.requests, mcpTestRequest{r.Method, rpc.Method, r.Header.Clone()})
	a.mu.Unlock()
	if f := a.intercept.Load(); f != nil && (*f)(w, r, rpc.Method) {
		return
	}
	(*a.handler.Load()).ServeHTTP(w, r)
}

// restart drops every session, as a restarted agent process would.
func (a *mcpTestAgent) restart() {
	a.handler.Store(a.newHandler())
	a.srv.CloseClientConnections()
}

func (a *mcpTestAgent) setIntercept(f func(w http.ResponseWriter, r *http.Request, method string) bool) {
	a.intercept.Store(&f)
}

// count returns how many requests carried the JSON-RPC method (or, for
// "DELETE", the HTTP method).
func (a *mcpTestAgent) count(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.requests {
		if r.rpcMethod == method || (r.rpcMethod == "" && r.httpMethod == method) {
			n++
		}
	}
	return n
}

func (a *mcpTestAgent) allRequests() []mcpTestRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]mcpTestRequest(nil), a.requests...)
}

func (a *mcpTestAgent) lastArgs() map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	require.NotEmpty(a.t, a.args, "agent got no handle_message call")
	return a.args[len(a.args)-1]
}

func (a *mcpTestAgent) record(name string) registry.Agent {
	return registry.Agent{Name: name, Endpoint: a.srv.URL, Protocol: registry.ProtocolMCP}
}

// replyWith returns a tool handler that always returns res.
func replyWith(res *mcp.CallToolResult) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil }
}

func textResult(texts ...string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	for _, s := range texts {
		res.Content = append(res.Content, &mcp.TextContent{Text: s})
	}
	return res
}

func newTestMCPTransport(t *testing.T, opts *MCPOptions) *MCPTransport {
	t.Helper()
	tr := NewMCPTransport(opts)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func testMessage() Message {
	return Message{
		DelegationID: "9f1c2b8e-1d7a-4c55-8a7e-3f1e2d4c5b6a",
		Task:         "Get budget and cost center for Engineering",
		Context:      map[string]any{"depth": 1, "chain": []any{"hr-agent"}},
	}
}

func requireTransportError(t *testing.T, err error, code string) *TransportError {
	t.Helper()
	var terr *TransportError
	require.ErrorAs(t, err, &terr)
	require.Equal(t, code, terr.Code, "message: %s; err: %v", terr.Message, terr.Err)
	return terr
}

func TestMCPTransportReplies(t *testing.T) {
	tests := []struct {
		name  string
		reply *mcp.CallToolResult
		want  AgentResponse
	}{
		{
			name: "structured content first",
			reply: &mcp.CallToolResult{
				StructuredContent: map[string]any{
					"content":           "Engineering: budget 1.2M, cost center CC-100",
					"workflow_complete": true,
					"workflow_state":    map[string]any{"step": "done"},
					"extra":             "ignored",
				},
				Content: []mcp.Content{&mcp.TextContent{Text: "not this"}},
			},
			want: AgentResponse{
				Content:          "Engineering: budget 1.2M, cost center CC-100",
				WorkflowComplete: true,
				WorkflowState:    map[string]any{"step": "done"},
			},
		},
		{
			name:  "plain text",
			reply: textResult("  Engineering's budget is 1.2M.\n"),
			want:  AgentResponse{Content: "Engineering's budget is 1.2M."},
		},
		{
			name:  "JSON AgentResponse in text with workflow state",
			reply: textResult(`{"content":"Which quarter?","workflow_complete":false,"workflow_state":{"awaiting":"quarter","n":2}}`),
			want: AgentResponse{
				Content:       "Which quarter?",
				WorkflowState: map[string]any{"awaiting": "quarter", "n": float64(2)},
			},
		},
		{
			name: "invalid candidates are skipped",
			reply: &mcp.CallToolResult{
				StructuredContent: map[string]any{"response": "seed-style body"},
				Content: []mcp.Content{
					&mcp.ImageContent{Data: []byte{1}, MIMEType: "image/png"},
					&mcp.TextContent{Text: "   "},
					&mcp.TextContent{Text: `{"content":""}`},
					&mcp.TextContent{Text: `{"content":"ok","workflow_complete":true}`},
				},
			},
			want: AgentResponse{Content: "ok", WorkflowComplete: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newMCPTestAgent(t, replyWith(tt.reply), nil)
			tr := newTestMCPTransport(t, nil)

			reply, err := tr.Send(context.Background(), a.record("budget"), testMessage())
			require.NoError(t, err)
			require.NotNil(t, reply.Response)
			assert.Equal(t, tt.want, *reply.Response)
			want, _ := json.Marshal(tt.want.Content)
			assert.JSONEq(t, string(want), string(reply.Result), "Result is the content as a JSON string")
			assert.False(t, reply.Accepted)
		})
	}
}

func TestMCPTransportArgumentsPlainDelegation(t *testing.T) {
	a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	tr := newTestMCPTransport(t, nil)

	_, err := tr.Send(context.Background(), a.record("budget"), testMessage())
	require.NoError(t, err)

	assert.Equal(t, map[string]any{
		"session_id":        "",
		"request_id":        "9f1c2b8e-1d7a-4c55-8a7e-3f1e2d4c5b6a",
		"employee_id":       "",
		"display_name":      "",
		"raw_input":         "Get budget and cost center for Engineering",
		"intent_summary":    "",
		"entities":          map[string]any{},
		"detected_language": "",
		"turn_history":      []any{},
		"workflow_state":    map[string]any{},
		"metadata":          map[string]any{"depth": float64(1), "chain": []any{"hr-agent"}},
	}, a.lastArgs())
}

func TestMCPTransportArgumentsRoutedTurn(t *testing.T) {
	a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	tr := newTestMCPTransport(t, nil)
	msg := testMessage()
	msg.Task = "and for Q3?"
	msg.Turn = &Turn{
		SessionID:        "5b0c6f52-8a4e-4d2b-9c1f-0e7d6a5b4c3d",
		EmployeeID:       "E123",
		DisplayName:      "Ada Lovelace",
		IntentSummary:    "budget lookup for Q3",
		Entities:         map[string]any{"quarter": "Q3"},
		DetectedLanguage: "en",
		History: []TurnEntry{
			{Role: "user", Content: "budget for Engineering?", Timestamp: "2026-01-02T03:04:05Z", IntentSummary: "budget lookup"},
			{Role: "agent", Content: "1.2M", Timestamp: "2026-01-02T03:04:06Z"},
		},
		WorkflowState: map[string]any{"step": 2},
		Metadata:      map[string]any{"orgId": "acme", "depth": 99},
	}

	_, err := tr.Send(context.Background(), a.record("budget"), msg)
	require.NoError(t, err)

	assert.Equal(t, map[string]any{
		"session_id":        "5b0c6f52-8a4e-4d2b-9c1f-0e7d6a5b4c3d",
		"request_id":        "9f1c2b8e-1d7a-4c55-8a7e-3f1e2d4c5b6a",
		"employee_id":       "E123",
		"display_name":      "Ada Lovelace",
		"raw_input":         "and for Q3?",
		"intent_summary":    "budget lookup for Q3",
		"entities":          map[string]any{"quarter": "Q3"},
		"detected_language": "en",
		"turn_history": []any{
			map[string]any{"role": "user", "content": "budget for Engineering?", "timestamp": "2026-01-02T03:04:05Z", "intent_summary": "budget lookup"},
			map[string]any{"role": "agent", "content": "1.2M", "timestamp": "2026-01-02T03:04:06Z"},
		},
		"workflow_state": map[string]any{"step": float64(2)},
		// The caller's metadata, with the mesh's depth and chain on top.
		"metadata": map[string]any{"orgId": "acme", "depth": float64(1), "chain": []any{"hr-agent"}},
	}, a.lastArgs())
	assert.Equal(t, 99, msg.Turn.Metadata["depth"], "the caller's maps are not modified")
}

func TestMCPTransportIsError(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2000 bytes
	tests := []struct {
		name    string
		reply   mcp.ToolHandler
		message string
	}{
		{
			name:    "isError result",
			reply:   replyWith(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such cost center"}}}),
			message: "agent returned an error: no such cost center",
		},
		{
			name: "tool handler error",
			reply: func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res := &mcp.CallToolResult{}
				res.SetError(errors.New("database down"))
				return res, nil
			},
			message: "agent returned an error: database down",
		},
		{
			name:    "text capped at 1 KiB",
			reply:   replyWith(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: long}}}),
			message: "agent returned an error: " + strings.Repeat("é", 512),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newMCPTestAgent(t, tt.reply, nil)
			tr := newTestMCPTransport(t, nil)

			_, err := tr.Send(context.Background(), a.record("budget"), testMessage())
			terr := requireTransportError(t, err, CodeAgentError)
			assert.Equal(t, tt.message, terr.Message)
			assert.False(t, terr.Retryable)

			// A tool error leaves the session usable.
			_, _ = tr.Send(context.Background(), a.record("budget"), testMessage())
			assert.Equal(t, 1, a.count("initialize"))
		})
	}
}

func TestMCPTransportNoUsableContent(t *testing.T) {
	for name, res := range map[string]*mcp.CallToolResult{
		"empty":            {},
		"blank text":       textResult(" \n\t"),
		"seed-style body":  textResult(`{"response":"hi","status":200}`),
		"content not text": textResult(`{"content":42}`),
		"bad state":        textResult(`{"content":"x","workflow_state":[1]}`),
		"bad complete":     textResult(`{"content":"x","workflow_complete":"yes"}`),
		"image only":       {Content: []mcp.Content{&mcp.ImageContent{Data: []byte{1}, MIMEType: "image/png"}}},
	} {
		t.Run(name, func(t *testing.T) {
			a := newMCPTestAgent(t, replyWith(res), nil)
			tr := newTestMCPTransport(t, nil)

			_, err := tr.Send(context.Background(), a.record("budget"), testMessage())
			terr := requireTransportError(t, err, CodeBadResponse)
			assert.False(t, terr.Retryable)
		})
	}
}

func TestMCPTransportUnknownToolIsAgentError(t *testing.T) {
	// An MCP server without handle_message answers with a JSON-RPC error.
	s := mcp.NewServer(&mcp.Implementation{Name: "other", Version: "1"}, nil)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	tr := newTestMCPTransport(t, nil)
	agent := registry.Agent{Name: "other", Endpoint: srv.URL}

	_, err := tr.Send(context.Background(), agent, testMessage())
	terr := requireTransportError(t, err, CodeAgentError)
	assert.Contains(t, terr.Message, "agent returned JSON-RPC error")
	assert.Contains(t, terr.Message, mcpToolName)
	assert.False(t, terr.Retryable)
}

func TestMCPTransportTimeout(t *testing.T) {
	release := make(chan struct{})
	a := newMCPTestAgent(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.Arguments != nil && bytes.Contains(req.Params.Arguments, []byte("quick")) {
			return textResult("quick reply"), nil
		}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return textResult("too late"), nil
	}, nil)
	t.Cleanup(func() { close(release) })
	tr := NewMCPTransport(nil)
	agent := a.record("slow")

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tr.Send(ctx, agent, testMessage())
	elapsed := time.Since(start)
	terr := requireTransportError(t, err, CodeTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, terr.Retryable)
	assert.Less(t, elapsed, 2*time.Second, "Send returns promptly at the deadline")

	// The agent stays usable after a timed-out call.
	msg := testMessage()
	msg.Task = "quick"
	reply, err := tr.Send(context.Background(), agent, msg)
	require.NoError(t, err)
	assert.Equal(t, "quick reply", reply.Response.Content)

	require.NoError(t, tr.Close())
	assert.Eventually(t, func() bool { return mcpClientGoroutines() == 0 }, 10*time.Second, 20*time.Millisecond,
		"MCP client goroutines left after Close: %d", mcpClientGoroutines())
}

// mcpClientGoroutines counts the goroutines running MCPTransport or SDK
// client connection code.
func mcpClientGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "delegation.(*MCPTransport)") || strings.Contains(g, "mcp.(*streamableClientConn)") {
			count++
		}
	}
	return count
}

func TestMCPTransportDeadlineWhileConnecting(t *testing.T) {
	// An agent that never answers the handshake: the Send still ends at its
	// deadline.
	tr := newTestMCPTransport(t, nil)
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stall) }) // before tr.Close: the SDK waits up to 5 s on a stalled peer

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tr.Send(ctx, registry.Agent{Name: "mute", Endpoint: srv.URL}, testMessage())
	requireTransportError(t, err, CodeTimeout)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestMCPTransportBearerAuth(t *testing.T) {
	a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	a.setIntercept(func(w http.ResponseWriter, r *http.Request, _ string) bool {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		}
		return false
	})
	tr := newTestMCPTransport(t, nil)
	agent := a.record("secure")
	agent.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}

	_, err := tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	for _, r := range a.allRequests() {
		assert.Equal(t, "Bearer s3cret", r.header.Get("Authorization"), "%s %s", r.httpMethod, r.rpcMethod)
		assert.True(t, strings.HasPrefix(r.header.Get("User-Agent"), "agentmesh/"))
	}

	// A wrong token is the agent's refusal, not retryable, and its text
	// does not carry the token.
	agent.Auth.Token = "wrong"
	_, err = tr.Send(context.Background(), agent, testMessage())
	terr := requireTransportError(t, err, CodeAgentError)
	assert.Equal(t, http.StatusUnauthorized, terr.Status)
	assert.False(t, terr.Retryable)
	assert.NotContains(t, terr.Error(), "wrong")
}

func TestMCPTransportHeaderAuth(t *testing.T) {
	a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	a.setIntercept(func(w http.ResponseWriter, r *http.Request, _ string) bool {
		if r.Header.Get("X-Api-Key") != "k-123" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return true
		}
		return false
	})
	tr := newTestMCPTransport(t, nil)
	agent := a.record("keyed")
	agent.Auth = &registry.Auth{Type: registry.AuthHeader, HeaderName: "X-Api-Key", Token: "k-123"}

	_, err := tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	assert.Empty(t, a.allRequests()[0].header.Get("Authorization"))
}

func TestMCPTransportEndpointChangeReopensSession(t *testing.T) {
	first := newMCPTestAgent(t, replyWith(textResult("from first")), nil)
	second := newMCPTestAgent(t, replyWith(textResult("from second")), nil)
	tr := newTestMCPTransport(t, nil)
	agent := first.record("budget")

	reply, err := tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	assert.Equal(t, "from first", reply.Response.Content)
	reply, err = tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	assert.Equal(t, 1, first.count("initialize"), "the session is cached")

	agent.Endpoint = second.srv.URL // re-registered elsewhere
	reply, err = tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	assert.Equal(t, "from second", reply.Response.Content)
	assert.Equal(t, 1, second.count("initialize"))
	assert.Eventually(t, func() bool { return first.count("DELETE") == 1 }, 5*time.Second, 10*time.Millisecond,
		"the old session is closed")

	// An auth change re-opens the session too.
	agent.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "new"}
	_, err = tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	assert.Equal(t, 2, second.count("initialize"))
}

func TestMCPTransportIdleSessionsClosed(t *testing.T) {
	gone := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	busy := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	tr := newTestMCPTransport(t, &MCPOptions{IdleTimeout: 50 * time.Millisecond})

	_, err := tr.Send(context.Background(), gone.record("gone"), testMessage())
	require.NoError(t, err)
	_, err = tr.Send(context.Background(), busy.record("busy"), testMessage())
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)

	// The next Send, to any agent, closes the idle sessions.
	_, err = tr.Send(context.Background(), busy.record("busy"), testMessage())
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return gone.count("DELETE") == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 2, busy.count("initialize"), "an idle session is re-opened")
}

func TestMCPTransportAgentRestartReconnects(t *testing.T) {
	a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	hc := (*netguard.Policy)(nil).NewClient(nil)
	tr := newTestMCPTransport(t, &MCPOptions{HTTPClient: hc})
	agent := a.record("budget")

	_, err := tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)

	// The agent restarts: it forgets its sessions and drops its
	// connections. Let the client's pool notice, so that the next request
	// does not race the closing connection (that case is ambiguous:
	// agent_unreachable, not retryable).
	a.restart()
	hc.CloseIdleConnections()

	reply, err := tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err, "the stale session is replaced transparently")
	assert.Equal(t, "ok", reply.Response.Content)
	assert.Equal(t, 2, a.count("initialize"))
	assert.Equal(t, 3, a.count("tools/call"), "one call refused with 404, never run, then sent on the new session")
	a.mu.Lock()
	assert.Len(t, a.args, 2, "the tool ran once per Send")
	a.mu.Unlock()

	// A session lost behind a proxy that keeps the connections open is
	// replaced the same way.
	a.handler.Store(a.newHandler())
	_, err = tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	assert.Equal(t, 3, a.count("initialize"))

	// Other SDKs (the TypeScript one) answer 404 with a JSON-RPC error
	// body, which the Go SDK does not report as ErrSessionMissing.
	reqs := a.allRequests()
	old := reqs[len(reqs)-1].header.Get("Mcp-Session-Id")
	require.NotEmpty(t, old)
	a.setIntercept(func(w http.ResponseWriter, r *http.Request, _ string) bool {
		if r.Header.Get("Mcp-Session-Id") != old {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}`)
		return true
	})
	a.handler.Store(a.newHandler())
	reply, err = tr.Send(context.Background(), agent, testMessage())
	require.NoError(t, err)
	assert.Equal(t, "ok", reply.Response.Content)
	assert.Equal(t, 4, a.count("initialize"))
}

func TestMCPTransportLostSessionRedoneOnce(t *testing.T) {
	// An agent that loses every session: the transport redoes a call on a
	// cached session once, on a fresh session, then reports a retryable
	// failure.
	a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	tr := newTestMCPTransport(t, nil)
	_, err := tr.Send(context.Background(), a.record("amnesiac"), testMessage())
	require.NoError(t, err)

	a.setIntercept(func(w http.ResponseWriter, r *http.Request, method string) bool {
		if method != "tools/call" {
			return false
		}
		http.Error(w, "session not found", http.StatusNotFound)
		return true
	})
	_, err = tr.Send(context.Background(), a.record("amnesiac"), testMessage())
	terr := requireTransportError(t, err, CodeAgentUnreachable)
	assert.True(t, terr.Retryable, "the agent never ran the call")
	assert.Equal(t, 3, a.count("tools/call"), "one call, then one redo on a fresh session")
	assert.Equal(t, 2, a.count("initialize"))

	// The next Send starts on a fresh session: no redo.
	_, err = tr.Send(context.Background(), a.record("amnesiac"), testMessage())
	requireTransportError(t, err, CodeAgentUnreachable)
	assert.Equal(t, 4, a.count("tools/call"))
}

func TestMCPTransportConcurrentSendsShareOneSession(t *testing.T) {
	a := newMCPTestAgent(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return textResult("reply to " + args.RequestID), nil
	}, nil)
	tr := newTestMCPTransport(t, nil)
	agent := a.record("budget")

	const n = 32
	var wg sync.WaitGroup
	errs := make([]error, n)
	replies := make([]Reply, n)
	for i := range n {
		wg.Go(func() {
			msg := testMessage()
			msg.DelegationID = "d" + string(rune('A'+i))
			replies[i], errs[i] = tr.Send(context.Background(), agent, msg)
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, "reply to d"+string(rune('A'+i)), replies[i].Response.Content)
	}
	assert.Equal(t, 1, a.count("initialize"), "one handshake for all")
	assert.Equal(t, n, a.count("tools/call"))
}

func TestMCPTransportUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "http://" + l.Addr().String() + "/mcp"
	require.NoError(t, l.Close()) // nothing listens there now
	tr := newTestMCPTransport(t, nil)

	_, err = tr.Send(context.Background(), registry.Agent{Name: "gone", Endpoint: endpoint}, testMessage())
	terr := requireTransportError(t, err, CodeAgentUnreachable)
	assert.True(t, terr.Retryable, "connection refused never reached the agent")
	assert.NotContains(t, terr.Message, l.Addr().String(), "the message does not quote the endpoint")

	// The failed handshake is not cached.
	_, err = tr.Send(context.Background(), registry.Agent{Name: "gone", Endpoint: endpoint}, testMessage())
	requireTransportError(t, err, CodeAgentUnreachable)
}

func TestMCPTransportDNSFailure(t *testing.T) {
	hc := (*netguard.Policy)(nil).NewClient(&netguard.ClientOptions{
		LookupIP: func(_ context.Context, host string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
	})
	tr := newTestMCPTransport(t, &MCPOptions{HTTPClient: hc})

	_, err := tr.Send(context.Background(), registry.Agent{Name: "typo", Endpoint: "http://budget-agnet.example/mcp"}, testMessage())
	terr := requireTransportError(t, err, CodeAgentUnreachable)
	assert.True(t, terr.Retryable)
}

func TestMCPTransportEndpointNotAllowed(t *testing.T) {
	a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
	strict, err := netguard.NewPolicy(netguard.Options{}) // refuses loopback
	require.NoError(t, err)
	tr := newTestMCPTransport(t, &MCPOptions{HTTPClient: strict.NewClient(nil)})

	_, err = tr.Send(context.Background(), a.record("local"), testMessage())
	terr := requireTransportError(t, err, CodeEndpointNotAllowed)
	assert.ErrorIs(t, err, netguard.ErrNotAllowed)
	assert.Contains(t, terr.Message, "loopback")
	assert.False(t, terr.Retryable)
	assert.Empty(t, a.allRequests(), "nothing reached the agent")

	_, err = tr.Send(context.Background(), registry.Agent{Name: "x", Endpoint: "inprocess:x"}, testMessage())
	requireTransportError(t, err, CodeEndpointNotAllowed)
}

func TestMCPTransportResponseTooLarge(t *testing.T) {
	for name, opts := range map[string]*mcp.StreamableHTTPOptions{
		"SSE reply":  nil,
		"JSON reply": {JSONResponse: true},
	} {
		t.Run(name, func(t *testing.T) {
			a := newMCPTestAgent(t, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if bytes.Contains(req.Params.Arguments, []byte("big")) {
					return textResult(strings.Repeat("x", 100<<10)), nil
				}
				return textResult("small"), nil
			}, opts)
			tr := newTestMCPTransport(t, &MCPOptions{MaxResponseBytes: 64 << 10})
			agent := a.record("big")
			msg := testMessage()
			msg.Task = "big"

			_, err := tr.Send(context.Background(), agent, msg)
			terr := requireTransportError(t, err, CodeResponseTooLarge)
			assert.False(t, terr.Retryable)

			reply, err := tr.Send(context.Background(), agent, testMessage())
			require.NoError(t, err, "the next call works")
			assert.Equal(t, "small", reply.Response.Content)
		})
	}
}

func TestMCPTransportHTTPStatuses(t *testing.T) {
	tests := []struct {
		name       string
		method     string // JSON-RPC method the agent refuses
		status     int
		retryable  bool
		retryAfter time.Duration
	}{
		{"503 on call", "tools/call", http.StatusServiceUnavailable, true, 2 * time.Second},
		{"429 on handshake", "initialize", http.StatusTooManyRequests, true, 2 * time.Second},
		{"502 on call", "tools/call", http.StatusBadGateway, true, 2 * time.Second},
		{"500 on call", "tools/call", http.StatusInternalServerError, false, 0},
		{"400 on call", "tools/call", http.StatusBadRequest, false, 0},
		{"302 on handshake", "initialize", http.StatusFound, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newMCPTestAgent(t, replyWith(textResult("ok")), nil)
			var refused atomic.Bool
			a.setIntercept(func(w http.ResponseWriter, r *http.Request, method string) bool {
				if method != tt.method || refused.Swap(true) {
					return false
				}
				w.Header().Set("Retry-After", "2")
				w.Header().Set("Location", "http://169.254.169.254/")
				http.Error(w, "busy", tt.status)
				return true
			})
			tr := newTestMCPTransport(t, &MCPOptions{ProtocolVersion: "2025-11-25"})
			agent := a.record("busy")

			_, err := tr.Send(context.Background(), agent, testMessage())
			terr := requireTransportError(t, err, CodeAgentError)
			assert.Equal(t, tt.status, terr.Status)
			assert.Equal(t, tt.retryable, terr.Retryable)
			assert.Equal(t, tt.retryAfter, terr.RetryAfter)
			assert.Equal(t, 1, a.count(tt.method), "the transport does not retry")

			// The client's retry goes through.
			_, err = tr.Send(context.Background(), agent, testMessage())
			require.NoError(t, err)
		})
	}
}

func TestMCPTransportProtocolVersion(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stateless bool
		pin       string
		want      string
	}{
		{"stateless agent negotiates 2026-07-28", true, "", "2026-07-28"},
		{"stateful agent falls back to 2025-11-25", false, "", "2025-11-25"},
		{"pinned version skips discovery", true, "2025-11-25", "2025-11-25"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newMCPTestAgent(t, replyWith(textResult("ok")), &mcp.StreamableHTTPOptions{Stateless: tt.stateless})
			tr := newTestMCPTransport(t, &MCPOptions{ProtocolVersion: tt.pin})

			_, err := tr.Send(context.Background(), a.record("v"), testMessage())
			require.NoError(t, err)
			for _, r := range a.allRequests() {
				if r.rpcMethod == "tools/call" {
					assert.Equal(t, tt.want, r.header.Get("Mcp-Protocol-Version"))
				}
			}
			if tt.pin != "" {
				assert.Zero(t, a.count("server/discover"))
			}
		})
	}
}

func TestMCPTransportClose(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	a := newMCPTestAgent(t, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return textResult("late"), nil
	}, nil)
	// The SDK's agent ends a session (DELETE) only after its handlers
	// return; this agent stops its work when the session ends.
	var once sync.Once
	a.setIntercept(func(_ http.ResponseWriter, r *http.Request, _ string) bool {
		if r.Method == http.MethodDelete {
			once.Do(func() { close(release) })
		}
		return false
	})
	tr := NewMCPTransport(nil)

	sent := make(chan error, 1)
	go func() {
		_, err := tr.Send(context.Background(), a.record("slow"), testMessage())
		sent <- err
	}()
	<-started
	require.NoError(t, tr.Close())
	select {
	case err := <-sent:
		assert.ErrorIs(t, err, ErrClosed, "Close aborts calls in flight")
	case <-time.After(5 * time.Second):
		t.Fatal("Send did not return after Close")
	}
	assert.Equal(t, 1, a.count("DELETE"), "Close ended the agent's session")

	require.NoError(t, tr.Close(), "Close is idempotent")
	_, err := tr.Send(context.Background(), a.record("slow"), testMessage())
	terr := requireTransportError(t, err, CodeCanceled)
	assert.ErrorIs(t, terr, ErrClosed)

	var zero MCPTransport
	_, err = zero.Send(context.Background(), a.record("slow"), testMessage())
	assert.ErrorIs(t, err, ErrClosed, "the zero value refuses Sends")
	assert.NoError(t, zero.Close())
}

func TestMCPParseAgentReply(t *testing.T) {
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want *AgentResponse
	}{
		{"nil", nil, nil},
		{"structured string", &mcp.CallToolResult{StructuredContent: "  hi  "}, &AgentResponse{Content: "hi"}},
		{"structured number skipped", &mcp.CallToolResult{StructuredContent: 42.0}, nil},
		{"structured raw JSON", &mcp.CallToolResult{StructuredContent: json.RawMessage(`{"content":"raw"}`)}, &AgentResponse{Content: "raw"}},
		{"JSON scalar text is plain text", textResult("42"), &AgentResponse{Content: "42"}},
		{"broken JSON is plain text", textResult(`{"content": "x"`), &AgentResponse{Content: `{"content": "x"`}},
		{"null fields are absent", textResult(`{"content":"x","workflow_complete":null,"workflow_state":null}`), &AgentResponse{Content: "x"}},
		{"keys are case-sensitive", textResult(`{"Content":"x"}`), nil},
		{"null object", textResult(`null`), &AgentResponse{Content: "null"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseAgentReply(tt.res)
			assert.Equal(t, tt.want != nil, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTruncateText(t *testing.T) {
	assert.Equal(t, "ab", truncateText("ab", 4))
	assert.Equal(t, "a", truncateText("aé", 2), "cut on a rune boundary")
	assert.Equal(t, "\uFFFD", truncateText("\xff", 4), "invalid UTF-8 replaced")
}
