package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// env is a mesh under test: a real registry over memstore, a discovery
// engine following it, a delegation client whose callbacks are served by
// an httptest "mesh" server, the MCP server over all three, and an MCP
// client connected to it through in-memory transports.
type env struct {
	t      *testing.T
	reg    *registry.Registry
	engine *discovery.Engine
	del    *delegation.Client
	srv    *mcp.Server
	cs     *mcp.ClientSession
	mesh   *httptest.Server

	// release lets the async agent post its callback.
	release     chan struct{}
	releaseOnce sync.Once
	bg          sync.WaitGroup
	// urls of the test agents, by name.
	urls map[string]string
}

// newEnv builds the mesh; seeds are written to the store before the
// registry loads it (so they can be file-managed agents).
func newEnv(t *testing.T, opts *mcpserver.Options, seeds ...registry.Agent) *env {
	t.Helper()
	ctx := context.Background()
	store := memstore.New()
	for _, a := range seeds {
		require.NoError(t, store.UpdateAgent(ctx, a.Name, func(*registry.Agent) (*registry.Agent, error) { return &a, nil }))
	}
	mux := http.NewServeMux()
	mesh := httptest.NewServer(mux)
	t.Cleanup(mesh.Close)
	reg, engine, del := newCore(t, store, registry.Options{}, delegation.Options{PublicURL: mesh.URL})
	mux.Handle("POST /v1/delegations/{id}/result", del.CallbackHandler(nil))

	srv, err := mcpserver.New(reg, engine, del, opts)
	require.NoError(t, err)

	e := &env{t: t, reg: reg, engine: engine, del: del, srv: srv, mesh: mesh, release: make(chan struct{}), urls: map[string]string{}}
	e.cs = connect(t, srv)
	e.startAgents()
	t.Cleanup(func() {
		e.cs.Close()
		e.releaseAsync()
		e.bg.Wait()
	})
	return e
}

// newCore is the mesh core the tools serve: a registry over store (no TTL
// sweeps), a discovery engine following it and a delegation client over
// both (no pruning or rescans), closed at cleanup, the client first.
// regOpts and delOpts add to those settings.
func newCore(t *testing.T, store *memstore.Store, regOpts registry.Options, delOpts delegation.Options) (*registry.Registry, *discovery.Engine, *delegation.Client) {
	t.Helper()
	ctx := context.Background()
	regOpts.SweepInterval = -1
	reg, err := registry.New(ctx, store, &regOpts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	engine := discovery.New(nil)
	t.Cleanup(engine.Follow(reg))
	delOpts.Discovery, delOpts.PruneInterval, delOpts.RescanInterval = engine, -1, -1
	del, err := delegation.New(ctx, reg, store, &delOpts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = del.Close() })
	return reg, engine, del
}

// connect returns a client session to srv over in-memory transports.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	require.NoError(t, err)
	return cs
}

// releaseAsync lets the async agent post its callbacks.
func (e *env) releaseAsync() { e.releaseOnce.Do(func() { close(e.release) }) }

// startAgents starts the test agents (not registered yet):
//
//   - finance answers 200 {"result": {"budget": 1200000, "costCenter": "ENG-42"}}
//   - flaky answers 500 "boom"
//   - reports answers 202 and posts {"status":"completed","result":"Q3 report: 14 pages"}
//     to its callback URL once release is closed
//   - slow holds the request until the client gives up
//   - plain answers 200 with a non-JSON body
func (e *env) startAgents() {
	agents := map[string]http.HandlerFunc{
		"finance": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"result": {"budget": 1200000, "costCenter": "ENG-42"}}`)
		},
		"flaky": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		},
		"reports": func(w http.ResponseWriter, r *http.Request) {
			var task struct {
				CallbackURL string `json:"callbackUrl"`
			}
			_ = json.NewDecoder(r.Body).Decode(&task)
			w.WriteHeader(http.StatusAccepted)
			e.bg.Go(func() {
				<-e.release
				body := `{"status": "completed", "result": "Q3 report: 14 pages"}`
				resp, err := http.Post(task.CallbackURL, "application/json", bytes.NewBufferString(body))
				if err == nil {
					resp.Body.Close()
				}
			})
		},
		"slow": func(w http.ResponseWriter, r *http.Request) {
			// Read the body so that the server notices the client
			// hanging up.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		},
		"plain": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "just text")
		},
	}
	for name, h := range agents {
		ts := httptest.NewServer(h)
		e.t.Cleanup(ts.Close)
		e.urls[name] = ts.URL + "/task"
	}
}

// register registers a test agent directly in the registry.
func (e *env) register(name, description string, capabilities ...string) {
	e.t.Helper()
	endpoint := e.urls[name]
	if endpoint == "" {
		endpoint = "http://127.0.0.1:9/task"
	}
	_, _, err := e.reg.Register(context.Background(), registry.Agent{Name: name, Description: description, Capabilities: capabilities, Endpoint: endpoint})
	require.NoError(e.t, err)
}

// call calls a tool and fails the test on a protocol error.
func (e *env) call(name string, args any) *mcp.CallToolResult {
	e.t.Helper()
	return call(e.t, e.cs, name, args)
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "protocol error calling %s", name)
	return res
}

// ok asserts that res succeeded and decodes its structured content into
// out.
func ok(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	require.False(t, res.IsError, "tool error: %s", text(res))
	require.NotNil(t, res.StructuredContent)
	decode(t, res.StructuredContent, out)
}

// fails asserts that res is an isError result whose text starts with
// "<code>: ", and returns the text.
func fails(t *testing.T, res *mcp.CallToolResult, code string) string {
	t.Helper()
	require.True(t, res.IsError, "expected a tool error %s, got %s", code, text(res))
	txt := text(res)
	require.True(t, strings.HasPrefix(txt, code+": "), "text %q should start with %q", txt, code+": ")
	return txt
}

func decode(t *testing.T, v any, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(out), "decoding %s", b)
}

// text returns the concatenated text content of res.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// readAll reads and closes a response body.
func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}
