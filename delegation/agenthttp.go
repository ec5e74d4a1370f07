package delegation

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentmesh/agentmesh/internal/retryafter"
	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/netguard"
)

// This file is the HTTP layer under the http, mcp and a2a transports: the
// client every request to an agent goes through, the round tripper that
// records what the HTTP layer saw of a call, and the mapping of an HTTP
// status, and of a refusal by the endpoint policy, to a *TransportError.

// agentClient returns a copy of hc that sends through rt and never
// follows redirects.
func agentClient(hc *http.Client, rt http.RoundTripper) *http.Client {
	cp := *hc
	cp.Transport = rt
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// recorder is the round tripper of the transports. It sets header on every
// request, adds the trace context of the request's context, reports what
// it saw to the [exchange] of that context (the MCP and A2A SDKs report
// HTTP statuses and body failures only as text, if at all), and caps reply
// bodies.
type recorder struct {
	base   http.RoundTripper
	prop   propagation.TextMapPropagator
	header http.Header // set on every request (User-Agent, auth); nil for none
	// maxBytes caps a reply body: reading past it fails with errTooLarge.
	// ≤ 0 means no cap (the transport reads with its own).
	maxBytes int64
	// keepHead makes the recorder keep the first KiB of a reply other
	// than 200 on the exchange, and drop the rest (an SDK that does not
	// report it).
	keepHead bool
}

func (rt *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	ex.begin(req.Header.Get("Mcp-Session-Id") != "")
	ctx := req.Context()
	if ex != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { ex.update(func(s *seen) { s.connected = true }) },
		})
	}
	out := req.WithContext(ctx)
	out.Header = req.Header.Clone() // a RoundTripper must not modify its request
	if out.Header == nil {
		out.Header = make(http.Header)
	}
	maps.Copy(out.Header, rt.header)
	// Every request of a call (the POST, and any GET resuming its stream)
	// is made with the call's context, so it carries the attempt's span.
	tracing.Inject(req.Context(), rt.prop, out.Header)
	resp, err := rt.base.RoundTrip(out)
	if err != nil {
		ex.update(func(s *seen) { s.rtErr = err })
		return nil, err
	}
	var head []byte
	switch {
	case rt.keepHead && resp.StatusCode != http.StatusOK:
		head = readHead(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(head))
	case rt.maxBytes > 0:
		resp.Body = &limitedBody{
			body: resp.Body, left: rt.maxBytes,
			onTooLarge: func() { ex.update(func(s *seen) { s.tooLarge = true }) },
			onError:    func(err error) { ex.update(func(s *seen) { s.bodyErr = err }) },
		}
	}
	ex.update(func(s *seen) {
		s.status, s.retryAfter, s.head = resp.StatusCode, resp.Header.Get("Retry-After"), head
	})
	return resp, nil
}

// limitedBody is a response body that fails with errTooLarge once more
// than left bytes have been read, like http.MaxBytesReader, and tells the
// recorder how reading ended: onTooLarge when the limit was passed,
// onError for any other read error (both may be nil).
type limitedBody struct {
	body       io.ReadCloser
	left       int64
	onTooLarge func()
	onError    func(error)
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	if int64(n) > b.left {
		n, b.left = int(b.left), -1
		if b.onTooLarge != nil {
			b.onTooLarge()
		}
		return n, errTooLarge
	}
	b.left -= int64(n)
	if err != nil && err != io.EOF && b.onError != nil {
		b.onError(err)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }

// readHead reads the first maxErrorBody bytes of a reply the transport
// refuses, and drains a little more so the connection may be reused.
func readHead(body io.Reader) []byte {
	head, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	return head
}

// exchangeKey is the context key of a call's *exchange.
type exchangeKey struct{}

// withExchange returns a context whose requests the [recorder] reports to
// the returned exchange.
func withExchange(ctx context.Context) (context.Context, *exchange) {
	ex := new(exchange)
	return context.WithValue(ctx, exchangeKey{}, ex), ex
}

// exchange is what the recorder saw of the requests of one call or
// handshake: the last request, and whether any reply body broke or went
// past the cap. It is safe for concurrent use (the HTTP transport reports
// from its own goroutines); a nil *exchange ignores everything.
type exchange struct {
	mu   sync.Mutex
	seen seen
}

// seen is what an exchange recorded.
type seen struct {
	sent       bool   // a request was handed to the HTTP transport
	connected  bool   // the last request got a connection to the agent
	inSession  bool   // it carried an Mcp-Session-Id
	rtErr      error  // it failed without a response
	status     int    // its response status, 0 if none
	retryAfter string // the response's Retry-After
	head       []byte // the first KiB of a reply other than 200 (keepHead)
	bodyErr    error  // a reply body broke while being read
	tooLarge   bool   // a reply body went past the cap
}

// begin starts recording a new request: what was seen of the previous
// one is forgotten, except that a reply body broke or was too large.
func (ex *exchange) begin(inSession bool) {
	ex.update(func(s *seen) {
		*s = seen{sent: true, inSession: inSession, bodyErr: s.bodyErr, tooLarge: s.tooLarge}
	})
}

// update changes what ex saw, under its lock.
func (ex *exchange) update(f func(*seen)) {
	if ex == nil {
		return
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	f(&ex.seen)
}

// snapshot returns a copy of what ex saw.
func (ex *exchange) snapshot() seen {
	if ex == nil {
		return seen{}
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.seen
}

// statusError is the failure of a reply whose HTTP status the transport
// does not accept: code agent_error, and retryable, after the agent's
// Retry-After, for 429, 502, 503 and 504 (the agent is overloaded or
// behind a proxy that could not reach it, or asks for a retry). Its
// Message is "agent returned <status>" followed by detail; it names the
// status, so Error does not repeat it.
func statusError(status int, retryAfterHeader, detail string, err error) *TransportError {
	te := &TransportError{
		Code:        CodeAgentError,
		Status:      status,
		Message:     "agent returned " + strconv.Itoa(status) + detail,
		Err:         err,
		statusShown: true,
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		te.Retryable = true
		te.RetryAfter = retryafter.Parse(retryAfterHeader, time.Now(), maxRetryAfter)
	}
	return te
}

// headDetail is the detail of a statusError quoting the head of the
// agent's reply: ": " and its text, trimmed, as valid UTF-8.
func headDetail(head []byte) string {
	return ": " + strings.TrimSpace(strings.ToValidUTF8(string(head), "\uFFFD"))
}

// refusalError is the failure of a request the endpoint policy refused,
// as err or rtErr (what the round tripper saw) shows it, or nil when
// neither is a refusal. The message names the host and the rule, never
// the URL.
func refusalError(err, rtErr error) *TransportError {
	var refused *netguard.RefusedError
	switch {
	case errors.As(err, &refused), errors.As(rtErr, &refused):
		return &TransportError{Code: CodeEndpointNotAllowed,
			Message: "agent endpoint refused by the endpoint policy: " + refused.Reason(), Err: err}
	case errors.Is(err, netguard.ErrNotAllowed), errors.Is(rtErr, netguard.ErrNotAllowed):
		return &TransportError{Code: CodeEndpointNotAllowed, Message: "agent endpoint refused by the endpoint policy", Err: err}
	}
	return nil
}
