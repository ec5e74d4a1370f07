package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/registry"
)

// Defaults of [MCPOptions].
const (
	// DefaultMCPConnectTimeout bounds opening an MCP session with an agent.
	DefaultMCPConnectTimeout = 30 * time.Second
	// DefaultMCPIdleTimeout is how long an unused MCP session is kept.
	DefaultMCPIdleTimeout = 10 * time.Minute
)

const (
	// mcpToolName is the tool an MCP agent must offer.
	mcpToolName = "handle_message"
	// mcpTextLimit caps the agent text quoted in a TransportError.Message.
	mcpTextLimit = 1 << 10
)

// MCPOptions configures an [MCPTransport]. A nil *MCPOptions, like the zero
// value, means all defaults.
type MCPOptions struct {
	// HTTPClient sends every request to agents. Nil means a client from
	// netguard with a nil policy, which allows private addresses (the
	// library default of the endpoint policy); pass (*netguard.Policy).NewClient to
	// enforce an endpoint policy at dial time. The transport uses a copy
	// whose Transport is wrapped to add the agent's auth header, the
	// User-Agent and the reply cap, and whose CheckRedirect refuses
	// redirects. Its Timeout should be 0: the context bounds each call.
	HTTPClient *http.Client

	// MaxResponseBytes caps each HTTP response body read from an agent,
	// JSON-RPC envelope included; a bigger reply fails with
	// response_too_large. ≤ 0 means [MaxResultBytes] (4 MiB).
	MaxResponseBytes int64

	// ConnectTimeout bounds opening a session with an agent. The session
	// is opened once for all concurrent Sends to that agent, so its
	// handshake is not bound to any one caller's context. ≤ 0 means
	// [DefaultMCPConnectTimeout].
	ConnectTimeout time.Duration

	// IdleTimeout is how long a session may go unused before it is closed,
	// so that agents that left the registry do not keep sessions open
	// forever. Idle sessions are found lazily, by later Sends. ≤ 0 means
	// [DefaultMCPIdleTimeout].
	IdleTimeout time.Duration

	// ProtocolVersion is the MCP protocol version the client asks for. ""
	// (the default) lets the SDK negotiate: it tries the stateless
	// 2026-07-28 handshake (server/discover) first and falls back to the
	// legacy initialize handshake, which the server negotiates down. Set
	// it, say to "2025-11-25", to skip server/discover for agents that
	// mishandle it.
	ProtocolVersion string

	// Propagator writes the trace context of each call into every HTTP
	// request of that call (with propagation.TraceContext, the W3C
	// traceparent and tracestate headers); the handshake of a session
	// carries the context of the Send that opened it. Nil means the global
	// propagator (otel.GetTextMapPropagator), a no-op unless the host
	// installs one.
	Propagator propagation.TextMapPropagator

	// Logger receives session lifecycle events at Debug level. Nil means
	// no logging.
	Logger *slog.Logger
}

// MCPTransport is the [Transport] for agents with protocol mcp:
// it calls the agent's handle_message tool over MCP Streamable HTTP with the
// official Go SDK.
//
// It keeps one MCP session per agent name. The session is opened on the
// first Send (concurrent Sends share that one handshake), re-opened when the
// agent's endpoint or auth changes, and dropped when a call shows it broken,
// so the next Send opens a new one. A Send that finds its cached session
// already gone before the request reached the agent (the agent lost the
// session, say after a restart) opens a fresh session and sends once more;
// it never sends again a request that may have reached the agent.
//
// Failures are *[TransportError] values. MCPTransport is safe for
// concurrent use. Create one with [NewMCPTransport] and Close it when done;
// the zero value refuses every Send.
type MCPTransport struct {
	client         *mcp.Client
	sessionOpts    *mcp.ClientSessionOptions
	httpClient     *http.Client
	baseRT         http.RoundTripper
	prop           propagation.TextMapPropagator
	userAgent      string
	maxBytes       int64
	connectTimeout time.Duration
	idleTimeout    time.Duration
	logger         *slog.Logger
	closeOnce      sync.Once
	wg             sync.WaitGroup // connect and close goroutines
	mu             sync.Mutex     // guards the fields below
	closed         bool
	conns          map[string]*mcpConn   // current session per agent name
	live           map[*mcpConn]struct{} // every session not yet closing
	calls          map[*mcpCall]struct{} // calls in flight, aborted by Close
	lastSweep      time.Time             // last search for idle sessions
}

