package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
)

// newHTTPClient returns the client of one worker: its own transport, so
// workers never contend on a connection pool, keeping its connections
// alive between requests. Compression is off (the server does not compress
// and a client asking for it would only add work).
func newHTTPClient(concurrency int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil, // never through $HTTP_PROXY: this measures the server
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        concurrency,
			MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// httpTarget is what the HTTP modes send requests to.
type httpTarget struct {
	base        string // scheme://host[:port], no trailing slash
	token       string
	concurrency int
	timeout     time.Duration
}

// do sends req and reads the whole response, so the connection is reused.
// Statuses in okStatus count as successes.
func do(client *http.Client, req *http.Request, okStatus func(int) bool) outcome {
	resp, err := client.Do(req)
	if err != nil {
		return outcome{key: "error: " + errorClass(err)}
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return outcome{key: "error: " + errorClass(err), bytes: int(n)}
	}
	return outcome{key: strconv.Itoa(resp.StatusCode), bytes: int(n), ok: okStatus(resp.StatusCode)}
}

func is2xx(code int) bool { return code >= 200 && code < 300 }

// errorClass names a transport error for the outcome counts.
func errorClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	return "other"
}

func (t *httpTarget) authorize(h http.Header) {
	if t.token != "" {
		h.Set("Authorization", "Bearer "+t.token)
	}
}

// getOp requests the URLs round-robin by request number. Each worker
// builds its requests once and reuses them: a request may be sent again
// once its response body is closed.
func (t *httpTarget) getOp(urls []string) func(worker int) opFunc {
	return func(int) opFunc {
		client := newHTTPClient(t.concurrency, t.timeout)
		reqs := make([]*http.Request, len(urls))
		return func(ctx context.Context, i int) outcome {
			k := i % len(urls)
			if reqs[k] == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, urls[k], nil)
				if err != nil {
					return outcome{key: "error: bad url"}
				}
				t.authorize(req.Header)
				reqs[k] = req
			}
			return do(client, reqs[k], is2xx)
		}
	}
}

// registerOp posts agent i of gen (named with prefix) to /v1/agents for
// request i; 200 (replaced) and 201 (created) are successes.
func (t *httpTarget) registerOp(gen *synthagents.Generator, prefix string) func(worker int) opFunc {
	return func(int) opFunc {
		client := newHTTPClient(t.concurrency, t.timeout)
		u := t.base + "/v1/agents"
		return func(ctx context.Context, i int) outcome {
			body, err := json.Marshal(gen.Agent(prefix, i, 0))
			if err != nil {
				return outcome{key: "error: encode"}
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
			if err != nil {
				return outcome{key: "error: bad url"}
			}
			req.Header.Set("Content-Type", "application/json")
			t.authorize(req.Header)
			return do(client, req, is2xx)
		}
	}
}

// discoverURLs are the GET /v1/discover URLs of queries.
func (t *httpTarget) discoverURLs(queries []string, limit int) []string {
	urls := make([]string, len(queries))
	for i, q := range queries {
		v := url.Values{"query": {q}}
		if limit > 0 {
			v.Set("limit", strconv.Itoa(limit))
		}
		urls[i] = t.base + "/v1/discover?" + v.Encode()
	}
	return urls
}
