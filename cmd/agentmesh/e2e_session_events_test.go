package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const e2eWebhookSecret = "e2e-session-webhook-secret-0123456789"

// webhookReceiver is a session webhook receiver that checks each
// delivery's signature the way an operator's receiver would: HMAC-SHA256
// of "<X-Agentmesh-Timestamp>.<body>" with the shared secret, and a
// timestamp within 5 minutes.
type webhookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	events []map[string]any
	bad    []string // deliveries that did not verify
	got    chan struct{}
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	rc := &webhookReceiver{got: make(chan struct{}, 16)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("X-Agentmesh-Timestamp")
		mac := hmac.New(sha256.New, []byte(e2eWebhookSecret))
		mac.Write([]byte(ts + "." + string(body)))
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		sec, err := strconv.ParseInt(ts, 10, 64)
		fresh := err == nil && time.Since(time.Unix(sec, 0)).Abs() < 5*time.Minute
		rc.mu.Lock()
		defer func() {
			rc.mu.Unlock()
			rc.got <- struct{}{}
		}()
		if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Agentmesh-Signature"))) || !fresh ||
			r.Header.Get("X-Agentmesh-Event") != "session.closed" {
			rc.bad = append(rc.bad, string(body))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var e map[string]any
		if err := json.Unmarshal(body, &e); err != nil {
			rc.bad = append(rc.bad, string(body))
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		rc.events = append(rc.events, e)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// event waits up to 10 s for the verified event of session id.
func (rc *webhookReceiver) event(t *testing.T, id string) map[string]any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		rc.mu.Lock()
		for _, e := range rc.events {
			if e["session_id"] == id {
				rc.mu.Unlock()
				return e
			}
		}
		bad := rc.bad
		rc.mu.Unlock()
		require.Empty(t, bad, "deliveries that did not verify")
		select {
		case <-rc.got:
		case <-deadline:
			t.Fatalf("no session.closed event for %s reached the webhook", id)
		}
	}
}

// conversationAgent is a POST /task agent that ends the conversation
// (workflowComplete) when the task says "that's all".
func conversationAgent(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr taskRequest
		_ = json.NewDecoder(r.Body).Decode(&tr)
		w.Header().Set("Content-Type", "application/json")
		done := strings.Contains(tr.Task, "that's all")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": "noted: " + tr.Task, "workflowComplete": done})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/task"
}

// TestE2ESessionWebhook: serve with --session-webhook; a conversation the
// agent ends (workflowComplete) reaches the receiver as a signed
// completed event with its session id and turn count, is counted in
// /metrics and audited; a session closed just before SIGTERM is still
// delivered (the shutdown drains the queue).
func TestE2ESessionWebhook(t *testing.T) {
	t.Parallel()
	rc := newWebhookReceiver(t)
	p := startServe(t, serveSpec{
		token: e2eMeshToken,
		args:  []string{"--allow-private-endpoints", "--store", "memory"},
		env:   []string{"MESH_SESSION_WEBHOOK=" + rc.srv.URL + "/hooks/sessions", "MESH_SESSION_WEBHOOK_SECRET=" + e2eWebhookSecret},
	})
	c := p.client()
	agent := agentJSON("helpdesk", conversationAgent(t), "support")
	agent["examples"] = []string{"my laptop does not start", "I cannot print"}
	agent["isDefault"] = true
	r := c.do(http.MethodPost, "/v1/agents", agent)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)

	r = c.do(http.MethodPost, "/v1/request", map[string]any{"input": "my laptop does not start", "user_id": "ann"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	first := r.obj(t)
	sid, _ := first["session_id"].(string)
	require.NotEmpty(t, sid, "%s", r)
	assert.Equal(t, false, first["workflow_complete"], "%s", r)
	r = c.do(http.MethodPost, "/v1/request", map[string]any{"input": "it works now, that's all", "user_id": "ann"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	second := r.obj(t)
	assert.Equal(t, sid, second["session_id"], "%s", r)
	assert.Equal(t, true, second["workflow_complete"], "%s", r)

	e := rc.event(t, sid)
	assert.Equal(t, "session.closed", e["type"])
	assert.Equal(t, "completed", e["status"])
	assert.Equal(t, "ann", e["user_id"])
	assert.Equal(t, "helpdesk", e["active_agent"])
	assert.EqualValues(t, 4, e["turns"], "two user turns, two agent turns")
	for _, k := range []string{"created_at", "closed_at", "duration_ms", "employee_id"} {
		assert.Contains(t, e, k)
	}
	s, _ := c.do(http.MethodGet, "/v1/sessions/"+sid, nil).obj(t)["status"].(string)
	assert.Equal(t, "completed", s)

	// The receiver holds the event before its 204 reaches the sender, and
	// the sender counts a delivery when it reads that 204: wait for it.
	var text string
	require.Eventually(t, func() bool {
		text = string(p.as("").do(http.MethodGet, "/metrics", nil).body)
		got, _ := metricValue(text, `agentmesh_session_webhook_delivered_total`)
		return got == "1"
	}, 10*time.Second, 20*time.Millisecond, "the delivery is counted once the receiver answers")
	for series, want := range map[string]string{
		`agentmesh_sessions_closed_total{status="completed"}`:          "1",
		`agentmesh_sessions_closed_total{status="expired"}`:            "0",
		`agentmesh_session_duration_seconds_count{status="completed"}`: "1",
		`agentmesh_session_webhook_delivered_total`:                    "1",
		`agentmesh_session_webhook_dropped_total`:                      "0",
	} {
		got, found := metricValue(text, series)
		if assert.True(t, found, "no series %s", series) {
			assert.Equal(t, want, got, series)
		}
	}
	require.Eventually(t, func() bool {
		for _, a := range auditEntries(t, c, "") {
			if a["action"] == "session.close" && a["target"] == "helpdesk" {
				d, _ := a["details"].(map[string]any)
				return a["code"] == "completed" && d["session_id"] == sid && d["turns"] == "4"
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the close is audited")

	// A session closed (DELETE: abandoned) right before SIGTERM is
	// delivered before the process exits.
	r = c.do(http.MethodPost, "/v1/request", map[string]any{"input": "I cannot print", "user_id": "bob"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	bobs, _ := r.obj(t)["session_id"].(string)
	require.NotEmpty(t, bobs)
	require.Equal(t, http.StatusOK, c.do(http.MethodDelete, "/v1/sessions/"+bobs, nil).status)
	p.stop()
	e = rc.event(t, bobs)
	assert.Equal(t, "abandoned", e["status"])
	assert.EqualValues(t, 2, e["turns"])
}

// A webhook without its secret is refused at start: unsigned events could
// be forged.
func TestE2ESessionWebhookNeedsSecret(t *testing.T) {
	t.Parallel()
	for name, env := range map[string][]string{
		"none":  {"MESH_SESSION_WEBHOOK=https://hooks.example.com/x"},
		"short": {"MESH_SESSION_WEBHOOK=https://hooks.example.com/x", "MESH_SESSION_WEBHOOK_SECRET=short"},
	} {
		t.Run(name, func(t *testing.T) {
			res := runCLI(t, append(env, "MESH_TOKEN="+e2eMeshToken), "", "serve", "--addr", "127.0.0.1:0", "--store", "memory")
			assert.NotEqual(t, 0, res.code, "%s", res)
			assert.Contains(t, res.stderr, "MESH_SESSION_WEBHOOK_SECRET", "%s", res)
			assert.NotContains(t, res.stderr, "short", "the secret is never echoed")
		})
	}
}
