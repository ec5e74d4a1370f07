package main

// Helpers of the end-to-end tests (e2e_test.go): build the agentmesh binary
// once, run it as a user would (stdio MCP server, `serve`, client
// commands), talk to it over HTTP and MCP, and host real agents on
// httptest servers.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/logtest"
)

// binPath is the agentmesh binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentmesh-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "agentmesh")
		args := []string{"build", "-o", bin}
		if raceEnabled {
			// The test binary is race-built, so the race-built packages
			// are in the build cache: the race binary costs only a link,
			// and every end-to-end test then also checks the real
			// process for data races.
			args = append(args, "-race")
		}
		args = append(args, ".")
		cmd := exec.Command("go", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building the agentmesh binary failed:", err)
			return 1
		}
		binPath = bin
		return m.Run()
	}()
	os.Exit(code)
}

// childEnv is the environment of a child agentmesh process: the test's
// environment without any agentmesh setting (so the developer's own
// MESH_TOKEN or AGENTMESH_DB cannot leak in), a private HOME (the default
// store lives there), and extra ("KEY=value").
func childEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	var env []string
	// A race-built binary sleeps 1 s at exit by default (atexit_sleep_ms):
	// too slow for dozens of short runs.
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "MESH_"), strings.HasPrefix(k, "AGENTMESH_"), strings.HasPrefix(k, "OTEL_"),
			k == "AGENT_REGISTRY_DIR", k == "HOME":
			continue
		case k == "GORACE":
			gorace = v + " " + gorace
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+t.TempDir(), "GORACE="+gorace)
	return append(env, extra...)
}

// lineLog collects the lines a child process writes to stderr, and lets a
// test wait for one.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
	done    bool
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.done = true
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// wait returns the first line (from the start) for which match is true,
// waiting up to timeout for it.
func (l *lineLog) wait(t *testing.T, timeout time.Duration, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(timeout)
	seen := 0
	for {
		l.mu.Lock()
		lines, done, changed := l.lines, l.done, l.changed
		l.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if match(lines[seen]) {
				return lines[seen]
			}
		}
		if done {
			t.Fatalf("the process ended before logging %s; stderr:\n%s", what, l)
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s logged within %s; stderr:\n%s", what, timeout, l)
		}
	}
}

// jsonLines returns the stderr lines that are JSON objects, decoded.
func (l *lineLog) jsonLines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range l.lines {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// meshProc is a running `agentmesh serve`.
type meshProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lineLog
	exited chan struct{}
	err    error // of cmd.Wait, once exited is closed
	url    string
	token  string
}

type serveSpec struct {
	db    string   // --db; "" means a new file in a temp dir
	token string   // MESH_TOKEN; "" means none
	args  []string // extra flags
	env   []string // extra environment
}

// startServe starts `agentmesh serve` on a free loopback port and waits
// until it logs "agentmesh serving". The process is killed at the end of
// the test if it is still running; its stderr is shown if the test failed.
func startServe(t *testing.T, spec serveSpec) *meshProc {
	t.Helper()
	if spec.db == "" {
		spec.db = filepath.Join(t.TempDir(), "mesh.db")
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", spec.db, "--log-format", "json"}, spec.args...)
	env := spec.env
	if spec.token != "" {
		env = append(env, "MESH_TOKEN="+spec.token)
	}
	cmd := exec.Command(binPath, args...)
	cmd.Env = childEnv(t, env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &meshProc{t: t, cmd: cmd, stderr: newLineLog(), exited: make(chan struct{}), token: spec.token}
	go func() {
		p.stderr.consume(stderr)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("agentmesh serve stderr:\n%s", p.stderr)
		}
		if strings.Contains(p.stderr.String(), "DATA RACE") {
			t.Errorf("the agentmesh process reported a data race:\n%s", p.stderr)
		}
	})
	line := p.stderr.wait(t, 20*time.Second, `"agentmesh serving"`, func(l string) bool {
		return strings.Contains(l, `"msg":"agentmesh serving"`)
	})
	var rec struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
	require.NotEmpty(t, rec.Addr, line)
	p.url = "http://" + rec.Addr
	return p
}

