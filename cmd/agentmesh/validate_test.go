package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const exampleAgents = "../../examples/agents"

// runCmd runs one command line in process with env as the environment.
func runCmd(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeAgentFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

func agentFile(name string, extra ...string) string {
	s := "agent_id: " + name + "\ndescription: Handles " + name + ".\nendpoint: https://" + name + ".example.com/task\n"
	for _, e := range extra {
		s += e + "\n"
	}
	return s
}

func TestValidateCommand(t *testing.T) {
	t.Run("the example directory", func(t *testing.T) {
		code, stdout, stderr := runCmd(t, nil, "validate", "--allow-private-endpoints", exampleAgents)
		assert.Equal(t, 0, code, stderr)
		assert.Equal(t, "3 agents OK\n", stdout)

		// As serve, private endpoints are refused by default…
		code, stdout, _ = runCmd(t, nil, "validate", exampleAgents)
		assert.Equal(t, 1, code)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 3, stdout)
		assert.Regexp(t, `^\.\./\.\./examples/agents/billing\.yaml:6: endpoint refused: `, lines[0])
		// …unless the environment allows them, or sets public endpoints.
		code, stdout, _ = runCmd(t, map[string]string{"MESH_ALLOW_PRIVATE_ENDPOINTS": "true"}, "validate", exampleAgents)
		assert.Equal(t, 0, code)
		assert.Equal(t, "3 agents OK\n", stdout)
		code, stdout, _ = runCmd(t, map[string]string{
			"BILLING_AGENT_ENDPOINT":        "https://billing.example.com/task",
			"GENERAL_AGENT_ENDPOINT":        "https://general.example.com/task",
			"PASSWORD_RESET_AGENT_ENDPOINT": "https://pw.example.com/task",
		}, "validate", exampleAgents)
		assert.Equal(t, 0, code, stdout)
	})

	t.Run("every problem as file:line: message", func(t *testing.T) {
		dir := t.TempDir()
		writeAgentFiles(t, dir, map[string]string{
			"a.yaml":      agentFile("a", "is_default: true", "endpont: x"),
			"b.yaml":      agentFile("b", "clarification_context: ${NOT_SET}"),
			"c/c.yml":     agentFile("a"),
			"d.yaml":      "agent_id: d\ndescription: [oops\n",
			".skip.yaml":  "ignored: true",
			"notes.md":    "ignored",
			"e.yaml":      agentFile("e", `endpoint2: "${X}"`),
			"f.yaml":      agentFile("f", "is_default: true"),
			"g/.h/x.yaml": "ignored: true",
		})
		code, stdout, stderr := runCmd(t, map[string]string{"EMPTY": ""}, "validate", dir)
		assert.Equal(t, 1, code)
		assert.Equal(t, fmt.Sprintf("agentmesh validate: %s: 6 problems\n", dir), stderr)
		want := []string{
			`a.yaml:5: unknown key "endpont" (did you mean "endpoint"?)`,
			`b.yaml:4: clarification_context: environment variable NOT_SET is not set (use ${NOT_SET:-default} for a default)`,
			`c/c.yml:1: agent_id "a" is already defined in ` + filepath.Join(dir, "a.yaml") + `:1`,
			`d.yaml:2: invalid YAML: did not find expected ',' or ']'`,
			`e.yaml:4: unknown key "endpoint2" (did you mean "endpoint"?)`,
			`f.yaml:4: is_default: at most one agent may be the default; "a" in ` + filepath.Join(dir, "a.yaml") + `:4 already is`,
		}
		for i := range want {
			want[i] = filepath.Join(dir, want[i])
		}
		assert.Equal(t, strings.Join(want, "\n")+"\n", stdout)
	})

	t.Run("default agent", func(t *testing.T) {
		dir := t.TempDir()
		writeAgentFiles(t, dir, map[string]string{"a.yaml": agentFile("a")})
		code, stdout, _ := runCmd(t, nil, "validate", dir)
		assert.Equal(t, 1, code)
		assert.Equal(t, dir+": no agent has is_default: true; routing needs exactly one default agent\n", stdout)
		code, stdout, _ = runCmd(t, nil, "validate", "--require-default=false", dir)
		assert.Equal(t, 0, code)
		assert.Equal(t, "1 agent OK\n", stdout)
	})

	t.Run("environment", func(t *testing.T) {
		dir := t.TempDir()
		writeAgentFiles(t, dir, map[string]string{"a.yaml": "agent_id: ${NAME}\ndescription: x\nendpoint: ${EP:-https://a.example.com}\nis_default: true\n"})
		code, stdout, _ := runCmd(t, map[string]string{"NAME": "from-env"}, "validate", dir)
		assert.Equal(t, 0, code, stdout)
		code, stdout, _ = runCmd(t, nil, "validate", dir)
		assert.Equal(t, 1, code)
		assert.Contains(t, stdout, "a.yaml:1: agent_id: environment variable NAME is not set")
	})

	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		code, stdout, _ := runCmd(t, nil, "validate", dir)
		assert.Equal(t, 1, code)
		assert.Equal(t, dir+": does not exist (or is a broken symbolic link)\n", stdout)
	})

	t.Run("usage", func(t *testing.T) {
		code, _, stderr := runCmd(t, nil, "validate")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "validate takes one directory")
		code, _, _ = runCmd(t, nil, "validate", "a", "b")
		assert.Equal(t, 2, code)
		code, _, _ = runCmd(t, nil, "validate", "--bogus", "a")
		assert.Equal(t, 2, code)
		code, _, stderr = runCmd(t, nil, "validate", "--allow-endpoint-hosts", "10.0.0.0/33", exampleAgents)
		assert.Equal(t, 2, code, stderr)
		code, _, stderr = runCmd(t, nil, "validate", "-h")
		assert.Equal(t, 0, code)
		assert.Contains(t, stderr, "agentmesh validate [flags] DIR")
		_, stdout, _ := runCmd(t, nil, "help")
		assert.Contains(t, stdout, "agentmesh validate DIR")
	})
}

