package httpserver_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
)

// sseEvent is one event read from a stream.
type sseEvent struct {
	id, typ, data string
}

// sseStream reads a GET /v1/events stream.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	lines  chan string
	cancel context.CancelFunc
}

// openEvents opens the event stream of e with token and the extra
// headers (name, value, …), and checks it answered 200.
func openEvents(t *testing.T, e *env, token string, hdr ...string) *sseStream {
	t.Helper()
	resp, cancel := getEvents(t, e, token, hdr...)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := &sseStream{t: t, resp: resp, lines: make(chan string, 1024), cancel: cancel}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s
}

func getEvents(t *testing.T, e *env, token string, hdr ...string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/v1/events", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	require.NoError(t, err)
	return resp, cancel
}

// line returns the next line of the stream, failing after 5 s.
func (s *sseStream) line() (string, bool) {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		return l, ok
	case <-time.After(5 * time.Second):
		s.t.Fatal("no line on the event stream within 5 s")
		return "", false
	}
}

// next returns the next event, skipping comments and the retry: field.
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	for {
		l, ok := s.line()
		require.True(s.t, ok, "the stream ended")
		switch {
		case l == "":
			if ev.typ != "" {
				return ev
			}
		case strings.HasPrefix(l, "id: "):
			ev.id = strings.TrimPrefix(l, "id: ")
		case strings.HasPrefix(l, "event: "):
			ev.typ = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			ev.data = strings.TrimPrefix(l, "data: ")
		}
	}
}

func newEventsEnv(t *testing.T, opts *httpserver.EventsOptions) (*env, *httpserver.Events) {
	t.Helper()
	events := httpserver.NewEvents(opts)
	t.Cleanup(events.Close)
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) { o.Events = events }})
	return e, events
}

// waitClients waits until events has n open streams.
func waitClients(t *testing.T, events *httpserver.Events, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return events.Clients() == n }, 5*time.Second, 5*time.Millisecond)
}

func TestEventsAuth(t *testing.T) {
	e, events := newEventsEnv(t, nil)
	resp, cancel := getEvents(t, e, "")
	defer cancel()
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, cancel2 := getEvents(t, e, "wrong-token")
	defer cancel2()
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, cancel3 := getEvents(t, e, routeToken) // route only, no read
	defer cancel3()
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, 0, events.Clients())

	s := openEvents(t, e, readToken)
	assert.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
	assertSecurityHeaders(t, s.resp.Header)
	waitClients(t, events, 1)
	require.NoError(t, events.Publish("agent.registered", map[string]string{"name": "finance"}, ""))
	ev := s.next()
	assert.Equal(t, "agent.registered", ev.typ)
	assert.JSONEq(t, `{"name":"finance"}`, ev.data)
	assert.NotEmpty(t, ev.id)
}

func TestEventsHeartbeat(t *testing.T) {
	e, events := newEventsEnv(t, &httpserver.EventsOptions{Heartbeat: 20 * time.Millisecond})
	s := openEvents(t, e, readToken)
	waitClients(t, events, 1)
	beats := 0
	for beats < 3 {
		l, ok := s.line()
		require.True(t, ok)
		if l == ": heartbeat" {
			beats++
		}
	}
}

func TestEventsResume(t *testing.T) {
	e, events := newEventsEnv(t, &httpserver.EventsOptions{History: 4})
	s := openEvents(t, e, readToken)
	waitClients(t, events, 1)
	for _, name := range []string{"a", "b", "c"} {
		require.NoError(t, events.Publish("agent.registered", map[string]string{"name": name}, ""))
	}
	first := s.next()
	assert.JSONEq(t, `{"name":"a"}`, first.data)
	s.cancel()
	waitClients(t, events, 0)

	// Resuming after a gets b and c, in order, and then what follows.
	r := openEvents(t, e, readToken, "Last-Event-ID", first.id)
	assert.JSONEq(t, `{"name":"b"}`, r.next().data)
	c := r.next()
	assert.JSONEq(t, `{"name":"c"}`, c.data)
	require.NoError(t, events.Publish("agent.removed", map[string]string{"name": "a"}, ""))
	d := r.next()
	assert.Equal(t, "agent.removed", d.typ)
	r.cancel()
	waitClients(t, events, 0)

	// Resuming from an id the history no longer holds starts with reset,
	// whose id is the last event's, then the events kept after it: none.
	for i := range 5 {
		require.NoError(t, events.Publish("agent.updated", map[string]int{"n": i}, ""))
	}
	g := openEvents(t, e, readToken, "Last-Event-ID", d.id)
	reset := g.next()
	assert.Equal(t, "reset", reset.typ)
	require.NoError(t, events.Publish("agent.updated", map[string]int{"n": 5}, ""))
	after := g.next()
	assert.Equal(t, "agent.updated", after.typ)
	assert.JSONEq(t, `{"n":5}`, after.data)
	g.cancel()
	waitClients(t, events, 0)

	// An id of another feed (a restarted server) or garbage: reset.
	for _, id := range []string{"zzz-1", "garbage", reset.id + "0"} {
		h := openEvents(t, e, readToken, "Last-Event-ID", id)
		assert.Equal(t, "reset", h.next().typ, id)
		h.cancel()
		waitClients(t, events, 0)
	}
}

func TestEventsSlowClientDropped(t *testing.T) {
	// The client reads nothing: once the socket's buffers and its queue of
	// 2 are full, it is dropped and the stream ends, however many events
	// follow.
	e, events := newEventsEnv(t, &httpserver.EventsOptions{ClientQueue: 2, WriteWait: 200 * time.Millisecond})
	resp, cancel := getEvents(t, e, readToken)
	defer cancel()
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	waitClients(t, events, 1)
	big := strings.Repeat("x", 64<<10)
	require.Eventually(t, func() bool {
		require.NoError(t, events.Publish("agent.updated", map[string]string{"pad": big}, ""))
		return events.Clients() == 0
	}, 10*time.Second, time.Millisecond)

	// A fast client is not dropped by the same burst.
	s := openEvents(t, e, readToken)
	waitClients(t, events, 1)
	require.NoError(t, events.Publish("agent.registered", map[string]string{"name": "x"}, ""))
	assert.Equal(t, "agent.registered", s.next().typ)
	assert.Equal(t, 1, events.Clients())
}

func TestEventsPrincipal(t *testing.T) {
	e, events := newEventsEnv(t, nil)
	reader := openEvents(t, e, readToken) // principal "team"
	admin := openEvents(t, e, adminToken)
	waitClients(t, events, 2)
	require.NoError(t, events.Publish("delegation.finished", map[string]string{"id": "other's"}, "someone-else"))
	require.NoError(t, events.Publish("delegation.finished", map[string]string{"id": "team's"}, testPrincipal))
	assert.JSONEq(t, `{"id":"team's"}`, reader.next().data)
	assert.JSONEq(t, `{"id":"other's"}`, admin.next().data)
	assert.JSONEq(t, `{"id":"team's"}`, admin.next().data)
}

func TestEventsLimitsAndClose(t *testing.T) {
	e, events := newEventsEnv(t, &httpserver.EventsOptions{MaxClients: 1})
	s := openEvents(t, e, readToken)
	waitClients(t, events, 1)
	resp, cancel := getEvents(t, e, readToken)
	defer cancel()
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))

	// Close ends the open stream and refuses new ones.
	events.Close()
	for {
		if _, ok := s.line(); !ok {
			break
		}
	}
	resp, cancel2 := getEvents(t, e, readToken)
	defer cancel2()
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NoError(t, events.Publish("agent.registered", map[string]string{"name": "x"}, ""))
}