// mcpCall is a call in flight; Close aborts it with cancel.
type mcpCall struct{ cancel context.CancelFunc }

// NewMCPTransport returns an MCPTransport with the given options. The
// options are copied.
func NewMCPTransport(opts *MCPOptions) *MCPTransport {
	var o MCPOptions
	if opts != nil {
		o = *opts
	}
	hc, rt, logger := transportDefaults(o.HTTPClient, o.Logger)
	t := &MCPTransport{
		client: mcp.NewClient(
			&mcp.Implementation{Name: "agentmesh", Version: buildinfo.Version()},
			// Advertise no client capabilities: the mesh offers agents no
			// roots, sampling or elicitation.
			&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}},
		),
		httpClient:     hc,
		baseRT:         rt,
		prop:           tracing.Propagator(o.Propagator),
		userAgent:      "agentmesh/" + buildinfo.Version(),
		maxBytes:       o.MaxResponseBytes,
		connectTimeout: o.ConnectTimeout,
		idleTimeout:    o.IdleTimeout,
		logger:         logger,
		conns:          make(map[string]*mcpConn),
		live:           make(map[*mcpConn]struct{}),
		calls:          make(map[*mcpCall]struct{}),
	}
	if o.ProtocolVersion != "" {
		t.sessionOpts = &mcp.ClientSessionOptions{ProtocolVersion: o.ProtocolVersion}
	}
	if t.maxBytes <= 0 {
		t.maxBytes = MaxResultBytes
	}
	if t.connectTimeout <= 0 {
		t.connectTimeout = DefaultMCPConnectTimeout
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = DefaultMCPIdleTimeout
	}
	return t
}

// Close closes every session, aborting calls in flight, and waits for the
// transport's goroutines to finish. Sends after Close fail with a
// *[TransportError] that matches [ErrClosed]. Ending a session on an agent
// that does not answer takes up to 5 s (the SDK's bound on its DELETE);
// sessions are closed in parallel. Close is idempotent and safe for
// concurrent use. It always returns nil: a failure to end a session on an
// agent is logged at Debug level, as the caller could do nothing about it.
func (t *MCPTransport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		conns, calls := t.live, t.calls
		t.live, t.conns, t.calls = nil, nil, nil
		t.mu.Unlock()
		// A call blocked on its HTTP request does not notice its session
		// closing: abort it.
		for call := range calls {
			call.cancel()
		}
		var wg sync.WaitGroup
		for c := range conns {
			c.cancel()
			wg.Go(func() { t.closeSession(c) })
		}
		wg.Wait()
	})
	t.wg.Wait()
	return nil
}

// Send calls the agent's handle_message tool with msg and returns its
// AgentResponse. It implements [Transport].
func (t *MCPTransport) Send(ctx context.Context, agent registry.Agent, msg Message) (Reply, error) {
	if err := checkEndpoint(agent.Endpoint); err != nil {
		return Reply{}, err
	}
	key, err := mcpKeyOf(agent)
	if err != nil {
		return Reply{}, err
	}
	args, err := json.Marshal(mcpArguments(msg))
	if err != nil {
		return Reply{}, &TransportError{
			Code:    apierr.CodeInvalidArgument,
			Message: "message context cannot be encoded as JSON",
			Err:     err,
		}
	}
	for attempt := 0; ; attempt++ {
		c, reused, err := t.acquire(ctx, agent.Name, key)
		if err != nil {
			return Reply{}, err
		}
		reply, stale, err := t.call(ctx, c, args)
		t.release(c)
		// A reused session that turned out gone before the request reached
		// the agent is a stale cache entry, not a failed delivery: open a
		// fresh session and send once more.
		if stale && reused && attempt == 0 {
			continue
		}
		return reply, err
	}
}

