package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentGuide is the agent developer guide whose examples
// TestAgentGuideExample checks.
const agentGuide = "../../docs/AGENTS.md"

// TestAgentGuideExample runs the worked example of docs/AGENTS.md against a
// real `agentmesh serve` (routing on, its default) and checks that the
// guide shows what really happens: the registrations of its quick start
// are accepted; the POST /task bodies the billing agent receives on both
// turns have the keys of the guide's blocks, recursively, and its values
// where they are stable (ids, times and durations only have the same
// shape); the agent answers with the guide's reply blocks, byte for byte;
// the POST /v1/request replies and the final session match the guide the
// same way. The guide's ids must be used consistently: one id of the
// guide stands for one id of the run. A third message, answered 202 and
// a callback (the guide's), shows the async path of a routed message.
// Every example block of the guide must be checked.
func TestAgentGuideExample(t *testing.T) {
	t.Parallel()
	ex := guideExamples(t, agentGuide)

	// The billing agent: records each POST /task and answers with the
	// guide's reply block of that turn; the third message it answers
	// asynchronously, with the guide's callback.
	var (
		mu        sync.Mutex
		bodies    [][]byte
		headers   []http.Header
		meshURL   string                 // where the callback URLs really go
		callbacks = make(chan []byte, 1) // the mesh's answers to the callback
	)
	replies := [][]byte{ex.raw(t, "turn1-reply"), ex.raw(t, "turn2-reply")}
	callback := ex.raw(t, "async-callback")
	billing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.URL.Path != "/task" {
			http.Error(w, "want POST /task", http.StatusBadRequest)
			return
		}
		mu.Lock()
		n := len(bodies)
		bodies, headers = append(bodies, body), append(headers, r.Header.Clone())
		base := meshURL
		mu.Unlock()
		switch {
		case n < len(replies):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(replies[n])
		case n == len(replies):
			var task taskRequest
			if json.Unmarshal(body, &task) != nil || task.CallbackURL == "" {
				http.Error(w, "no callbackUrl", http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusAccepted)
			// The callback URL names the guide's public URL; the test's
			// mesh listens elsewhere.
			target := strings.Replace(task.CallbackURL, "http://localhost:8766", base, 1)
			go func() {
				resp, err := http.Post(target, "application/json", bytes.NewReader(callback))
				if err != nil {
					callbacks <- []byte(err.Error())
					return
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				callbacks <- out
			}()
		default:
			http.Error(w, "the example has three messages", http.StatusConflict)
		}
	}))
	t.Cleanup(billing.Close)
	// The default agent must not be asked anything in this example.
	general := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the default agent was called: %s %s", r.Method, r.URL)
		http.Error(w, "unexpected", http.StatusInternalServerError)
	}))
	t.Cleanup(general.Close)

	// The guide's callback URLs name http://localhost:8766, the default
	// public URL of a serve on its default port.
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{
		"--allow-private-endpoints", "--store", "memory", "--public-url", "http://localhost:8766"}})
	c := p.client()
	mu.Lock()
	meshURL = p.url
	mu.Unlock()

	for name, endpoint := range map[string]string{"register-general": general.URL + "/task", "register-billing": billing.URL + "/task"} {
		body := ex.object(t, name)
		require.Equal(t, "http://localhost:9101/task", body["endpoint"], "%s: the guide's agents listen at the minimal agent's address", name)
		body["endpoint"] = endpoint
		r := c.do(http.MethodPost, "/v1/agents", body)
		require.Equal(t, http.StatusCreated, r.status, "%s: %s", name, r)
	}

	ids := newIDMap()
	route := func(turn string) map[string]any {
		t.Helper()
		r := c.do(http.MethodPost, "/v1/request", ex.object(t, turn+"-call"))
		require.Equal(t, http.StatusOK, r.status, "%s: %s", turn, r)
		got := r.obj(t)
		ex.match(t, turn+"-response", got, ids)
		return got
	}
	resp1 := route("turn1")
	resp2 := route("turn2")

	mu.Lock()
	gotBodies, gotHeaders := slices.Clone(bodies), slices.Clone(headers)
	mu.Unlock()
	require.Len(t, gotBodies, 2, "the billing agent answers both turns")
	for i, turn := range []string{"turn1", "turn2"} {
		var got map[string]any
		require.NoError(t, json.Unmarshal(gotBodies[i], &got), "%s body: %s", turn, gotBodies[i])
		ex.match(t, turn+"-task", got, ids)

		// The headers the guide lists.
		h := gotHeaders[i]
		assert.Equal(t, "application/json", h.Get("Content-Type"), turn)
		assert.Equal(t, got["delegationId"], h.Get("X-Mesh-Delegation-Id"), "%s: the header repeats the body's delegationId", turn)
		assert.True(t, strings.HasPrefix(h.Get("User-Agent"), "agentmesh/"), "%s: User-Agent %q", turn, h.Get("User-Agent"))
		assert.Equal(t, "Bearer billing-secret", h.Get("Authorization"), "%s: the agent's auth", turn)
		// The request's delegation is the one POST /v1/request names.
		resp := []map[string]any{resp1, resp2}[i]
		assert.Equal(t, resp["delegation_id"], got["delegationId"], turn)
	}

	sid, _ := resp1["session_id"].(string)
	r := c.do(http.MethodGet, "/v1/sessions/"+sid, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	ex.match(t, "session", r.obj(t), ids)

	// Once the workflow is complete, the next message is classified again
	// and opens a new session. The agent answers it 202 and calls back:
	// the mesh holds the request until the callback, whose
	// workflowComplete, next to its result, ends this conversation too.
	r = c.do(http.MethodPost, "/v1/request", ex.object(t, "async-call"))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	resp3 := r.obj(t)
	assert.NotEqual(t, sid, resp3["session_id"], "a new conversation after workflowComplete")
	assert.Equal(t, "billing", resp3["agent_id"], "%s", r)
	var cb struct {
		Result string `json:"result"`
	}
	require.NoError(t, json.Unmarshal(callback, &cb))
	assert.Equal(t, cb.Result, resp3["response"], "the callback's result is the answer: %s", r)
	assert.Equal(t, true, resp3["workflow_complete"], "%s", r)
	var ack map[string]any
	select {
	case out := <-callbacks:
		require.NoError(t, json.Unmarshal(out, &ack), "the callback's answer: %s", out)
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's callback got no answer")
	}
	ex.match(t, "async-callback-reply", ack, ids)
	assert.Equal(t, resp3["delegation_id"], ack["id"])

	for name := range ex.blocks {
		assert.Contains(t, ex.used, name, "%s: example %s is checked by nothing", ex.file, name)
	}
	p.stop()
}

