package routing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
	"github.com/agentmesh/agentmesh/netguard"
)

const slackTestToken = "xoxb-test-0123456789"

// A users.info reply as the Slack Web API sends it (abridged), with a
// custom profile field holding the employee id.
const spenglerInfo = `{
  "ok": true,
  "user": {
    "id": "W012A3CDE", "team_id": "T012AB3C4", "name": "spengler", "deleted": false,
    "real_name": "Egon Spengler", "tz": "America/Los_Angeles",
    "profile": {
      "avatar_hash": "ge3b51ca72de", "status_text": "Print is dead",
      "real_name": "Egon Spengler", "display_name": "spengler",
      "real_name_normalized": "Egon Spengler", "display_name_normalized": "spengler",
      "email": "spengler@ghostbusters.example.com", "title": "Scientist",
      "fields": {"Xf0EMPLOYEE": {"value": "E-4242", "alt": ""}},
      "image_24": "https://example.com/a.jpg", "team": "T012AB3C4"
    },
    "is_admin": true, "is_bot": false, "updated": 1502138686
  }
}`

// fakeSlack is a Slack Web API speaking the users.info and
// users.profile.get wire format: replies are keyed on the method and the
// user argument; unknown users get ok:false user_not_found.
type fakeSlack struct {
	srv     *httptest.Server
	mu      sync.Mutex
	replies map[string]string // "method user" → body
	status  map[string]int    // "method user" → status, 200 when absent
	header  http.Header       // extra reply headers
	hang    chan struct{}     // when set, requests wait for it (or the client)
	calls   atomic.Int64
	auth    atomic.Pointer[string]
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{replies: map[string]string{}, status: map[string]int{}, header: http.Header{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		a := r.Header.Get("Authorization")
		f.auth.Store(&a)
		f.mu.Lock()
		hang := f.hang
		key := r.URL.Path[len("/api/"):] + " " + r.URL.Query().Get("user")
		body, ok := f.replies[key]
		status := f.status[key]
		for k, v := range f.header {
			w.Header()[k] = v
		}
		f.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		if a != "Bearer "+slackTestToken {
			body, ok = `{"ok":false,"error":"invalid_auth"}`, true
		}
		if !ok {
			body = `{"ok":false,"error":"user_not_found"}`
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if status != 0 {
			w.WriteHeader(status)
		}
		fmt.Fprint(w, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) reply(method, user, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies[method+" "+user] = body
}

func (f *fakeSlack) setStatus(method, user string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[method+" "+user] = status
}

// setHeader sets a header of every reply; "" removes it.
func (f *fakeSlack) setHeader(k, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v == "" {
		f.header.Del(k)
		return
	}
	f.header.Set(k, v)
}

func (f *fakeSlack) resolver(t *testing.T, o SlackIdentityOptions) *SlackIdentity {
	t.Helper()
	if o.Token == "" {
		o.Token = slackTestToken
	}
	o.APIURL = f.srv.URL + "/api/"
	s, err := NewSlackIdentity(&o)
	require.NoError(t, err)
	return s
}

func TestSlackIdentityUsersInfo(t *testing.T) {
	ctx := context.Background()
	f := newFakeSlack(t)
	f.reply("users.info", "W012A3CDE", spenglerInfo)

	s := f.resolver(t, SlackIdentityOptions{EmployeeField: "Xf0EMPLOYEE"})
	got, err := s.ResolveIdentity(ctx, Identity{SlackUserID: "W012A3CDE", UserID: "ignored"})
	require.NoError(t, err)
	assert.Equal(t, Identity{SlackUserID: "W012A3CDE", EmployeeID: "E-4242", DisplayName: "spengler"}, got)
	assert.Equal(t, "Bearer "+slackTestToken, *f.auth.Load())

	// A standard profile key names a field too.
	got, err = f.resolver(t, SlackIdentityOptions{EmployeeField: "email"}).ResolveIdentity(ctx, Identity{SlackUserID: "W012A3CDE"})
	require.NoError(t, err)
	assert.Equal(t, "spengler@ghostbusters.example.com", got.EmployeeID)

	// No field configured, or one the user does not have: the display
	// name only.
	for _, field := range []string{"", "Xf0OTHER", "pronouns"} {
		got, err = f.resolver(t, SlackIdentityOptions{EmployeeField: field}).ResolveIdentity(ctx, Identity{SlackUserID: "W012A3CDE"})
		require.NoError(t, err)
		assert.Equal(t, Identity{SlackUserID: "W012A3CDE", DisplayName: "spengler"}, got, "%q", field)
	}

	// display_name empty: real_name.
	f.reply("users.info", "U0NODISPLAY", `{"ok":true,"user":{"id":"U0NODISPLAY","real_name":"Ray Stantz","profile":{"display_name":"","real_name":"Raymond Stantz"}}}`)
	got, err = s.ResolveIdentity(ctx, Identity{SlackUserID: "U0NODISPLAY"})
	require.NoError(t, err)
	assert.Equal(t, "Raymond Stantz", got.DisplayName)

	// Nothing to ask without a Slack user id.
	n := f.calls.Load()
	_, err = s.ResolveIdentity(ctx, Identity{UserID: "ada"})
	require.ErrorIs(t, err, ErrIdentityNotFound)
	assert.Equal(t, n, f.calls.Load())
}

// users.info without custom fields: users.profile.get has them.
func TestSlackIdentityProfileGetForCustomFields(t *testing.T) {
	f := newFakeSlack(t)
	f.reply("users.info", "U0VENKMAN", `{"ok":true,"user":{"id":"U0VENKMAN","profile":{"display_name":"venkman","real_name":"Peter Venkman"}}}`)
	f.reply("users.profile.get", "U0VENKMAN", `{"ok":true,"profile":{"display_name":"venkman","fields":{"Xf0EMPLOYEE":{"value":"E-0001","alt":""}}}}`)
	got, err := f.resolver(t, SlackIdentityOptions{EmployeeField: "Xf0EMPLOYEE"}).ResolveIdentity(context.Background(), Identity{SlackUserID: "U0VENKMAN"})
	require.NoError(t, err)
	assert.Equal(t, Identity{SlackUserID: "U0VENKMAN", EmployeeID: "E-0001", DisplayName: "venkman"}, got)
	assert.Equal(t, int64(2), f.calls.Load())

	// A failing users.profile.get fails the resolution (a missing scope
	// must show).
	f.reply("users.profile.get", "U0VENKMAN", `{"ok":false,"error":"missing_scope","needed":"users.profile:read","provided":"users:read"}`)
	_, err = f.resolver(t, SlackIdentityOptions{EmployeeField: "Xf0EMPLOYEE"}).ResolveIdentity(context.Background(), Identity{SlackUserID: "U0VENKMAN"})
	var se *SlackError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "users.profile.get", se.Method)
	assert.Equal(t, "missing_scope", se.Code)
}

func TestSlackIdentityErrors(t *testing.T) {
	ctx := context.Background()
	f := newFakeSlack(t)
	f.reply("users.info", "U0DELETED", `{"ok":true,"user":{"id":"U0DELETED","deleted":true,"profile":{"display_name":"gone"}}}`)
	f.reply("users.info", "U0NOTJSON", `<html>maintenance</html>`)
	f.reply("users.info", "U0NOUSER", `{"ok":true}`)
	f.reply("users.info", "U0BADSHAPE", `{"ok":true,"user":"W012A3CDE"}`)
	f.reply("users.info", "U05XX", `{"ok":false,"error":"internal_error"}`)
	f.setStatus("users.info", "U05XX", http.StatusBadGateway)
	s := f.resolver(t, SlackIdentityOptions{})

	_, err := s.ResolveIdentity(ctx, Identity{SlackUserID: "U0UNKNOWN"})
	require.ErrorIs(t, err, ErrIdentityNotFound, "user_not_found")
	var se *SlackError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "user_not_found", se.Code)

	_, err = s.ResolveIdentity(ctx, Identity{SlackUserID: "U0DELETED"})
	require.ErrorIs(t, err, ErrIdentityNotFound, "a deleted user")

	for user, code := range map[string]string{"U0NOTJSON": "bad_reply", "U0NOUSER": "bad_reply", "U0BADSHAPE": "bad_reply", "U05XX": "http_502"} {
		_, err = s.ResolveIdentity(ctx, Identity{SlackUserID: user})
		require.ErrorAs(t, err, &se, user)
		assert.Equal(t, code, se.Code, user)
		assert.NotErrorIs(t, err, ErrIdentityNotFound, user)
	}

	// A bad token: invalid_auth, a failure, and the token is in no error.
	bad := f.resolver(t, SlackIdentityOptions{Token: "xoxb-wrong-secret"})
	_, err = bad.ResolveIdentity(ctx, Identity{SlackUserID: "W012A3CDE"})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "invalid_auth", se.Code)
	assert.NotErrorIs(t, err, ErrIdentityNotFound)
	assert.NotContains(t, err.Error(), "xoxb")
}

// A 429 reply blocks every call until its Retry-After has passed.
func TestSlackIdentityRateLimited(t *testing.T) {
	ctx := context.Background()
	f := newFakeSlack(t)
	f.reply("users.info", "W012A3CDE", spenglerInfo)
	f.reply("users.info", "U0LIMITED", `{"ok":false,"error":"ratelimited"}`)
	f.setStatus("users.info", "U0LIMITED", http.StatusTooManyRequests)
	f.setHeader("Retry-After", "30")
	clock := clocktest.New(time.Now())
	s := f.resolver(t, SlackIdentityOptions{Now: clock.Now})

	_, err := s.ResolveIdentity(ctx, Identity{SlackUserID: "U0LIMITED"})
	var se *SlackError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "ratelimited", se.Code)
	assert.Equal(t, 30*time.Second, se.RetryAfter)
	assert.Equal(t, int64(1), f.calls.Load())

	clock.Advance(20 * time.Second)
	_, err = s.ResolveIdentity(ctx, Identity{SlackUserID: "W012A3CDE"})
	require.ErrorAs(t, err, &se, "another user waits too: the limit is the workspace's")
	assert.Equal(t, "ratelimited", se.Code)
	assert.Equal(t, 10*time.Second, se.RetryAfter)
	assert.Equal(t, int64(1), f.calls.Load(), "no call while blocked")

	clock.Advance(10 * time.Second)
	got, err := s.ResolveIdentity(ctx, Identity{SlackUserID: "W012A3CDE"})
	require.NoError(t, err)
	assert.Equal(t, "spengler", got.DisplayName)
	assert.Equal(t, int64(2), f.calls.Load())

	// Without a Retry-After: the default wait.
	f.setHeader("Retry-After", "")
	_, err = s.ResolveIdentity(ctx, Identity{SlackUserID: "U0LIMITED"})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, DefaultSlackRetryAfter, se.RetryAfter)
}

