package routing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
	"github.com/agentmesh/agentmesh/session"
)

// fakeResolver answers from a table keyed on the Slack user id, else the
// user id, and records every question with whether the asker's user
// already had a session at that moment.
type fakeResolver struct {
	byKey map[string]Identity
	err   error          // returned instead, when set
	block bool           // wait for ctx to be done
	onAsk func(Identity) // called with every question, if set

	mu    sync.Mutex
	asked []Identity
}

func (f *fakeResolver) ResolveIdentity(ctx context.Context, id Identity) (Identity, error) {
	f.mu.Lock()
	f.asked = append(f.asked, id)
	f.mu.Unlock()
	if f.onAsk != nil {
		f.onAsk(id)
	}
	if f.block {
		<-ctx.Done()
		return Identity{}, ctx.Err()
	}
	if f.err != nil {
		return Identity{}, f.err
	}
	key := id.SlackUserID
	if key == "" {
		key = id.UserID
	}
	if got, ok := f.byKey[key]; ok {
		return got, nil
	}
	return Identity{}, ErrIdentityNotFound
}

func (f *fakeResolver) calls() []Identity {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Identity(nil), f.asked...)
}

var ada = Identity{UserID: "ada", EmployeeID: "E1001", DisplayName: "Ada Lovelace"}

// The resolver is asked once per request, before the session step: the
// session is keyed on the resolved user, and the agent gets the resolved
// employee id and display name.
func TestRouterResolvesIdentityBeforeTheSession(t *testing.T) {
	res := &fakeResolver{byKey: map[string]Identity{"U024BE7LH": ada}}
	e := newRouterEnv(t, envConfig{router: &RouterOptions{Identity: res}})
	var sessionAtAsk []bool
	res.onAsk = func(Identity) {
		_, err := e.sessions.Active(e.ctx, "ada")
		sessionAtAsk = append(sessionAtAsk, err == nil)
	}

	first := e.handle(Request{Input: "What is the budget?", SlackUserID: "U024BE7LH"})
	assert.Equal(t, "finance", first.AgentID)
	assert.Equal(t, []Identity{{SlackUserID: "U024BE7LH"}}, res.calls(), "asked once, with the request's identity")
	assert.Equal(t, map[string]any{"id": "ada", "employeeId": "E1001", "displayName": "Ada Lovelace"}, (*e.finance.last.Load())["user"])
	s := e.active("ada")
	assert.Equal(t, first.SessionID, s.ID, "the session is keyed on the resolved user id")
	assert.Equal(t, "E1001", s.EmployeeID)
	_, err := e.sessions.Active(e.ctx, "U024BE7LH")
	require.ErrorIs(t, err, session.ErrNotFound, "no session under the unresolved id")

	// The second message finds the session through the resolved id.
	second := e.handle(Request{Input: "and next year?", SlackUserID: "U024BE7LH"})
	assert.Equal(t, ReasonSession, second.Reason)
	assert.Equal(t, first.SessionID, second.SessionID)
	assert.Len(t, res.calls(), 2, "once per request")
	assert.Equal(t, []bool{false, true}, sessionAtAsk, "the resolver runs before the session step of each request")
}

// What the resolver sets replaces the request's fields; what it leaves
// empty keeps them. MCP agents get the employee id and display name too.
func TestRouterResolvedIdentityOverridesTheRequest(t *testing.T) {
	res := &fakeResolver{byKey: map[string]Identity{"kim": {EmployeeID: "E7", DisplayName: "Kim Park"}}}
	e := newRouterEnv(t, envConfig{router: &RouterOptions{Identity: res}})
	e.handle(Request{Input: "payroll", UserID: "kim", EmployeeID: "stale", DisplayName: "K"})
	calls := e.hr.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "E7", calls[0]["employee_id"])
	assert.Equal(t, "Kim Park", calls[0]["display_name"])
	assert.Equal(t, "E7", e.active("kim").EmployeeID, "keyed on the request's user id, which the resolver left alone")
}