// call sends one handle_message call on c's session. stale reports that the
// session was gone before the request reached the agent's handler.
func (t *MCPTransport) call(ctx context.Context, c *mcpConn, args json.RawMessage) (reply Reply, stale bool, err error) {
	exCtx, ex := withExchange(ctx)
	callCtx, done := t.startCall(exCtx)
	res, err := c.session.CallTool(callCtx, &mcp.CallToolParams{
		Name:      mcpToolName,
		Arguments: args,
	})
	done()
	if err != nil {
		terr, notSent := t.classify(ctx.Err(), err, ex)
		if !mcpKeepSession(ctx, terr) {
			t.drop(c, terr)
		}
		return Reply{}, notSent, terr
	}
	if res.IsError {
		return Reply{}, false, &TransportError{
			Code:    CodeAgentError,
			Message: "agent returned an error: " + mcpErrorText(res),
		}
	}
	resp, ok := parseAgentReply(res)
	if !ok {
		return Reply{}, false, &TransportError{
			Code:    CodeBadResponse,
			Message: "agent reply has no usable content: want structuredContent or text with a non-empty content",
		}
	}
	result, err := json.Marshal(resp.Content)
	if err != nil { // unreachable: a string always encodes
		return Reply{}, false, &TransportError{Code: CodeBadResponse, Message: "agent reply cannot be encoded", Err: err}
	}
	return Reply{Result: result, Response: resp}, false, nil
}

// startCall returns a context for a call that Close can abort, and the
// function that ends the call.
func (t *MCPTransport) startCall(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	call := &mcpCall{cancel: cancel}
	t.mu.Lock()
	if t.closed {
		cancel()
	} else {
		t.calls[call] = struct{}{}
	}
	t.mu.Unlock()
	return ctx, func() {
		t.mu.Lock()
		delete(t.calls, call)
		t.mu.Unlock()
		cancel()
	}
}

// mcpKeepSession reports whether a session that failed a call with terr is
// still good: the call ended by the caller's context, an error the agent
// answered in JSON-RPC, or a transient HTTP status (the SDK keeps the
// connection for those). Anything else drops it.
func mcpKeepSession(ctx context.Context, terr *TransportError) bool {
	if ctx.Err() != nil {
		return true
	}
	return terr.Code == CodeAgentError && (terr.Status == 0 || terr.Retryable)
}

// mcpConn is one agent's session, shared by the Sends to that agent. It is
// created with its handshake pending; ready is closed when the handshake
// ends, after which session and err no longer change.
type mcpConn struct {
	name   string
	key    mcpKey
	ready  chan struct{}
	cancel context.CancelFunc // aborts the handshake

	session *mcp.ClientSession // set before ready is closed, on success
	err     *TransportError    // set before ready is closed, on failure

	// Guarded by MCPTransport.mu.
	users    int       // Sends holding the session
	lastUsed time.Time // when the last user was done
	retired  bool      // no longer the agent's current session
	closing  bool      // closeSession has been started
}

// mcpKey is what a session depends on in the agent record: a change makes
// the next Send open a new session.
type mcpKey struct {
	endpoint    string
	headerName  string
	headerValue string
}

// mcpKeyOf returns the session key of agent, with its auth header.
func mcpKeyOf(agent registry.Agent) (mcpKey, error) {
	k := mcpKey{endpoint: agent.Endpoint}
	if agent.Auth == nil {
		return k, nil
	}
	switch agent.Auth.Type {
	case "", registry.AuthNone:
	case registry.AuthBearer:
		k.headerName, k.headerValue = "Authorization", "Bearer "+agent.Auth.Token
	case registry.AuthHeader:
		k.headerName, k.headerValue = agent.Auth.HeaderName, agent.Auth.Token
	default:
		return mcpKey{}, &TransportError{
			Code:    apierr.CodeInvalidArgument,
			Message: fmt.Sprintf("agent auth type %q is not supported", agent.Auth.Type),
		}
	}
	return k, nil
}