// A Slack that hangs costs a request at most the resolution bound: the
// resolver gives up at its Timeout, the router at IdentityTimeout.
func TestSlackIdentityTimeout(t *testing.T) {
	f := newFakeSlack(t)
	hang := make(chan struct{})
	f.hang = hang
	defer close(hang)

	s := f.resolver(t, SlackIdentityOptions{Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := s.ResolveIdentity(context.Background(), Identity{SlackUserID: "W012A3CDE"})
	assert.Less(t, time.Since(start), 3*time.Second)
	var se *SlackError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "request_failed", se.Code)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotContains(t, err.Error(), "W012A3CDE", "the error does not name the user")

	// Through the router: the request is answered within the bound, with
	// the failure counted.
	var failures atomic.Int64
	e := newRouterEnv(t, envConfig{router: &RouterOptions{
		Identity:          f.resolver(t, SlackIdentityOptions{}), // 5 s default: the router's bound is shorter
		IdentityTimeout:   150 * time.Millisecond,
		OnIdentityFailure: func(context.Context, error) { failures.Add(1) },
	}})
	start = time.Now()
	resp := e.handle(Request{Input: "budget", SlackUserID: "W012A3CDE", UserID: "egon"})
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, map[string]any{"id": "egon", "employeeId": "egon", "displayName": "egon"}, (*e.finance.last.Load())["user"])
	assert.Equal(t, int64(1), failures.Load())
}