// signal sends sig to the process.
func (p *meshProc) signal(sig os.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// waitExit waits up to timeout for the process to exit and returns its
// exit code.
func (p *meshProc) waitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.t.Fatalf("agentmesh serve did not exit within %s; stderr:\n%s", timeout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM and requires a clean exit (code 0).
func (p *meshProc) stop() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	require.Equal(p.t, 0, p.waitExit(15*time.Second), "exit code after SIGTERM; stderr:\n%s", p.stderr)
}

// client returns an API client using the server's MESH_TOKEN.
func (p *meshProc) client() *apiClientT { return p.as(p.token) }

// as returns an API client presenting token ("" for none).
func (p *meshProc) as(token string) *apiClientT {
	return &apiClientT{t: p.t, base: p.url, token: token}
}

// apiClientT is a minimal HTTP client of the mesh's HTTP API
// (docs/API.md) for tests.
type apiClientT struct {
	t      *testing.T
	base   string
	token  string
	apiKey bool // send the token as X-API-Key instead of a bearer token
}

// reply is an HTTP response, read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r *reply) String() string { return fmt.Sprintf("HTTP %d %s", r.status, r.body) }

// decode decodes the JSON body into v.
func (r *reply) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

// obj decodes the body as a JSON object.
func (r *reply) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.decode(t, &m)
	return m
}

// list decodes the body as a JSON array of objects.
func (r *reply) list(t *testing.T) []map[string]any {
	t.Helper()
	var l []map[string]any
	r.decode(t, &l)
	return l
}

// requireError checks an error response: its status, and a JSON body
// {error, code} with a non-empty message and the given code. It returns
// the body.
func (r *reply) requireError(t *testing.T, status int, code string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, "%s", r)
	require.Contains(t, r.header.Get("Content-Type"), "application/json", "%s", r)
	m := r.obj(t)
	require.Equal(t, code, m["code"], "%s", r)
	msg, _ := m["error"].(string)
	require.NotEmpty(t, msg, "%s", r)
	return m
}

// do sends a request; body is JSON-encoded unless it is a string or
// []byte (sent as is). hdr are extra "Name: value" headers.
func (c *apiClientT) do(method, path string, body any, hdr ...string) *reply {
	c.t.Helper()
	r, err := c.try(context.Background(), method, path, body, hdr...)
	require.NoError(c.t, err, "%s %s", method, path)
	return r
}