func TestRouterIdentityCacheHit(t *testing.T) {
	res := &fakeResolver{byKey: map[string]Identity{"U024BE7LH": ada}}
	clock := clocktest.New(time.Now())
	cache, err := NewIdentityCache(res, &IdentityCacheOptions{TTL: time.Minute, Now: clock.Now})
	require.NoError(t, err)
	e := newRouterEnv(t, envConfig{router: &RouterOptions{Identity: cache}})

	for range 3 {
		e.handle(Request{Input: "budget", SlackUserID: "U024BE7LH"})
	}
	assert.Len(t, res.calls(), 1, "answered from the cache within the TTL")
	assert.Equal(t, "E1001", (*e.finance.last.Load())["user"].(map[string]any)["employeeId"], "a cached answer is used as a fresh one")

	clock.Advance(time.Minute)
	e.handle(Request{Input: "budget", SlackUserID: "U024BE7LH"})
	assert.Len(t, res.calls(), 2, "asked again once the TTL is over")
}

// A failing resolver never fails the request: it goes on with the
// identity it came with, and the failure is logged and counted. An
// unknown user is not a failure.
func TestRouterIdentityFailureKeepsTheRequest(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	down := errors.New("directory down")
	res := &fakeResolver{err: down}
	var failures []error
	e := newRouterEnv(t, envConfig{logger: logger, router: &RouterOptions{
		Identity:          res,
		OnIdentityFailure: func(_ context.Context, err error) { failures = append(failures, err) },
	}})

	resp := e.handle(Request{Input: "budget", UserID: "bob", DisplayName: "Bob"})
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, map[string]any{"id": "bob", "employeeId": "bob", "displayName": "Bob"}, (*e.finance.last.Load())["user"])
	assert.Equal(t, resp.SessionID, e.active("bob").ID)
	require.Len(t, failures, 1)
	require.ErrorIs(t, failures[0], down)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	assert.Contains(t, out, `"level":"WARN"`)
	assert.Contains(t, out, "identity resolution failed")
	assert.Contains(t, out, "directory down")
	assert.NotContains(t, out, "bob", "the log does not name the user")

	res.err = nil // now it answers: it does not know bob
	e.handle(Request{Input: "budget", UserID: "bob"})
	assert.Len(t, failures, 1, "an unknown user is not a failure")
}

// A resolver slower than IdentityTimeout is given up on: the request is
// answered in time with the identity it came with.
func TestRouterIdentityTimeout(t *testing.T) {
	res := &fakeResolver{block: true}
	var failures atomic.Int64
	e := newRouterEnv(t, envConfig{router: &RouterOptions{
		Identity:          res,
		IdentityTimeout:   50 * time.Millisecond,
		OnIdentityFailure: func(context.Context, error) { failures.Add(1) },
	}})
	start := time.Now()
	resp := e.handle(Request{Input: "budget", SlackUserID: "U024BE7LH"})
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, resp.SessionID, e.active("U024BE7LH").ID, "unresolved, the Slack user id keys the session")
	assert.Equal(t, int64(1), failures.Load())
}

// A resolver's answer outside the request limits is a failure, not a
// session store error.
func TestRouterInvalidResolvedIdentity(t *testing.T) {
	res := &fakeResolver{byKey: map[string]Identity{"cy": {UserID: strings.Repeat("x", session.MaxUserIDLen+1)}}}
	var failures []error
	e := newRouterEnv(t, envConfig{router: &RouterOptions{
		Identity:          res,
		OnIdentityFailure: func(_ context.Context, err error) { failures = append(failures, err) },
	}})
	resp := e.handle(Request{Input: "budget", UserID: "cy"})
	assert.Equal(t, resp.SessionID, e.active("cy").ID)
	require.Len(t, failures, 1)
	assert.Contains(t, failures[0].Error(), "invalid identity")
}