func TestNewSlackIdentity(t *testing.T) {
	for name, o := range map[string]*SlackIdentityOptions{
		"nil":             nil,
		"no token":        {},
		"token with line": {Token: "xoxb-1\nX-Evil: 1"},
		"bad url":         {Token: "t", APIURL: "ftp://slack.com/api/"},
		"url with query":  {Token: "t", APIURL: "https://slack.com/api/?x=1"},
		"url with user":   {Token: "t", APIURL: "https://u:p@slack.com/api/"},
		"bad field":       {Token: "t", EmployeeField: "two words"},
	} {
		_, err := NewSlackIdentity(o)
		require.Error(t, err, name)
	}
	// The endpoint policy applies to the API URL.
	policy, err := netguard.NewPolicy(netguard.Options{})
	require.NoError(t, err)
	_, err = NewSlackIdentity(&SlackIdentityOptions{Token: "t", APIURL: "http://127.0.0.1:9/api/", Policy: policy})
	require.Error(t, err)
	_, err = NewSlackIdentity(&SlackIdentityOptions{Token: "t", APIURL: "http://169.254.169.254/api/"})
	require.Error(t, err, "cloud metadata is always refused")

	s, err := NewSlackIdentity(&SlackIdentityOptions{Token: "t"})
	require.NoError(t, err)
	assert.Equal(t, "https://slack.com/api/users.info", s.infoURL)
	s, err = NewSlackIdentity(&SlackIdentityOptions{Token: "t", APIURL: "http://proxy.internal:8080/slack"})
	require.NoError(t, err)
	assert.Equal(t, "http://proxy.internal:8080/slack/users.info", s.infoURL)
	assert.False(t, errors.Is(&SlackError{Code: "invalid_auth"}, ErrIdentityNotFound))
}