// acquire returns the agent's session, opening it if needed, and counts the
// caller as a user until [MCPTransport.release]. reused reports that the
// session was opened before this call.
func (t *MCPTransport) acquire(ctx context.Context, name string, key mcpKey) (c *mcpConn, reused bool, err error) {
	t.mu.Lock()
	if t.closed || t.client == nil {
		t.mu.Unlock()
		return nil, false, mcpClosedError()
	}
	t.sweepLocked(time.Now())
	c = t.conns[name]
	if c != nil && c.key != key {
		t.retireLocked(c)
		c = nil
	}
	if c == nil {
		c = t.connectLocked(ctx, name, key)
	} else {
		reused = mcpDone(c.ready)
	}
	c.users++
	t.mu.Unlock()

	select {
	case <-c.ready:
	case <-ctx.Done():
		t.release(c)
		return nil, false, contextError(ctx.Err(), "opening the MCP session")
	}
	if c.err != nil {
		t.release(c)
		terr := *c.err // each caller gets its own copy
		return nil, false, &terr
	}
	return c, reused, nil
}

// release ends a use of c begun by acquire.
func (t *MCPTransport) release(c *mcpConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.users--
	c.lastUsed = time.Now()
	t.maybeCloseLocked(c)
}

// sweepLocked retires the sessions unused for longer than the idle
// timeout. It runs at most once per half idle timeout.
func (t *MCPTransport) sweepLocked(now time.Time) {
	if now.Sub(t.lastSweep) < t.idleTimeout/2 {
		return
	}
	t.lastSweep = now
	for _, c := range t.conns {
		if c.users == 0 && mcpDone(c.ready) && now.Sub(c.lastUsed) > t.idleTimeout {
			t.logger.Debug("mcp session idle, closing it", "agent", c.name)
			t.retireLocked(c) // deleting from t.conns while ranging over it is fine
		}
	}
}

// drop retires c after a call showed it broken, unless it was already
// replaced.
func (t *MCPTransport) drop(c *mcpConn, cause *TransportError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.retired && !t.closed {
		t.logger.Debug("mcp session dropped", "agent", c.name, "code", cause.Code)
		t.retireLocked(c)
	}
}

// connectLocked registers a new session for name and starts its handshake.
// The handshake runs on its own goroutine under ConnectTimeout, detached
// from ctx's cancellation (keeping its values), so that one caller's
// deadline does not fail the Sends waiting on the same handshake.
func (t *MCPTransport) connectLocked(ctx context.Context, name string, key mcpKey) *mcpConn {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.connectTimeout)
	c := &mcpConn{name: name, key: key, ready: make(chan struct{}), cancel: cancel}
	t.conns[name] = c
	t.live[c] = struct{}{}
	t.wg.Add(1)
	go t.connect(cctx, c)
	return c
}

// connect runs c's handshake and publishes its outcome.
func (t *MCPTransport) connect(ctx context.Context, c *mcpConn) {
	defer t.wg.Done()
	defer c.cancel()
	exCtx, ex := withExchange(ctx)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   c.key.endpoint,
		HTTPClient: t.agentClient(c.key),
		// The delegation client owns retries; the SDK must not reconnect
		// streams behind its back.
		MaxRetries: -1,
		// Request/response only: the mesh takes no server-initiated
		// messages outside a call.
		DisableStandaloneSSE: true,
	}
	session, err := t.client.Connect(exCtx, transport, t.sessionOpts)
	var terr *TransportError
	if err != nil {
		terr, _ = t.classify(ctx.Err(), err, ex)
		if ctx.Err() == context.DeadlineExceeded {
			terr.Message = fmt.Sprintf("agent did not complete the MCP handshake within %v", t.connectTimeout)
		}
		terr.Message = "opening the MCP session: " + terr.Message
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	c.session, c.err = session, terr
	close(c.ready)
	if terr != nil {
		if t.conns[c.name] == c {
			delete(t.conns, c.name)
		}
		c.retired = true
		delete(t.live, c)
		return
	}
	t.logger.Debug("mcp session opened", "agent", c.name,
		"protocolVersion", session.InitializeResult().ProtocolVersion)
	t.maybeCloseLocked(c)
}

// retireLocked makes c no longer the current session of its agent; it is
// closed once its handshake has ended and its last user is done.
func (t *MCPTransport) retireLocked(c *mcpConn) {
	if t.conns[c.name] == c {
		delete(t.conns, c.name)
	}
	c.retired = true
	t.maybeCloseLocked(c)
}

