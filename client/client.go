package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
)

// DefaultMaxRetries is the number of retries when Options.MaxRetries is 0.
const DefaultMaxRetries = 2

// MaxRetryWait is the longest a retry waits for a server's Retry-After: a
// reply asking for a longer wait is returned to the caller as it is, with
// [Error.RetryAfter] set.
const MaxRetryWait = 30 * time.Second

// maxReplyBytes caps a successful reply body (a page of delegation records
// can carry several results of up to 4 MiB each).
const maxReplyBytes = 64 << 20

// maxErrorBytes caps an error reply body.
const maxErrorBytes = 64 << 10

// Options configures a [Client]. A nil *Options, like the zero value of
// every field, means the documented default; [New] copies the options.
type Options struct {
	// Token is the bearer token (MESH_TOKEN) sent with every request.
	// Empty sends none. It never appears in an error the client returns.
	Token string

	// HTTPClient sends the requests. Nil means a client of its own with
	// no overall timeout: the contexts of the calls bound them. For a
	// server on a Unix socket, pass a client whose Transport dials the
	// socket (any host in the base URL then does). A client with a
	// Timeout shortens the long-polls of [Client.WaitDelegation] to fit
	// in it.
	HTTPClient *http.Client

	// UserAgent is the User-Agent header. Empty means
	// "agentmesh-client/<version>".
	UserAgent string

	// MaxRetries is how many times a request that is safe to repeat
	// (reads, upserts, deletes, heartbeats) is retried after a
	// connection error before any response, an HTTP 502, 503 or 504, or
	// an HTTP 429 (waiting for its Retry-After when it fits in the call's
	// context and in MaxRetryWait). Zero means DefaultMaxRetries (2);
	// negative means no retries. [Client.Delegate] and [Client.Route] are
	// retried only when the connection was refused before the request
	// was sent.
	MaxRetries int
}

// Client talks to a running agentmesh server's HTTP API: the agent
// registry, discovery, delegation, routing and sessions. Each method is
// one API call (or, for the iterators and [Client.WaitDelegation], a
// sequence of them) bounded by its context.
//
// A Client is safe for concurrent use. Use [New]: the zero Client, like a
// nil *Client, is not usable, and every method returns [ErrNoServer].
type Client struct {
	base       string // scheme://host[/prefix], without a trailing slash
	token      string
	hc         *http.Client
	userAgent  string
	maxRetries int
}

// New returns a client of the server at baseURL, an http or https URL
// with an optional path prefix (http://localhost:8766,
// https://mesh.example.com/agentmesh). A URL of any other form — another
// scheme, no host, userinfo, a query or a fragment — is an error.
func New(baseURL string, opts *Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("client: base URL %q: %w", baseURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("client: base URL %q: scheme must be http or https", baseURL)
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("client: base URL %q: no host", baseURL)
	case u.User != nil:
		return nil, errors.New("client: base URL: userinfo is not allowed (pass the token in Options.Token)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("client: base URL %q: must have no query or fragment", baseURL)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	c := &Client{
		base:       u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"),
		token:      o.Token,
		hc:         o.HTTPClient,
		userAgent:  o.UserAgent,
		maxRetries: o.MaxRetries,
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.userAgent == "" {
		c.userAgent = "agentmesh-client/" + buildinfo.Version()
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	return c, nil
}

// String describes the client by its server, never by its token.
func (c *Client) String() string {
	if !c.usable() {
		return "agentmesh client (no server)"
	}
	return "agentmesh client of " + c.base
}

// GoString is String, so that %#v does not print the token either.
func (c *Client) GoString() string { return c.String() }

// backoff is the wait before retry n (from 1) when the server gave no
// Retry-After: exponential from 100 ms, capped at 2 s, drawn at random
// from its upper half.
func backoff(n int) time.Duration {
	d := min(100*time.Millisecond<<min(n-1, 5), 2*time.Second)
	return d/2 + rand.N(d/2+1)
}

// retryMode says which failures a call may be retried after.
type retryMode int

const (
	// retrySafe: a request safe to repeat, retried after any failure
	// before a response and after 429, 502, 503 and 504.
	retrySafe retryMode = iota
	// retryDial: a request that must not run twice, retried only when the
	// connection could not be made, so the server never saw it.
	retryDial
)

// call is one API request.
type call struct {
	method string
	path   string // escaped, from the API root: "/v1/agents/x"
	query  url.Values
	body   any    // JSON-encoded and sent; nil sends raw
	raw    []byte // the body when body is nil; nil sends none
	retry  retryMode
	route  route // for the sentinels of an *Error
}

// reply is the status and headers of a response.
type reply struct {
	status int
	header http.Header
}

// usable reports whether c was made by New.
func (c *Client) usable() bool { return c != nil && c.hc != nil }

// do sends cl, retrying as its mode allows, and decodes a 2xx body into
// out (nil discards it). A non-2xx reply is an *Error; a failure before
// any response wraps ErrUnreachable.
func (c *Client) do(ctx context.Context, cl call, out any) (reply, error) {
	if !c.usable() {
		return reply{}, ErrNoServer
	}
	body := cl.raw
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return reply{}, fmt.Errorf("client: %s %s: encoding the request: %w", cl.method, cl.path, err)
		}
		body = b
	}
	target := c.base + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return reply{}, c.ctxError(cl, err)
		}
		r, err := c.once(ctx, cl, target, body, out)
		wait, again := retryable(cl.retry, err)
		if !again || attempt >= c.maxRetries {
			return r, err
		}
		if wait <= 0 {
			wait = backoff(attempt + 1)
		}
		if wait > MaxRetryWait {
			return r, err // the caller decides (Error.RetryAfter)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return r, err // the retry could not finish in time
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return reply{}, c.ctxError(cl, ctx.Err())
		case <-t.C:
		}
	}
}