// serveLog collects the logs of an in-process serve, safe for a writer
// and a reader.
type serveLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *serveLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *serveLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveAgents runs `agentmesh serve --agents dir` in process and returns
// its base URL and a function that stops it and returns its exit code.
func serveAgents(t *testing.T, dir string, extra ...string) (string, *serveLog, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &serveLog{}
	env := map[string]string{"MESH_TOKEN": "test-admin-token", "BILLING_AGENT_ENDPOINT": "https://billing.example.com/task"}
	args := append([]string{"serve", "--store", "memory", "--addr", "127.0.0.1:0", "--log-format", "json", "--agents", dir}, extra...)
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, stderr)
	}()
	addrRE := regexp.MustCompile(`"msg":"agentmesh serving","addr":"([^"]+)"`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			stop := sync.OnceValue(func() int { cancel(); return <-done })
			t.Cleanup(func() { stop() })
			return "http://" + m[1], stderr, stop
		}
		select {
		case code := <-done:
			cancel()
			return "", stderr, func() int { return code }
		default:
		}
		require.True(t, time.Now().Before(deadline), "serve did not start: %s", stderr.String())
		time.Sleep(10 * time.Millisecond)
	}
}

// call makes an admin request and decodes the JSON reply into a map.
func call(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	var body map[string]any
	code := callInto(t, method, url, &body)
	return code, body
}

func callInto(t *testing.T, method, url string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer test-admin-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	return resp.StatusCode
}

func agentNames(t *testing.T, base string) []string {
	t.Helper()
	var list []any
	code := callInto(t, "GET", base+"/v1/agents", &list)
	require.Equal(t, 200, code, "%v", list)
	var out []string
	for _, a := range list {
		m := a.(map[string]any)
		out = append(out, m["name"].(string)+"/"+m["source"].(string))
	}
	return out
}