// maybeCloseLocked starts closing c if it is retired, idle and past its
// handshake. After Close has begun, Close closes everything itself.
func (t *MCPTransport) maybeCloseLocked(c *mcpConn) {
	if !c.retired || c.users > 0 || c.closing || t.closed || !mcpDone(c.ready) {
		return
	}
	c.closing = true
	delete(t.live, c)
	if c.session == nil {
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.closeSession(c)
	}()
}

// closeSession waits for c's handshake and closes its session. Closing
// tells a stateful agent to end the session (an HTTP DELETE the SDK bounds
// to 5 s).
func (t *MCPTransport) closeSession(c *mcpConn) {
	<-c.ready
	if c.session == nil {
		return
	}
	// The error is not logged: it may quote the endpoint URL, and failing
	// to end a session on an agent is harmless.
	if err := c.session.Close(); err != nil {
		t.logger.Debug("mcp session close failed", "agent", c.name)
	}
}

// isClosed reports whether Close has been called.
func (t *MCPTransport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// agentClient returns the HTTP client of one session: a copy of the
// configured client whose [recorder] adds the agent's auth header, the
// User-Agent and the trace context of the request's context, caps reply
// bodies and reports what it saw to the call's [exchange], and which never
// follows redirects.
func (t *MCPTransport) agentClient(key mcpKey) *http.Client {
	header := http.Header{}
	header.Set("User-Agent", t.userAgent)
	if key.headerName != "" {
		header.Set(key.headerName, key.headerValue)
	}
	return agentClient(t.httpClient, &recorder{base: t.baseRT, prop: t.prop, header: header, maxBytes: t.maxBytes})
}

// classify turns a failed handshake or call into a *TransportError. ctxErr
// is the error of the context the operation ran under, err what the SDK
// returned, ex what the HTTP layer saw. notSent reports that the session
// was found gone before the request reached the agent's handler: the agent
// lost it, or the SDK had already closed it.
//
// Messages are fixed phrases plus the agent's own words; the SDK's text,
// which may quote the endpoint URL, stays in Err.
func (t *MCPTransport) classify(ctxErr, err error, ex *exchange) (terr *TransportError, notSent bool) {
	seen := ex.snapshot()
	switch {
	case ctxErr != nil && t.isClosed():
		return mcpClosedError(), false
	case ctxErr != nil:
		return contextError(ctxErr, "waiting for the agent"), false
	case t.isClosed():
		return mcpClosedError(), false
	}
	if terr := refusalError(err, seen.rtErr); terr != nil {
		return terr, false
	}
	if seen.tooLarge {
		return &TransportError{
			Code:    CodeResponseTooLarge,
			Message: fmt.Sprintf("agent reply exceeds %d bytes", t.maxBytes),
			Err:     err,
		}, false
	}
	// A 404 to a request in a session means the agent no longer knows the
	// session (MCP Streamable HTTP), so it did not run the request. The SDK
	// reports ErrSessionMissing only when the 404 has no JSON-RPC body;
	// other SDKs send one.
	if errors.Is(err, mcp.ErrSessionMissing) || (seen.status == http.StatusNotFound && seen.inSession) {
		return &TransportError{
			Code:      CodeAgentUnreachable,
			Status:    seen.status,
			Retryable: true,
			Message:   "agent lost the MCP session",
			Err:       err,
		}, true
	}
	wire := mcpAgentWireError(err)
	if s := seen.status; s != 0 && (s < 200 || s > 299) {
		detail := " " + http.StatusText(s)
		if s >= 300 && s < 400 {
			detail += " (redirects are not followed)"
		}
		if wire != nil {
			detail += ": " + truncateText(wire.Message, mcpTextLimit)
		}
		return statusError(s, seen.retryAfter, detail, err), false
	}
	if seen.rtErr != nil {
		if mcpDialFailed(seen.rtErr) {
			return &TransportError{Code: CodeAgentUnreachable, Retryable: true, Message: "agent unreachable: connection failed", Err: err}, false
		}
		// The request may have been sent: not retryable.
		return &TransportError{Code: CodeAgentUnreachable, Message: "agent unreachable: request failed", Err: err}, false
	}
	switch {
	case wire != nil:
		return &TransportError{
			Code:    CodeAgentError,
			Message: fmt.Sprintf("agent returned JSON-RPC error %d: %s", wire.Code, truncateText(wire.Message, mcpTextLimit)),
			Err:     err,
		}, false
	case errors.Is(err, mcp.ErrConnectionClosed):
		// The SDK refused to write the call on a session it had already
		// found broken: the request was not sent.
		return &TransportError{Code: CodeAgentUnreachable, Retryable: true, Message: "MCP session with the agent was closed", Err: err}, true
	case seen.bodyErr != nil:
		return &TransportError{Code: CodeAgentUnreachable, Message: "agent connection broke before the reply was complete", Err: err}, false
	}
	return &TransportError{Code: CodeBadResponse, Message: "agent sent a reply that is not valid MCP", Err: err}, false
}

// contextError is the TransportError of an operation ended by its
// context: timeout at the deadline, canceled otherwise.
func contextError(ctxErr error, doing string) *TransportError {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return &TransportError{Code: CodeTimeout, Message: "deadline exceeded " + doing, Err: ctxErr}
	}
	return &TransportError{Code: CodeCanceled, Message: "canceled " + doing, Err: ctxErr}
}

