package delegation_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
)

// script answers the i-th request with steps[i] (the last step repeats)
// and records the delegation ids it saw.
type script struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter)
	ids   []string
}

func (s *script) handler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	i := len(s.ids)
	s.ids = append(s.ids, r.Header.Get("X-Mesh-Delegation-Id"))
	step := s.steps[min(i, len(s.steps)-1)]
	s.mu.Unlock()
	step(w)
}

func (s *script) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

func result(v string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"result":`+v+`}`) }
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): 502, 503 and 504
// are retried, at most twice, with the same delegation id, after an
// exponential backoff with jitter from 200 ms.
func TestRetryGatewayErrorsThenSuccess(t *testing.T) {
	for _, code := range []int{502, 503, 504} {
		e := newEnv(t, nil)
		s := &script{steps: []func(http.ResponseWriter){status(code), status(code), result(`"third time lucky"`)}}
		e.agentServer("flaky", s.handler)
		rec := e.delegate(delegation.Request{Target: "flaky", Task: "t"})
		assert.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
		assert.JSONEq(t, `"third time lucky"`, string(rec.Result))
		assert.Equal(t, 3, rec.Attempts)
		assert.Equal(t, []string{rec.ID, rec.ID, rec.ID}, s.seen(), "same delegation id on every attempt")
		sl := e.sleeps.all()
		require.Len(t, sl, 2)
		assert.True(t, sl[0] >= 200*time.Millisecond && sl[0] <= 300*time.Millisecond, "first backoff %v", sl[0])
		assert.True(t, sl[1] >= 400*time.Millisecond && sl[1] <= 600*time.Millisecond, "second backoff %v", sl[1])
	}
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): 503 three times
// → failed after attempts=3 (2 retries at most).
func TestRetry503ExhaustsRetries(t *testing.T) {
	e := newEnv(t, nil)
	s := &script{steps: []func(http.ResponseWriter){status(503)}}
	e.agentServer("down", s.handler)
	rec := e.delegate(delegation.Request{Target: "down", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentError, rec.Code)
	assert.Equal(t, "agent returned 503: Service Unavailable", rec.Error)
	assert.Equal(t, 3, rec.Attempts)
	assert.Len(t, s.seen(), 3)
	assert.Len(t, e.sleeps.all(), 2)
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): other statuses
// are never retried (500 in particular).
func TestRetryNot500(t *testing.T) {
	e := newEnv(t, nil)
	s := &script{steps: []func(http.ResponseWriter){status(500), result(`1`)}}
	e.agentServer("broken", s.handler)
	rec := e.delegate(delegation.Request{Target: "broken", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, 1, rec.Attempts)
	assert.Len(t, s.seen(), 1)
	assert.Empty(t, e.sleeps.all())
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): 429 is retried
// after the agent's Retry-After.
func TestRetry429HonoursRetryAfter(t *testing.T) {
	e := newEnv(t, nil)
	s := &script{steps: []func(http.ResponseWriter){status(429, "Retry-After", "3"), result(`"ok"`)}}
	e.agentServer("busy", s.handler)
	rec := e.delegate(delegation.Request{Target: "busy", Task: "t"})
	assert.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
	assert.Equal(t, 2, rec.Attempts)
	assert.Equal(t, []time.Duration{3 * time.Second}, e.sleeps.all())

	// Without Retry-After: the ordinary backoff.
	s2 := &script{steps: []func(http.ResponseWriter){status(429), result(`"ok"`)}}
	e.agentServer("busy2", s2.handler)
	rec = e.delegate(delegation.Request{Target: "busy2", Task: "t"})
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.Len(t, e.sleeps.all(), 2)
}

// Retries (docs/AGENTS.md#when-your-agent-is-slow-or-fails): Retry-After is
// honoured only up to the remaining deadline: a retry that could not finish
// in time is not attempted.
func TestRetry429BeyondDeadline(t *testing.T) {
	e := newEnv(t, nil)
	s := &script{steps: []func(http.ResponseWriter){status(429, "Retry-After", "120"), result(`"ok"`)}}
	e.agentServer("busy", s.handler)
	rec := e.delegate(delegation.Request{Target: "busy", Task: "t", Timeout: 10 * time.Second})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, "agent returned 429: Too Many Requests", rec.Error)
	assert.Equal(t, 1, rec.Attempts)
	assert.Empty(t, e.sleeps.all())
}

// A real (not recorded) backoff wait is bounded by the deadline too.
func TestRetryRealSleepRespectsDeadline(t *testing.T) {
	e := newEnvWith(t, config{realSleep: true})
	s := &script{steps: []func(http.ResponseWriter){status(503)}}
	e.agentServer("down", s.handler)
	start := time.Now()
	rec := e.delegate(delegation.Request{Target: "down", Task: "t", Timeout: 250 * time.Millisecond})
	assert.Less(t, time.Since(start), 2*time.Second)
	// 200–300 ms backoff may or may not fit in 250 ms: either the retry was
	// skipped (failed, 1 attempt) or the deadline hit during it.
	assert.Contains(t, []delegation.Status{delegation.StatusFailed, delegation.StatusTimeout}, rec.Status)
	assert.LessOrEqual(t, rec.Attempts, 2)
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":          0,
		"7":         7 * time.Second,
		" 2 ":       2 * time.Second,
		"-1":        0,
		"soon":      0,
		"999999999": time.Hour,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		assert.Equal(t, want, delegation.RetryAfter(v, now), "Retry-After %q", v)
	}
	for range 100 {
		d := delegation.Jitter(200 * time.Millisecond)
		assert.True(t, d >= 200*time.Millisecond && d <= 300*time.Millisecond, "%v", d)
	}
}

// Circuit breakers (docs/API.md#circuit-breakers): the breaker wraps all
// attempts of a delegation as one outcome; after 5 failed delegations it
// opens, and the next delegation fails at once with agent_unavailable and the
// half-open time, without calling the agent.
func TestBreakerOpensAndRefuses(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := breaker.NewSet(nil, &breaker.Options{Now: clock})
	e := newEnv(t, &delegation.Options{Breakers: set})

	var calls counter
	s := &script{steps: []func(http.ResponseWriter){status(503)}}
	e.agentServer("sick", calls.wrap(s.handler))
	for i := range 4 {
		rec := e.delegate(delegation.Request{Target: "sick", Task: "t"})
		require.Equal(t, delegation.StatusFailed, rec.Status)
		require.Equal(t, 3, rec.Attempts, "delegation %d", i)
	}
	assert.Equal(t, 12, calls.get())
	assert.Equal(t, breaker.StateClosed, set.Get("sick").State(), "4 delegations of 3 attempts each are 4 failures, not 12")
	e.delegate(delegation.Request{Target: "sick", Task: "t"})
	assert.Equal(t, breaker.StateOpen, set.Get("sick").State())
	assert.Equal(t, 15, calls.get())

	rec := e.delegate(delegation.Request{Target: "sick", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentUnavailable, rec.Code)
	assert.Equal(t, "agent sick is unavailable: circuit breaker open until 2026-03-01T12:00:30Z", rec.Error)
	assert.Zero(t, rec.Attempts)
	assert.Equal(t, 15, calls.get(), "the agent was called while the breaker was open")
	assert.Equal(t, delegation.StatusFailed, e.stored(rec.ID).Status, "the refusal is recorded")

	// Half-open after 30 s: a probe goes through again.
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	e.delegate(delegation.Request{Target: "sick", Task: "t"})
	assert.Equal(t, 18, calls.get())
}

// A delegation the caller cancels tells nothing about the agent: it does
// not count against its breaker. A timeout does.
func TestBreakerIgnoresCallerCancel(t *testing.T) {
	set := breaker.NewSet(nil, &breaker.Options{FailureThreshold: 1})
	e := newEnv(t, &delegation.Options{Breakers: set})
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	rec, err := e.c.Delegate(ctx, delegation.Request{Target: "slow", Task: "t"})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, rec.Status)
	assert.Equal(t, breaker.StateClosed, set.Get("slow").State())

	rec = e.delegate(delegation.Request{Target: "slow", Task: "t", Timeout: 30 * time.Millisecond})
	assert.Equal(t, delegation.StatusTimeout, rec.Status)
	assert.Equal(t, breaker.StateOpen, set.Get("slow").State())
	rec = e.delegate(delegation.Request{Target: "slow", Task: "t"})
	assert.Equal(t, delegation.CodeAgentUnavailable, rec.Code)
	assert.Regexp(t, regexp.MustCompile(`open until \d{4}-\d\d-\d\dT`), rec.Error)
}