func TestRouterAnonymousIsNotResolved(t *testing.T) {
	res := &fakeResolver{}
	e := newRouterEnv(t, envConfig{router: &RouterOptions{Identity: res}})
	resp := e.handle(Request{Input: "budget"})
	assert.Equal(t, "finance", resp.AgentID)
	assert.Empty(t, res.calls())
}

func TestRequestSlackUserID(t *testing.T) {
	var req Request
	require.NoError(t, json.Unmarshal([]byte(`{"input":"hi","slack_user_id":"W012A3CDE"}`), &req))
	assert.Equal(t, "W012A3CDE", req.SlackUserID)

	e := newRouterEnv(t, envConfig{})
	for _, bad := range []string{"u024be7lh", "X024BE7LH", "U1", "U024-BE7", "U" + strings.Repeat("A", MaxSlackUserIDLen), "U02\x00"} {
		_, err := e.router.Handle(e.ctx, Request{Input: "budget", SlackUserID: bad})
		require.ErrorIs(t, err, ErrInvalidRequest, "%q", bad)
	}
	_, err := e.router.Handle(e.ctx, Request{Input: "budget", DisplayName: strings.Repeat("n", MaxDisplayNameLen+1)})
	require.ErrorIs(t, err, ErrInvalidRequest)
	// Without a resolver, the Slack user id alone identifies the user.
	resp := e.handle(Request{Input: "budget", SlackUserID: "U" + strings.Repeat("A", MaxSlackUserIDLen-1)})
	assert.NotEmpty(t, resp.SessionID)
}

func TestIsSlackUserID(t *testing.T) {
	for s, want := range map[string]bool{
		"U024BE7LH": true, "W012A3CDE": true, "U12": true, "UAB": true,
		"": false, "U": false, "U1": false, "u024BE7LH": false, "B024BE7LH": false,
		"U024be7lh": false, "U024 BE7": false, "Ü024BE7LH": false,
	} {
		assert.Equal(t, want, IsSlackUserID(s), "%q", s)
	}
}

func TestIdentityChain(t *testing.T) {
	ctx := context.Background()
	dir := &fakeResolver{byKey: map[string]Identity{"U1A": ada}}
	slack := &fakeResolver{byKey: map[string]Identity{"U2B": {DisplayName: "Bo"}}}
	c := IdentityChain(dir, nil, slack)

	got, err := c.ResolveIdentity(ctx, Identity{SlackUserID: "U1A"})
	require.NoError(t, err)
	assert.Equal(t, ada, got)
	assert.Empty(t, slack.calls(), "the first answer wins")

	got, err = c.ResolveIdentity(ctx, Identity{SlackUserID: "U2B"})
	require.NoError(t, err)
	assert.Equal(t, "Bo", got.DisplayName)

	_, err = c.ResolveIdentity(ctx, Identity{SlackUserID: "U3C"})
	require.ErrorIs(t, err, ErrIdentityNotFound)

	down := errors.New("slack down")
	slack.err = down
	_, err = c.ResolveIdentity(ctx, Identity{SlackUserID: "U3C"})
	require.ErrorIs(t, err, down)
	assert.NotErrorIs(t, err, ErrIdentityNotFound)

	// A failure before an answer: the answer wins.
	got, err = IdentityChain(slack, dir).ResolveIdentity(ctx, Identity{SlackUserID: "U1A"})
	require.NoError(t, err)
	assert.Equal(t, ada, got)

	_, err = IdentityChain().ResolveIdentity(ctx, Identity{UserID: "x"})
	require.ErrorIs(t, err, ErrIdentityNotFound)
}