// examples are the example blocks of a markdown file: the code block
// after each "<!-- example: NAME -->" comment, by NAME.
type examples struct {
	file   string
	blocks map[string]exampleBlock
	used   map[string]bool // the blocks read so far
}

type exampleBlock struct {
	lang string // the fence's info string: json, sh
	text string
	line int
}

var exampleMarker = regexp.MustCompile(`^<!-- example: ([a-z0-9-]+) -->$`)

// guideExamples reads the example blocks of path.
func guideExamples(t *testing.T, path string) *examples {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	ex := &examples{file: path, blocks: map[string]exampleBlock{}, used: map[string]bool{}}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		m := exampleMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		name := m[1]
		require.NotContains(t, ex.blocks, name, "%s:%d: example %s appears twice", path, i+1, name)
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		require.Less(t, j, len(lines), "%s:%d: no code block after example %s", path, i+1, name)
		// A block in a list item is indented: its lines lose the
		// fence's indentation.
		fence := strings.TrimLeft(lines[j], " ")
		indent := lines[j][:len(lines[j])-len(fence)]
		require.True(t, strings.HasPrefix(fence, "```"), "%s:%d: example %s must be followed by a code block", path, j+1, name)
		b := exampleBlock{lang: strings.TrimPrefix(fence, "```"), line: j + 1}
		var text []string
		for j++; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```"); j++ {
			text = append(text, strings.TrimPrefix(lines[j], indent))
		}
		require.Less(t, j, len(lines), "%s:%d: example %s: unterminated code block", path, b.line, name)
		b.text = strings.Join(text, "\n") + "\n"
		ex.blocks[name] = b
		i = j
	}
	return ex
}

// curlData is the JSON payload of the first `-d '...'` of a curl command.
var curlData = regexp.MustCompile(`(?s)-d '([^']*)'`)

