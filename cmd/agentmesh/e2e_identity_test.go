package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const e2eSlackToken = "xoxb-e2e-secret-token-0042"

// userAgent is an http agent recording the user object of every POST
// /task it gets.
type userAgent struct {
	srv   *httptest.Server
	mu    sync.Mutex
	users []map[string]any
}

func newUserAgent(t *testing.T) *userAgent {
	a := &userAgent{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			User map[string]any `json:"user"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.users = append(a.users, body.User)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"result":"ok"}`)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *userAgent) last(t *testing.T) map[string]any {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	require.NotEmpty(t, a.users)
	return a.users[len(a.users)-1]
}

// slackAPI is a fake Slack Web API answering users.info in its wire
// format: W0EGON is known, U0DOWN gets a 500, everyone else
// user_not_found; a wrong token gets invalid_auth.
func slackAPI(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch {
		case r.URL.Path != "/api/users.info":
			fmt.Fprint(w, `{"ok":false,"error":"unknown_method"}`)
		case r.Header.Get("Authorization") != "Bearer "+e2eSlackToken:
			fmt.Fprint(w, `{"ok":false,"error":"invalid_auth"}`)
		case r.URL.Query().Get("user") == "W0EGON":
			fmt.Fprint(w, `{"ok":true,"user":{"id":"W0EGON","name":"egon","deleted":false,"real_name":"Egon Spengler",
				"profile":{"display_name":"egon","real_name":"Egon Spengler","fields":{"Xf0EMP":{"value":"E-4242","alt":""}}}}}`)
		case r.URL.Query().Get("user") == "U0DOWN":
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"ok":false,"error":"internal_error"}`)
		default:
			fmt.Fprint(w, `{"ok":false,"error":"user_not_found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestE2EIdentities: serve --identities FILE with a Slack token and
// --slack-api-url at a fake Slack resolves the slack_user_id of POST
// /v1/request: the directory first, then Slack (cached); the agent's POST
// /task carries the resolved user. A Slack failure does not fail the
// request and is counted; the file reloads with the agents and tokens,
// and a broken one keeps the previous directory.
func TestE2EIdentities(t *testing.T) {
	t.Parallel()
	agent := newUserAgent(t)
	slack, slackCalls := slackAPI(t)
	file := filepath.Join(t.TempDir(), "identities.yaml")
	require.NoError(t, os.WriteFile(file, []byte("- slack_user_id: U0ADA\n  user_id: ada\n  employee_id: E1001\n  display_name: Ada Lovelace\n"), 0o600))
	p := startServe(t, serveSpec{
		token: e2eMeshToken,
		args: []string{"--store", "memory", "--allow-private-endpoints", "--identities", file,
			"--slack-api-url", slack.URL + "/api/", "--slack-employee-field", "Xf0EMP"},
		env: []string{"SLACK_BOT_TOKEN=" + e2eSlackToken},
	})
	c := p.client()
	r := c.do(http.MethodPost, "/v1/agents", map[string]any{
		"name": "helper", "description": "Answers anything.", "capabilities": []string{"general"},
		"endpoint": agent.srv.URL + "/task", "examples": []string{"hello there", "I have a question"}, "isDefault": true,
	})
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	route := func(body map[string]any) map[string]any {
		t.Helper()
		r := c.do(http.MethodPost, "/v1/request", body)
		require.Equal(t, http.StatusOK, r.status, "%s", r)
		return r.obj(t)
	}

	// The directory knows U0ADA: Slack is not asked.
	first := route(map[string]any{"input": "hello there", "slack_user_id": "U0ADA"})
	assert.Equal(t, map[string]any{"id": "ada", "employeeId": "E1001", "displayName": "Ada Lovelace"}, agent.last(t))
	assert.Zero(t, slackCalls.Load())
	s := c.do(http.MethodGet, "/v1/sessions/"+first["session_id"].(string), nil).obj(t)
	assert.Equal(t, "ada", s["user_id"], "the session is keyed on the resolved user")
	assert.Equal(t, "E1001", s["employee_id"])

	// Slack knows W0EGON: its custom field is the employee id, which keys
	// the session of a request with no user id; the answer is cached.
	route(map[string]any{"input": "I have a question", "slack_user_id": "W0EGON"})
	assert.Equal(t, map[string]any{"id": "E-4242", "employeeId": "E-4242", "displayName": "egon"}, agent.last(t))
	route(map[string]any{"input": "another question", "slack_user_id": "W0EGON"})
	assert.Equal(t, "egon", agent.last(t)["displayName"])
	assert.Equal(t, int64(1), slackCalls.Load(), "the second request is answered from the cache")

	// Slack failing: the request goes on with the identity it came with,
	// and the failure is counted. An unknown user is not a failure.
	route(map[string]any{"input": "hello there", "slack_user_id": "U0DOWN", "user_id": "dana"})
	assert.Equal(t, map[string]any{"id": "dana", "employeeId": "dana", "displayName": "dana"}, agent.last(t))
	route(map[string]any{"input": "hello there", "slack_user_id": "U0NOBODY"})
	metrics := string(p.as("").do(http.MethodGet, "/metrics", nil).body)
	assert.Contains(t, metrics, `agentmesh_identity_failures_total{resolver="slack"} 1`)
	assert.Contains(t, metrics, `agentmesh_identity_failures_total{resolver="directory"} 0`)

	// A malformed Slack user id is refused.
	c.do(http.MethodPost, "/v1/request", map[string]any{"input": "hi", "slack_user_id": "nobody"}).requireError(t, http.StatusBadRequest, "invalid_argument")

	// POST /v1/admin/reload reads the file again; a broken file is
	// reported and keeps the previous directory.
	require.NoError(t, os.WriteFile(file, []byte("- slack_user_id: U0ADA\n  user_id: ada\n  employee_id: E1001\n  display_name: Ada King\n"), 0o600))
	r = c.do(http.MethodPost, "/v1/admin/reload", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Contains(t, string(r.body), `"identities":1`)
	route(map[string]any{"input": "hello there", "slack_user_id": "U0ADA"})
	assert.Equal(t, "Ada King", agent.last(t)["displayName"])

	require.NoError(t, os.WriteFile(file, []byte("- slack_user_id: U0ADA\n  employe_id: E1001\n"), 0o600))
	er := c.do(http.MethodPost, "/v1/admin/reload", nil).requireError(t, 422, "reload_failed")
	assert.Contains(t, fmt.Sprint(er), "entry 1 (line 1)", "the error names the entry")
	route(map[string]any{"input": "hello there", "slack_user_id": "U0ADA"})
	assert.Equal(t, "Ada King", agent.last(t)["displayName"], "the previous directory stays")

	// SIGHUP reloads it too.
	require.NoError(t, os.WriteFile(file, []byte("- slack_user_id: U0ADA\n  user_id: ada\n  employee_id: E1001\n  display_name: Ada Byron\n"), 0o600))
	p.signal(syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for {
		route(map[string]any{"input": "hello there", "slack_user_id": "U0ADA"})
		if agent.last(t)["displayName"] == "Ada Byron" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the new directory is not in service 5 s after SIGHUP")
		time.Sleep(50 * time.Millisecond)
	}

	p.stop()
	assert.NotContains(t, p.stderr.String(), e2eSlackToken, "the Slack token is never logged")
	assert.False(t, strings.Contains(p.stderr.String(), "U0DOWN"), "the failure log does not name the user")
}

// TestE2EStdioIdentities: the stdio MCP server takes --identities too;
// mesh_route and handle_message resolve slack_user_id.
func TestE2EStdioIdentities(t *testing.T) {
	t.Parallel()
	agent := newUserAgent(t)
	file := filepath.Join(t.TempDir(), "identities.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"slack_user_id": "U0ADA", "employee_id": "E1001", "display_name": "Ada Lovelace"}]`), 0o600))
	s := startStdio(t, nil, "--db", filepath.Join(t.TempDir(), "mesh.db"), "--identities", file)
	defer s.close(t)
	callTool(t, s.cs, "mesh_register", map[string]any{
		"name": "general", "description": "Answers anything.", "capabilities": []string{"general"},
		"endpoint": agent.srv.URL + "/task", "isDefault": true,
	})
	callTool(t, s.cs, "mesh_route", map[string]any{"input": "hello", "slack_user_id": "U0ADA"})
	assert.Equal(t, map[string]any{"id": "E1001", "employeeId": "E1001", "displayName": "Ada Lovelace"}, agent.last(t))
	callTool(t, s.cs, "handle_message", map[string]any{"raw_input": "hello again", "slack_user_id": "U0ADA"})
	assert.Equal(t, "Ada Lovelace", agent.last(t)["displayName"])
}

func TestNewIdentitiesConfig(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ids, err := newIdentities(identityConfig{}, meshConfig{}, nil, log)
	require.NoError(t, err)
	assert.Nil(t, ids, "nothing configured")
	_, err = newIdentities(identityConfig{slackField: "Xf0EMP"}, meshConfig{}, nil, log)
	require.ErrorContains(t, err, "--slack-employee-field needs SLACK_BOT_TOKEN")
	_, err = newIdentities(identityConfig{slackToken: "xoxb-1", slackAPIURL: "http://127.0.0.1:9/api/"}, meshConfig{}, nil, log)
	require.ErrorContains(t, err, "--slack-api-url", "the endpoint policy applies")
	assert.NotContains(t, err.Error(), "xoxb-1")
	_, err = newIdentities(identityConfig{file: filepath.Join(t.TempDir(), "missing.yaml")}, meshConfig{}, nil, log)
	require.ErrorContains(t, err, "--identities")
}

// A broken identities file is a startup error that names the entry.
func TestE2EIdentitiesBadFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "identities.yaml")
	require.NoError(t, os.WriteFile(file, []byte("- slack_user_id: U0ADA\n  employee_id: E1\n- slack_user_id: U0ADA\n  employee_id: E2\n"), 0o600))
	var stderr strings.Builder
	code := runServe(t.Context(), []string{"--addr", "127.0.0.1:0", "--store", "memory", "--identities", file},
		func(k string) string {
			if k == "MESH_TOKEN" {
				return e2eMeshToken
			}
			return ""
		}, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), `entry 2 (line 3): slack_user_id \"U0ADA\" is already the key of entry 1 (line 1)`)
}

// The Slack token comes from --slack-token or, better, SLACK_BOT_TOKEN;
// the flag wins, as for every flag.
func TestSlackTokenFlagAndEnv(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{nil, "xoxb-env", "xoxb-env"},
		{[]string{"--slack-token", "xoxb-flag"}, "", "xoxb-flag"},
		{[]string{"--slack-token", "xoxb-flag"}, "xoxb-env", "xoxb-flag"},
	} {
		var cfg serveConfig
		f := serveFlags(&cfg, io.Discard)
		require.NoError(t, f.parse(tc.args, func(k string) string {
			if k == "SLACK_BOT_TOKEN" {
				return tc.env
			}
			return ""
		}))
		assert.Equal(t, tc.want, cfg.mesh.identity.slackToken, "%v %q", tc.args, tc.env)
	}
}
