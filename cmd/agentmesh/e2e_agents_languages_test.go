package main

// TestExampleAgents runs the example agents of examples/agents-go (on
// package agentkit), examples/agents-python and examples/agents-typescript
// as their users would, against agentmesh serve.

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/logtest"
)

// callbackRecorder stands in front of the mesh as its --public-url: it
// records the delegation ids of the callbacks that pass through it and
// forwards every request to the mesh.
type callbackRecorder struct {
	mu     sync.Mutex
	target *url.URL
	ids    map[string][]string // delegation id → the callbacks' bodies
}

func (c *callbackRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	target := c.target
	if id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/delegations/"), "/result"); ok && r.Method == http.MethodPost {
		body, _ := httputil.DumpRequest(r, true)
		_, b, _ := strings.Cut(string(body), "\r\n\r\n")
		c.ids[id] = append(c.ids[id], b)
	}
	c.mu.Unlock()
	httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
}

func (c *callbackRecorder) callbacks(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// runtimeOf returns the path of the program (python3, node), or skips the
// test without it; under CI (CI set) its absence fails the test instead.
func runtimeOf(t *testing.T, program string) string {
	path, err := exec.LookPath(program)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is needed to run this example agent (CI is set): %v", program, err)
	}
	t.Skipf("%s not found: %v", program, err)
	return ""
}

func TestExampleAgents(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	goAgent := filepath.Join(t.TempDir(), "agents-go")
	args := []string{"build", "-o", goAgent}
	if raceEnabled {
		args = append(args, "-race") // the agentkit of a real process is checked for races too
	}
	build := exec.Command("go", append(args, "./examples/agents-go")...)
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./examples/agents-go:\n%s", out)

	recorder := &callbackRecorder{ids: map[string][]string{}}
	front := httptest.NewServer(recorder)
	t.Cleanup(front.Close)
	token := "mesh-" + rand.Text()
	mesh := startServe(t, serveSpec{token: token, args: []string{"--allow-private-endpoints", "--public-url", front.URL}})
	recorder.mu.Lock()
	recorder.target, err = url.Parse(mesh.url)
	recorder.mu.Unlock()
	require.NoError(t, err)

	languages := []struct {
		name    string
		command func(t *testing.T) []string
	}{
		{"go", func(*testing.T) []string { return []string{goAgent} }},
		{"python", func(t *testing.T) []string {
			return []string{runtimeOf(t, "python3"), filepath.Join(root, "examples/agents-python/agent.py")}
		}},
		{"typescript", func(t *testing.T) []string {
			return []string{runtimeOf(t, "node"), filepath.Join(root, "examples/agents-typescript/agent.mjs")}
		}},
	}
	// All the agents start at once, so that their registrations and
	// heartbeats overlap; then each is checked on its own.
	var agents []*exampleAgent
	for _, lang := range languages {
		for _, async := range []bool{false, true} {
			agents = append(agents, startExampleAgent(t, mesh, lang.name, lang.command(t), async))
		}
	}
	for _, a := range agents {
		t.Run(strings.TrimPrefix(a.name, "shout-"), func(t *testing.T) {
			t.Parallel()
			a.check(t, mesh, recorder)
		})
	}
}

// exampleAgent is a running example agent.
type exampleAgent struct {
	name, lang string
	async      bool
	token      string // AGENT_TOKEN
	cmd        *exec.Cmd
	output     *logtest.Buffer
	exited     chan struct{} // closed when the process has exited
	err        error         // of cmd.Wait, once exited is closed
}

// startExampleAgent starts an example agent with its settings in the
// environment, as its users would (a TTL of 5 s, the minimum).
func startExampleAgent(t *testing.T, mesh *meshProc, lang string, command []string, async bool) *exampleAgent {
	t.Helper()
	a := &exampleAgent{name: fmt.Sprintf("shout-%s-%s", lang, map[bool]string{false: "sync", true: "async"}[async]),
		lang: lang, async: async, token: "agent-" + rand.Text(), output: &logtest.Buffer{}, exited: make(chan struct{})}
	env := []string{"MESH_URL=" + mesh.url, "MESH_TOKEN=" + mesh.token, "AGENT_NAME=" + a.name,
		"AGENT_ADDR=127.0.0.1:0", "AGENT_TOKEN=" + a.token, "AGENT_TTL=5"}
	if async {
		env = append(env, "AGENT_ASYNC=1")
	}
	a.cmd = exec.Command(command[0], command[1:]...)
	a.cmd.Env = childEnv(t, env...)
	a.cmd.Stdout, a.cmd.Stderr = a.output, a.output
	require.NoError(t, a.cmd.Start())
	go func() {
		a.err = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-a.exited:
		default:
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", a.name, a.output.String())
		}
	})
	return a
}