// raw returns the JSON of example name: a json block as written, or the
// -d payload of a sh block (a curl command).
func (ex *examples) raw(t *testing.T, name string) []byte {
	t.Helper()
	b, ok := ex.blocks[name]
	require.True(t, ok, "%s has no example %q", ex.file, name)
	ex.used[name] = true
	text := b.text
	switch b.lang {
	case "json":
	case "sh":
		m := curlData.FindStringSubmatch(text)
		require.NotNil(t, m, "%s:%d: example %s: no -d '...' payload", ex.file, b.line, name)
		text = m[1]
	default:
		t.Fatalf("%s:%d: example %s: want a json or sh block, got %q", ex.file, b.line, name, b.lang)
	}
	require.True(t, json.Valid([]byte(text)), "%s:%d: example %s is not valid JSON:\n%s", ex.file, b.line, name, text)
	return []byte(text)
}

// object returns example name decoded as a JSON object.
func (ex *examples) object(t *testing.T, name string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(ex.raw(t, name)))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m), "%s: example %s", ex.file, name)
	return m
}

// match checks got against example name: the same keys at every level
// and arrays of the same length; equal values, except for the fields
// whose value changes from run to run (variableKeys), which must have the
// same shape, with ids mapped consistently through ids.
func (ex *examples) match(t *testing.T, name string, got map[string]any, ids *idMap) {
	t.Helper()
	var want any
	require.NoError(t, json.Unmarshal(ex.raw(t, name), &want))
	var diffs []string
	compareJSON("", want, roundTrip(t, got), ids, &diffs)
	if len(diffs) > 0 {
		pretty, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("%s:%d: example %s does not match what the mesh does:\n  %s\nwhat it does:\n%s",
			ex.file, ex.blocks[name].line, name, strings.Join(diffs, "\n  "), pretty)
	}
}

// roundTrip decodes v's JSON with plain float64 numbers, as the guide's
// blocks are decoded.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

// variableKeys are the fields whose values change from run to run, with
// the shape their values must have: by key, by the last two segments of
// their path, or (starting with a dot) by their whole path.
var variableKeys = map[string]string{
	".id":            "uuid", // the callback's answer
	"delegationId":   "uuid",
	"delegation_id":  "uuid",
	"request_id":     "uuid",
	"session_id":     "uuid",
	"session.id":     "uuid",
	"callbackUrl":    "callback",
	"time":           "time",
	"timestamp":      "time",
	"created_at":     "time",
	"updated_at":     "time",
	"expires_at":     "time",
	"duration_ms":    "number",
	"confidence":     "number",
	"routing.reason": "text-with-numbers",
}

var (
	uuidRE     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	timeRE     = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$`)
	callbackRE = regexp.MustCompile(`^http://localhost:8766/v1/delegations/([0-9a-f-]{36})/result\?token=[A-Z2-7]{26}$`)
	numberRE   = regexp.MustCompile(`\d+(\.\d+)?`)
)