// mcpClosedError is the TransportError of a Send on a closed MCPTransport.
func mcpClosedError() *TransportError {
	return &TransportError{Code: CodeCanceled, Message: "mcp transport closed", Err: ErrClosed}
}

// mcpDialFailed reports whether err is a failure to connect (DNS lookup,
// refused or unreachable), which proves the request never reached the
// agent.
func mcpDialFailed(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// mcpAgentWireError returns the first JSON-RPC error in err's tree that
// came from the agent, skipping the codes the SDK uses for its own
// connection state (-32003 client closing, -32004 server closing, -32005
// rejected by transport).
func mcpAgentWireError(err error) *jsonrpc.Error {
	var found *jsonrpc.Error
	var walk func(error) bool
	walk = func(err error) bool {
		if err == nil {
			return false
		}
		if w, ok := err.(*jsonrpc.Error); ok && (w.Code > -32003 || w.Code < -32005) {
			found = w
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			return walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	walk(err)
	return found
}

// checkEndpoint refuses an endpoint that is not an absolute http(s) URL
// before anything is dialled.
func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &TransportError{Code: CodeEndpointNotAllowed, Message: "agent endpoint is not an absolute http(s) URL"}
	}
	return nil
}

// mcpDone reports whether ch is closed.
func mcpDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// mcpHandleMessageArgs are the arguments of handle_message. Every
// key is always sent: the seed's agents validate the full ContextPacket, with
// entities and workflow_state defaulting to {} and turn_history to [].
type mcpHandleMessageArgs struct {
	SessionID        string         `json:"session_id"`
	RequestID        string         `json:"request_id"`
	EmployeeID       string         `json:"employee_id"`
	DisplayName      string         `json:"display_name"`
	RawInput         string         `json:"raw_input"`
	IntentSummary    string         `json:"intent_summary"`
	Entities         map[string]any `json:"entities"`
	DetectedLanguage string         `json:"detected_language"`
	TurnHistory      []TurnEntry    `json:"turn_history"`
	WorkflowState    map[string]any `json:"workflow_state"`
	Metadata         map[string]any `json:"metadata"`
}

// mcpArguments builds the handle_message arguments of msg. A plain
// delegation (no Turn) sends empty session fields. metadata is the Turn's
// metadata overlaid with msg.Context, so the mesh's depth and chain cannot
// be overridden by a caller's metadata.
func mcpArguments(msg Message) mcpHandleMessageArgs {
	a := mcpHandleMessageArgs{
		RequestID:     msg.DelegationID,
		RawInput:      msg.Task,
		Entities:      map[string]any{},
		TurnHistory:   []TurnEntry{},
		WorkflowState: map[string]any{},
		Metadata:      map[string]any{},
	}
	if tr := msg.Turn; tr != nil {
		a.SessionID = tr.SessionID
		a.EmployeeID = tr.EmployeeID
		a.DisplayName = tr.DisplayName
		a.IntentSummary = tr.IntentSummary
		a.DetectedLanguage = tr.DetectedLanguage
		if tr.Entities != nil {
			a.Entities = tr.Entities
		}
		if tr.History != nil {
			a.TurnHistory = tr.History
		}
		if tr.WorkflowState != nil {
			a.WorkflowState = tr.WorkflowState
		}
		maps.Copy(a.Metadata, tr.Metadata)
	}
	maps.Copy(a.Metadata, msg.Context)
	return a
}

// parseAgentReply reads the AgentResponse out of a handle_message result,
// in this order: structuredContent, then each text content. The
// first candidate that is an AgentResponse wins:
//
//   - a JSON object is one when its "content" is a string with a non-blank
//     character, its "workflow_complete" (if present and not null) a bool
//     and its "workflow_state" (if present and not null) an object; other
//     keys are ignored. An object that fails these checks is skipped, not
//     taken as text.
//   - a text (or a structuredContent string) that is not a JSON object is
//     the reply itself: {content: <trimmed text>, workflow_complete: false}.
//     Unlike the seed, this includes JSON scalars such as "42". Blank text is
//     skipped.
//
// Other structuredContent values and other content types are skipped. It
// reports false when no candidate qualifies. It never panics on any input.
func parseAgentReply(res *mcp.CallToolResult) (*AgentResponse, bool) {
	if res == nil {
		return nil, false
	}
	if res.StructuredContent != nil {
		if r, ok := mcpResponseFromValue(res.StructuredContent); ok {
			return r, true
		}
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok && tc != nil {
			if r, ok := mcpResponseFromText(tc.Text); ok {
				return r, true
			}
		}
	}
	return nil, false
}

// mcpResponseFromValue reads an AgentResponse from a decoded
// structuredContent value.
func mcpResponseFromValue(v any) (*AgentResponse, bool) {
	switch v := v.(type) {
	case string:
		return mcpResponseFromText(v)
	case json.RawMessage:
		return mcpResponseFromJSON(v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, `"`) { // a string type other than string
		var s string
		if json.Unmarshal(data, &s) == nil {
			return mcpResponseFromText(s)
		}
		return nil, false
	}
	return mcpResponseFromJSON(data)
}

// mcpResponseFromText reads an AgentResponse from a text candidate.
func mcpResponseFromText(text string) (*AgentResponse, bool) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, false
	}
	if text[0] == '{' && json.Valid([]byte(text)) {
		return mcpResponseFromJSON([]byte(text))
	}
	return &AgentResponse{Content: strings.ToValidUTF8(text, "\uFFFD")}, true
}