// retryable reports whether a call of mode may be retried after err, and
// after how long when the server said (else 0).
func retryable(mode retryMode, err error) (wait time.Duration, again bool) {
	var (
		e  *Error
		ue *unreachableError
	)
	switch {
	case errors.As(err, &e):
		return e.RetryAfter, mode == retrySafe && e.retryable()
	case errors.As(err, &ue):
		return 0, mode == retrySafe || dialFailed(ue.err)
	}
	return 0, false
}

// once sends one attempt of cl.
func (c *Client) once(ctx context.Context, cl call, target string, body []byte, out any) (reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, rd)
	if err != nil {
		return reply{}, fmt.Errorf("client: %s %s: %w", cl.method, cl.path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, c.ctxError(cl, ctx.Err())
		}
		return reply{}, c.unreachable(cl, err)
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		e := decodeError(resp.StatusCode, resp.Header, data, time.Now())
		e.route = cl.route
		e.redact(c.token)
		return r, e
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return r, c.ctxError(cl, ctx.Err())
		}
		return r, fmt.Errorf("client: %s %s: reading the reply: %w", cl.method, cl.path, err)
	case len(data) > maxReplyBytes:
		return r, fmt.Errorf("client: %s %s: the reply is over %d bytes", cl.method, cl.path, maxReplyBytes)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return r, fmt.Errorf("client: %s %s: decoding the reply: %w", cl.method, cl.path, err)
		}
	}
	return r, nil
}

// unreachable wraps a failure before any response in ErrUnreachable,
// keeping the cause (a *net.OpError, io.EOF…) for errors.Is and As. The
// request URL, which url.Error would repeat, is left out: the method and
// path say which call failed.
func (c *Client) unreachable(cl call, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &unreachableError{op: cl.method + " " + cl.path, err: err, token: c.token}
}

// unreachableError is a call that got no response.
type unreachableError struct {
	op    string
	err   error
	token string
}

func (e *unreachableError) Error() string {
	msg := "client: " + e.op + ": server unreachable: " + e.err.Error()
	if e.token != "" {
		msg = strings.ReplaceAll(msg, e.token, "[redacted]")
	}
	return msg
}

// Unwrap returns ErrUnreachable and the cause.
func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// ctxError is the error of a call whose context is done.
func (c *Client) ctxError(cl call, err error) error {
	return fmt.Errorf("client: %s %s: %w", cl.method, cl.path, err)
}

// dialFailed reports whether err is a failure to connect: the request was
// never sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// nextLinkQuery returns the query of the Link rel="next" target in h, or
// nil when there is none.
func nextLinkQuery(h http.Header) url.Values {
	for _, v := range h.Values("Link") {
		for _, link := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(link), ";")
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			next := false
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") && strings.EqualFold(strings.Trim(val, `"`), "next") {
					next = true
				}
			}
			if !next {
				continue
			}
			u, err := url.Parse(target[1 : len(target)-1])
			if err != nil {
				continue
			}
			return u.Query()
		}
	}
	return nil
}