// compareJSON appends to diffs every difference between the guide's value
// want and the run's got at path.
func compareJSON(path string, want, got any, ids *idMap, diffs *[]string) {
	key := path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		key = path[i+1:]
	}
	// The most specific entry wins: the whole path, the last two
	// segments, the key.
	shape, variable := variableKeys[path]
	if !variable {
		shape, variable = variableKeys[strings.TrimPrefix(lastTwo(path), ".")]
	}
	if !variable {
		shape, variable = variableKeys[key]
	}
	if variable {
		if d := compareShape(shape, want, got, ids); d != "" {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s", path, d))
		}
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: want an object, got %s", path, jsonText(got)))
			return
		}
		for k := range w {
			if _, ok := g[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s: the guide has key %q, the mesh does not send it", path, k))
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s: the mesh sends key %q, the guide does not show it", path, k))
			}
		}
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				compareJSON(path+"."+k, wv, gv, ids, diffs)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*diffs = append(*diffs, fmt.Sprintf("%s: want %d items, got %s", path, len(w), jsonText(got)))
			return
		}
		for i := range w {
			compareJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], ids, diffs)
		}
	default:
		if !jsonEqual(want, got) {
			*diffs = append(*diffs, fmt.Sprintf("%s: the guide has %s, the mesh %s", path, jsonText(want), jsonText(got)))
		}
	}
}

// lastTwo returns the last two segments of a path (".routing.reason").
func lastTwo(path string) string {
	parts := strings.Split(path, ".")
	if len(parts) < 2 {
		return path
	}
	return strings.Join(parts[len(parts)-2:], ".")
}

// compareShape checks that the run's got has the shape of the guide's
// want, and maps ids consistently.
func compareShape(shape string, want, got any, ids *idMap) string {
	ws, wok := want.(string)
	gs, gok := got.(string)
	switch shape {
	case "uuid":
		if !wok || !gok || !uuidRE.MatchString(ws) || !uuidRE.MatchString(gs) {
			return fmt.Sprintf("want UUIDs, the guide has %s, the mesh %s", jsonText(want), jsonText(got))
		}
		return ids.pair(ws, gs)
	case "callback":
		wm, gm := callbackRE.FindStringSubmatch(ws), callbackRE.FindStringSubmatch(gs)
		if !wok || !gok || wm == nil || gm == nil {
			return fmt.Sprintf("want callback URLs, the guide has %s, the mesh %s", jsonText(want), jsonText(got))
		}
		return ids.pair(wm[1], gm[1])
	case "time":
		if !wok || !gok || !timeRE.MatchString(ws) || !timeRE.MatchString(gs) {
			return fmt.Sprintf("want RFC 3339 UTC times, the guide has %s, the mesh %s", jsonText(want), jsonText(got))
		}
	case "number":
		_, wn := want.(float64)
		_, gn := got.(float64)
		if !wn || !gn {
			return fmt.Sprintf("want numbers, the guide has %s, the mesh %s", jsonText(want), jsonText(got))
		}
	case "text-with-numbers":
		if !wok || !gok || numberRE.ReplaceAllString(ws, "N") != numberRE.ReplaceAllString(gs, "N") {
			return fmt.Sprintf("the guide has %s, the mesh %s (numbers aside)", jsonText(want), jsonText(got))
		}
	}
	return ""
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// idMap pairs the guide's ids with the run's, one to one: the guide must
// use one id wherever the mesh uses one.
type idMap struct {
	toRun, toGuide map[string]string
}

func newIDMap() *idMap { return &idMap{toRun: map[string]string{}, toGuide: map[string]string{}} }

func (m *idMap) pair(guide, run string) string {
	if r, ok := m.toRun[guide]; ok && r != run {
		return fmt.Sprintf("the guide's id %s stands for two ids of the run (%s and %s)", guide, r, run)
	}
	if g, ok := m.toGuide[run]; ok && g != guide {
		return fmt.Sprintf("the run's id %s appears in the guide as %s and as %s", run, g, guide)
	}
	m.toRun[guide], m.toGuide[run] = run, guide
	return ""
}