// try is do without failing the test on a transport error; it is safe to
// call from any goroutine.
func (c *apiClientT) try(ctx context.Context, method, path string, body any, hdr ...string) (*reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		if c.apiKey {
			req.Header.Set("X-API-Key", c.token)
		} else {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &reply{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// cliResult is the outcome of one run of the binary as a command.
type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runCLI runs the binary with args and the environment env (on top of
// childEnv), feeding it stdin, and waits up to 30 s.
func runCLI(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = childEnv(t, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("agentmesh %s: %v", strings.Join(args, " "), err)
	}
	require.NoError(t, ctx.Err(), "agentmesh %s did not finish in time", strings.Join(args, " "))
	return cliResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// checkedTransport wraps an MCP client transport and records every error
// reading from the connection before the client closed it: a stray line on
// the server's stdout shows up as one.
type checkedTransport struct {
	inner mcp.Transport

	mu      sync.Mutex
	errs    []error
	reads   int
	closing bool
}

func (c *checkedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &checkedConn{Connection: conn, owner: c}, nil
}

// readErrors returns the read errors seen before the connection was closed
// and the number of messages read.
func (c *checkedTransport) readErrors() ([]error, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...), c.reads
}

type checkedConn struct {
	mcp.Connection
	owner *checkedTransport
}

func (c *checkedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	o := c.owner
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.reads++
	case !o.closing && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed):
		// The server going away ends the stream with EOF; anything
		// else (a JSON syntax error) is a broken stdout.
		o.errs = append(o.errs, err)
	}
	return msg, err
}

func (c *checkedConn) Close() error {
	c.owner.mu.Lock()
	c.owner.closing = true
	c.owner.mu.Unlock()
	return c.Connection.Close()
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// textOf returns the concatenated text content of a tool result.
func textOf(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// structured decodes a tool result's structured content into a map.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m), "structured content: %s", data)
	return m
}

// callTool calls a tool that must succeed and returns its structured
// content.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s: protocol error", name)
	require.False(t, res.IsError, "%s returned an error result: %s", name, textOf(res))
	return structured(t, res)
}

// callToolError calls a tool that must fail with an isError result whose
// text starts with code, and returns the text.
func callToolError(t *testing.T, cs *mcp.ClientSession, name string, args any, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s: bad arguments must be a tool error, not a protocol error", name)
	text := textOf(res)
	require.True(t, res.IsError, "%s: want an isError result with %s, got: %s", name, code, text)
	require.True(t, strings.HasPrefix(text, code+":"), "%s: the error text must start with %q: %s", name, code+":", text)
	return text
}

// taskRequest is the body of the POST /task an http agent receives from
// the mesh (docs/AGENTS.md#the-request).
type taskRequest struct {
	DelegationID string         `json:"delegationId"`
	Task         string         `json:"task"`
	Context      map[string]any `json:"context"`
	CallbackURL  string         `json:"callbackUrl"`
	// Session and User are set on routed deliveries.
	Session map[string]any `json:"session"`
	User    map[string]any `json:"user"`
	// Header is the delegation id header (X-Mesh-Delegation-Id).
	Header string `json:"-"`
	// UserAgent is the User-Agent header.
	UserAgent string `json:"-"`
	// Authorization is the Authorization header: the agent's credential.
	Authorization string `json:"-"`
	// Path is the agent's path ("/sync", ...).
	Path string `json:"-"`
}

// agents are real HTTP agents speaking the POST /task contract, on one
// httptest server, each at its own path:
//
//	/sync    answers 200 {"result": {"echo": task}}
//	/fail    answers 500
//	/slow    signals slowStarted, then answers after 2 s
//	/stall   signals slowStarted, then never answers
//	/async   answers 202, then POSTs {"status":"completed","result":{"echo":task}} to the callbackUrl
//	/silent  answers 202 and never calls back
type agents struct {
	srv         *httptest.Server
	mu          sync.Mutex
	got         []taskRequest
	slowStarted chan string // delegation ids
	callbacks   chan int    // status codes of the /async agent's callbacks
}

func newAgents(t *testing.T) *agents {
	t.Helper()
	a := &agents{slowStarted: make(chan string, 16), callbacks: make(chan int, 16)}
	mux := http.NewServeMux()
	read := func(w http.ResponseWriter, r *http.Request) (taskRequest, bool) {
		var tr taskRequest
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return tr, false
		}
		tr.Header = r.Header.Get("X-Mesh-Delegation-Id")
		tr.UserAgent = r.Header.Get("User-Agent")
		tr.Authorization = r.Header.Get("Authorization")
		tr.Path = r.URL.Path
		a.mu.Lock()
		a.got = append(a.got, tr)
		a.mu.Unlock()
		return tr, true
	}
	reply := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /sync", func(w http.ResponseWriter, r *http.Request) {
		if tr, ok := read(w, r); ok {
			reply(w, http.StatusOK, map[string]any{"result": map[string]any{"echo": tr.Task}})
		}
	})
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := read(w, r); ok {
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("POST /slow", func(w http.ResponseWriter, r *http.Request) {
		tr, ok := read(w, r)
		if !ok {
			return
		}
		a.slowStarted <- tr.DelegationID
		select {
		case <-time.After(2 * time.Second):
			reply(w, http.StatusOK, map[string]any{"result": "slow done"})
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("POST /stall", func(w http.ResponseWriter, r *http.Request) {
		tr, ok := read(w, r)
		if !ok {
			return
		}
		a.slowStarted <- tr.DelegationID
		<-r.Context().Done()
	})
	mux.HandleFunc("POST /async", func(w http.ResponseWriter, r *http.Request) {
		tr, ok := read(w, r)
		if !ok {
			return
		}
		if tr.CallbackURL == "" {
			http.Error(w, "no callbackUrl", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		go func() {
			body, _ := json.Marshal(map[string]any{"status": "completed", "result": map[string]any{"echo": tr.Task}})
			resp, err := http.Post(tr.CallbackURL, "application/json", bytes.NewReader(body))
			if err != nil {
				a.callbacks <- -1
				return
			}
			resp.Body.Close()
			a.callbacks <- resp.StatusCode
		}()
	})
	mux.HandleFunc("POST /silent", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := read(w, r); ok {
			w.WriteHeader(http.StatusAccepted)
		}
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// url returns the endpoint of the agent at path ("/sync", ...).
func (a *agents) url(path string) string { return a.srv.URL + path }

// requests returns the task requests received so far.
func (a *agents) requests() []taskRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]taskRequest(nil), a.got...)
}

// count returns the number of task requests received at path.
func (a *agents) count(path string) int {
	n := 0
	for _, r := range a.requests() {
		if r.Path == path {
			n++
		}
	}
	return n
}

// request returns the request of the delegation id.
func (a *agents) request(t *testing.T, id string) taskRequest {
	t.Helper()
	for _, r := range a.requests() {
		if r.DelegationID == id {
			return r
		}
	}
	t.Fatalf("the agent received no task for delegation %s", id)
	return taskRequest{}
}

// agentJSON is a registration body for the HTTP API.
func agentJSON(name, endpoint string, caps ...string) map[string]any {
	return map[string]any{
		"name":         name,
		"description":  "Agent " + name + " for end-to-end tests.",
		"capabilities": caps,
		"endpoint":     endpoint,
	}
}

// stdioSession starts the binary as an MCP server on stdio with args and
// env, through the go-sdk's CommandTransport, and connects a client.
type stdioSession struct {
	cs     *mcp.ClientSession
	cmd    *exec.Cmd
	tr     *checkedTransport
	stderr *logtest.Buffer
}

func startStdio(t *testing.T, env []string, args ...string) *stdioSession {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = childEnv(t, env...)
	s := &stdioSession{cmd: cmd, stderr: &logtest.Buffer{}}
	cmd.Stderr = s.stderr
	s.tr = &checkedTransport{inner: &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentmesh-e2e", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, s.tr, nil)
	require.NoError(t, err, "stderr:\n%s", s.stderr)
	s.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("agentmesh (stdio) stderr:\n%s", s.stderr)
		}
	})
	return s
}

// close ends the session as an MCP client does (closing stdin), and checks
// that the server exited 0, that stdout held nothing but protocol, and that
// no data race was reported.
func (s *stdioSession) close(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cs.Close())
	_ = s.cs.Wait()
	require.NotNil(t, s.cmd.ProcessState, "the server process was not waited for")
	assert.Equal(t, 0, s.cmd.ProcessState.ExitCode(), "exit code of the stdio server after stdin closed; stderr:\n%s", s.stderr)
	errs, reads := s.tr.readErrors()
	assert.Empty(t, errs, "the client failed to read the server's stdout: something other than protocol was printed")
	assert.Positive(t, reads)
	assert.NotContains(t, s.stderr.String(), "DATA RACE")
}

// helpFlags parses the flag list of a flag.PrintDefaults output: flag name
// → its documentation (the flag's line, then its usage lines).
func helpFlags(help string) map[string]string {
	out := map[string]string{}
	var cur string
	for line := range strings.SplitSeq(help, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			cur = name
			out[cur] = line
		case cur != "" && strings.HasPrefix(line, "    "):
			out[cur] += "\n" + strings.TrimSpace(line)
		default:
			cur = ""
		}
	}
	return out
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// with returns a copy of c reporting to t (for subtests).
func (c *apiClientT) with(t *testing.T) *apiClientT {
	cp := *c
	cp.t = t
	return &cp
}

// connectHTTPMCP connects a go-sdk client to the Streamable HTTP endpoint
// with a bearer token.
func connectHTTPMCP(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentmesh-e2e", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearerTransport{token}},
		MaxRetries: -1,
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// newMCPAgent starts an MCP agent (docs/AGENTS.md#mcp-agents) on an
// httptest server: a
// go-sdk server whose handle_message tool answers an AgentResponse for the
// task (raw_input). It returns the endpoint.
func newMCPAgent(t *testing.T) string {
	t.Helper()
	type args struct {
		RawInput string         `json:"raw_input"`
		Metadata map[string]any `json:"metadata,omitempty"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "helpdesk", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "handle_message", Description: "Handles a message."},
		func(ctx context.Context, req *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
			task, _ := in["raw_input"].(string)
			reply, _ := json.Marshal(map[string]any{"content": "handled: " + task, "workflow_complete": true})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(reply)}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, ln.Close())
	return port
}