func TestServeAgentsDir(t *testing.T) {
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(exampleAgents, "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		writeAgentFiles(t, dir, map[string]string{filepath.Base(f): string(data)})
	}
	base, stderr, stop := serveAgents(t, dir, "--allow-private-endpoints")
	require.NotEmpty(t, base, stderr.String())
	assert.Equal(t, []string{"billing/file", "general-assistant/file", "password-reset/file"}, agentNames(t, base))
	_, body := call(t, "GET", base+"/v1/agents/billing")
	assert.Equal(t, "https://billing.example.com/task", body["endpoint"], "expanded from the environment")

	// The API may not delete a file agent.
	code, body := call(t, "DELETE", base+"/v1/agents/billing")
	assert.Equal(t, 409, code)
	assert.Equal(t, "managed_by_file", body["code"])

	// POST /v1/admin/reload reloads the directory and reports it.
	writeAgentFiles(t, dir, map[string]string{"extra.yaml": agentFile("extra")})
	code, body = call(t, "POST", base+"/v1/admin/reload")
	require.Equal(t, 200, code, "%v", body)
	agents := body["agents"].(map[string]any)
	assert.Equal(t, []any{"extra"}, agents["added"])
	assert.Len(t, agents["unchanged"], 3)

	// A broken directory: 422 with every problem; the previous set stays;
	// /health/deep shows the error.
	writeAgentFiles(t, dir, map[string]string{"extra.yaml": agentFile("extra", "bogus: 1"), "dup.yaml": agentFile("billing")})
	code, body = call(t, "POST", base+"/v1/admin/reload")
	require.Equal(t, 422, code, "%v", body)
	assert.Equal(t, "reload_failed", body["code"])
	problems := body["details"].(map[string]any)["agents"].(map[string]any)["problems"].([]any)
	require.Len(t, problems, 2)
	assert.Equal(t, filepath.Join(dir, "dup.yaml"), problems[0].(map[string]any)["file"])
	assert.Equal(t, map[string]any{"file": filepath.Join(dir, "extra.yaml"), "line": 4.0, "message": `unknown key "bogus" (known keys: agent_id, auth, capabilities, clarification_context, clarification_required, confidence_threshold, description, display_name, endpoint, examples, is_default, labels, resources, ttl_seconds, type)`}, problems[1])
	assert.Len(t, agentNames(t, base), 4)
	code, body = call(t, "GET", base+"/health/deep")
	require.Equal(t, 200, code, "a reload error does not degrade health")
	assert.Contains(t, body["lastReloadError"], "extra.yaml:4: unknown key")

	// The watcher picks up the fix on its own, and the error clears.
	require.NoError(t, os.Remove(filepath.Join(dir, "dup.yaml")))
	require.NoError(t, os.Remove(filepath.Join(dir, "extra.yaml")))
	deadline := time.Now().Add(10 * time.Second)
	for len(agentNames(t, base)) != 3 {
		require.True(t, time.Now().Before(deadline), "the file change was not picked up")
		time.Sleep(50 * time.Millisecond)
	}
	_, body = call(t, "GET", base+"/health/deep")
	assert.Nil(t, body["lastReloadError"])
	assert.Equal(t, 0, stop())
	assert.Contains(t, stderr.String(), `"msg":"agent directory reloaded"`)
}

func TestServeAgentsDirStartupErrors(t *testing.T) {
	dir := t.TempDir()
	writeAgentFiles(t, dir, map[string]string{"a.yaml": agentFile("a", "is_default: maybe")})
	base, stderr, stop := serveAgents(t, dir)
	assert.Empty(t, base)
	assert.Equal(t, 1, stop())
	assert.Contains(t, stderr.String(), "a.yaml:4: is_default: must be true or false")
	assert.Contains(t, stderr.String(), "--agents "+dir+": 1 problem")

	// Routing needs exactly one default agent.
	writeAgentFiles(t, dir, map[string]string{"a.yaml": agentFile("a")})
	base, stderr, stop = serveAgents(t, dir)
	assert.Empty(t, base)
	assert.Equal(t, 1, stop())
	assert.Contains(t, stderr.String(), "no agent has is_default: true")
}