// mcpResponseFromJSON reads an AgentResponse from a JSON object; anything
// else does not qualify.
func mcpResponseFromJSON(data []byte) (*AgentResponse, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil || obj == nil {
		return nil, false
	}
	var r AgentResponse
	raw, ok := obj["content"]
	if !ok || json.Unmarshal(raw, &r.Content) != nil || strings.TrimSpace(r.Content) == "" {
		return nil, false
	}
	if raw, ok := obj["workflow_complete"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &r.WorkflowComplete) != nil {
			return nil, false
		}
	}
	if raw, ok := obj["workflow_state"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &r.WorkflowState) != nil || r.WorkflowState == nil {
			return nil, false
		}
	}
	return &r, true
}

// mcpErrorText is the agent's text of an isError result, capped to
// mcpTextLimit bytes: its text contents, else its structuredContent.
func mcpErrorText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok && tc != nil && strings.TrimSpace(tc.Text) != "" {
			parts = append(parts, strings.TrimSpace(tc.Text))
		}
	}
	text := strings.Join(parts, "\n")
	if text == "" && res.StructuredContent != nil {
		if data, err := json.Marshal(res.StructuredContent); err == nil {
			text = string(data)
		}
	}
	if text == "" {
		return "(no details)"
	}
	return truncateText(text, mcpTextLimit)
}

// truncateText returns s as valid UTF-8 cut to at most n bytes on a rune
// boundary.
func truncateText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