func TestIdentityCache(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Now())
	res := &fakeResolver{byKey: map[string]Identity{"a": {EmployeeID: "1"}, "b": {EmployeeID: "2"}, "c": {EmployeeID: "3"}}}
	c, err := NewIdentityCache(res, &IdentityCacheOptions{TTL: time.Minute, FailureTTL: 10 * time.Second, MaxEntries: 2, Now: clock.Now})
	require.NoError(t, err)
	ask := func(user string) (Identity, error) { return c.ResolveIdentity(ctx, Identity{UserID: user}) }

	t.Run("bounded, least recently used out first", func(t *testing.T) {
		ask("a")
		ask("b")
		ask("a") // a is now the most recently used
		ask("c") // pushes b out
		assert.Equal(t, 2, c.Len())
		n := len(res.calls())
		ask("a")
		assert.Len(t, res.calls(), n, "a is kept")
		ask("b")
		assert.Len(t, res.calls(), n+1, "b was pushed out")
	})

	t.Run("not found is an answer", func(t *testing.T) {
		c.Purge()
		assert.Zero(t, c.Len())
		_, err := ask("nobody")
		require.ErrorIs(t, err, ErrIdentityNotFound)
		n := len(res.calls())
		_, err = ask("nobody")
		require.ErrorIs(t, err, ErrIdentityNotFound)
		assert.Len(t, res.calls(), n, "kept")
	})

	t.Run("failures are kept for FailureTTL", func(t *testing.T) {
		c.Purge()
		down := errors.New("down")
		res.err = down
		_, err := ask("a")
		require.ErrorIs(t, err, down)
		res.err = nil
		n := len(res.calls())
		_, err = ask("a")
		require.ErrorIs(t, err, down, "the failure is kept")
		assert.Len(t, res.calls(), n)
		clock.Advance(10 * time.Second)
		got, err := ask("a")
		require.NoError(t, err)
		assert.Equal(t, "1", got.EmployeeID)
		assert.Len(t, res.calls(), n+1)
	})

	t.Run("answers expire after TTL", func(t *testing.T) {
		n := len(res.calls())
		clock.Advance(59 * time.Second)
		ask("a")
		assert.Len(t, res.calls(), n)
		clock.Advance(time.Second)
		ask("a")
		assert.Len(t, res.calls(), n+1)
	})

	t.Run("a cancelled call is not kept", func(t *testing.T) {
		c.Purge()
		blocking := &fakeResolver{block: true}
		bc, err := NewIdentityCache(blocking, &IdentityCacheOptions{Now: clock.Now})
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = bc.ResolveIdentity(cctx, Identity{UserID: "a"})
		require.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, bc.Len())
	})

	t.Run("negative FailureTTL keeps no failure", func(t *testing.T) {
		failing := &fakeResolver{err: errors.New("down")}
		fc, err := NewIdentityCache(failing, &IdentityCacheOptions{FailureTTL: -1, Now: clock.Now})
		require.NoError(t, err)
		fc.ResolveIdentity(ctx, Identity{UserID: "a"})
		fc.ResolveIdentity(ctx, Identity{UserID: "a"})
		assert.Len(t, failing.calls(), 2)
		assert.Zero(t, fc.Len())
	})

	t.Run("bad options", func(t *testing.T) {
		_, err := NewIdentityCache(nil, nil)
		require.Error(t, err)
		_, err = NewIdentityCache(res, &IdentityCacheOptions{TTL: -time.Second})
		require.Error(t, err)
		_, err = NewIdentityCache(res, &IdentityCacheOptions{MaxEntries: -1})
		require.Error(t, err)
	})
}

func TestIdentityCacheConcurrent(t *testing.T) {
	res := &fakeResolver{byKey: map[string]Identity{}}
	for i := range 50 {
		res.byKey[fmt.Sprint(i)] = Identity{EmployeeID: fmt.Sprint("E", i)}
	}
	c, err := NewIdentityCache(res, &IdentityCacheOptions{MaxEntries: 20})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := fmt.Sprint((i * (g + 1)) % 50)
				got, err := c.ResolveIdentity(context.Background(), Identity{UserID: k})
				if assert.NoError(t, err) {
					assert.Equal(t, "E"+k, got.EmployeeID)
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, c.Len(), 20)
}