// check checks, against the mesh, that the agent registers with its
// token, serves a delegation with what it computed from the task (through
// the callback when async), refuses calls without its token, heartbeats,
// and unregisters and exits cleanly on SIGTERM.
func (a *exampleAgent) check(t *testing.T, mesh *meshProc, recorder *callbackRecorder) {
	name, lang, async, agentToken := a.name, a.lang, a.async, a.token
	api := mesh.client().with(t)

	// It registers, with its token as the mesh's credential.
	var rec map[string]any
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := api.do(http.MethodGet, "/v1/agents/"+name, nil)
		if r.status == http.StatusOK {
			rec = r.obj(t)
			break
		}
		select {
		case <-a.exited:
			t.Fatalf("%s exited before registering: %v", name, a.err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "%s not registered within 15 s: %s", name, r)
		time.Sleep(50 * time.Millisecond)
	}
	assert.Equal(t, map[string]any{"type": "bearer"}, rec["auth"], "the record's auth (its token is never read back)")
	assert.EqualValues(t, 5, rec["ttlSeconds"])
	endpoint, _ := rec["endpoint"].(string)
	require.True(t, strings.HasPrefix(endpoint, "http://127.0.0.1:"), "endpoint %q", endpoint)

	// The mesh delegates to it, and the result is what the agent computed
	// from this very task.
	task := "count the words of " + rand.Text() + " please"
	want := fmt.Sprintf("%s (6 words, %s)", strings.ToUpper(task), lang)
	var del map[string]any
	for {
		r := api.do(http.MethodPost, "/v1/delegate", map[string]any{"targetName": name, "task": task, "timeoutMs": 15000})
		if r.status == http.StatusNotFound && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // the delegation client follows the registry a moment later
			continue
		}
		require.Equal(t, http.StatusOK, r.status, "%s", r)
		del = r.obj(t)
		break
	}
	require.Equal(t, "completed", del["status"], "%v", del)
	assert.Equal(t, want, del["result"])
	id, _ := del["id"].(string)
	if async {
		// It answered 202 and called back: the callback went through the
		// mesh's public URL, with the result.
		cbs := recorder.callbacks(id)
		require.Len(t, cbs, 1, "callbacks of %s", id)
		var cb map[string]any
		require.NoError(t, json.Unmarshal([]byte(cbs[0]), &cb), "callback %s", cbs[0])
		assert.Equal(t, map[string]any{"status": "completed", "result": want}, cb)
	} else {
		assert.Empty(t, recorder.callbacks(id), "a sync agent called back")
	}

	// Without its token (or with another one), it refuses the call.
	for _, auth := range []string{"", "Bearer wrong-" + agentToken, "Bearer " + mesh.token} {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"delegationId": "x", "task": "sneaky", "context": {"depth": 1, "chain": []}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "Authorization %q", auth)
	}

	// It heartbeats: lastSeen moves on (every TTL/3, 1.7 s), while it stays
	// the same registration.
	first, _ := time.Parse(time.RFC3339Nano, rec["lastSeen"].(string))
	registeredAt := rec["registeredAt"]
	require.Eventually(t, func() bool {
		r := api.do(http.MethodGet, "/v1/agents/"+name, nil)
		if r.status != http.StatusOK {
			return false
		}
		m := r.obj(t)
		seen, err := time.Parse(time.RFC3339Nano, m["lastSeen"].(string))
		return err == nil && seen.After(first) && m["registeredAt"] == registeredAt
	}, 5*time.Second, 100*time.Millisecond, "no heartbeat of %s", name)

	// SIGTERM: it unregisters and exits cleanly.
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-a.exited:
		require.NoError(t, a.err, "%s's exit after SIGTERM", name)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10 s of SIGTERM", name)
	}
	api.do(http.MethodGet, "/v1/agents/"+name, nil).requireError(t, http.StatusNotFound, "not_found")
}
