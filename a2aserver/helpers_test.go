package a2aserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/a2aserver"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// callerHeader names the caller in the tests: the middleware in front of
// the handler puts it on the request's context, as the mesh's HTTP server
// puts the token's identity there.
const callerHeader = "X-Test-Caller"

type callerKey struct{}

func callerFrom(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// env is a mesh over a memory store — registry, discovery engine,
// delegation client — whose A2A endpoint runs on an httptest server at
// /a2a, with real HTTP agents on their own httptest servers.
type env struct {
	t      *testing.T
	reg    *registry.Registry
	del    *delegation.Client
	server *httptest.Server
	card   a2a.AgentCard

	mu  sync.Mutex
	got []agentTask // what the agents received
}

// agentTask is the POST /task body an agent received (docs/AGENTS.md#the-request).
type agentTask struct {
	Agent        string         `json:"-"`
	DelegationID string         `json:"delegationId"`
	Task         string         `json:"task"`
	Context      map[string]any `json:"context"`
}

// envConfig tunes newEnv.
type envConfig struct {
	opts       *a2aserver.Options
	transports map[registry.Protocol]delegation.Transport
}

func newEnv(t *testing.T, cfg envConfig) *env {
	t.Helper()
	ctx := context.Background()
	store := memstore.New()
	reg, err := registry.New(ctx, store, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	engine := discovery.New(nil)
	stop := engine.Follow(reg)
	del, err := delegation.New(ctx, reg, store, &delegation.Options{Discovery: engine, Transports: cfg.transports})
	require.NoError(t, err)
	var opts a2aserver.Options
	if cfg.opts != nil {
		opts = *cfg.opts
	}
	if opts.Caller == nil {
		opts.Caller = callerFrom
	}
	h, err := a2aserver.New(engine, del, &opts)
	require.NoError(t, err)

	mux := http.NewServeMux()
	mux.Handle(a2acard.MeshEndpointPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), callerKey{}, r.Header.Get(callerHeader))
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	srv := httptest.NewServer(mux)
	e := &env{t: t, reg: reg, del: del, server: srv, card: a2acard.MeshCard(srv.URL, "test")}
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, del.Close())
		stop()
		_ = reg.Close()
	})
	return e
}

// agent starts an HTTP agent (POST /task contract) answering with reply,
// and registers it.
func (e *env) agent(name string, caps []string, reply func(task agentTask) (status int, body any)) {
	e.t.Helper()
	e.agentHandler(name, caps, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var task agentTask
		if err := json.NewDecoder(r.Body).Decode(&task); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		task.Agent = name
		e.mu.Lock()
		e.got = append(e.got, task)
		e.mu.Unlock()
		status, body := reply(task)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
}

// agentHandler starts an HTTP agent served by h and registers it.
func (e *env) agentHandler(name string, caps []string, h http.Handler) {
	e.t.Helper()
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	e.register(registry.Agent{Name: name, Description: "The " + name + " agent.", Capabilities: caps, Endpoint: srv.URL + "/task"})
}

func (e *env) register(a registry.Agent) {
	e.t.Helper()
	_, _, err := e.reg.Register(context.Background(), a)
	require.NoError(e.t, err)
}

// received returns the tasks the agents received.
func (e *env) received() []agentTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]agentTask(nil), e.got...)
}

// client is an A2A client of the mesh, built from its card as any A2A
// client would be.
func (e *env) client() *a2aclient.Client {
	e.t.Helper()
	c, err := a2aclient.NewFromCard(context.Background(), &e.card)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// as returns a context whose calls name caller.
func as(ctx context.Context, caller string) context.Context {
	return a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{callerHeader: {caller}})
}

// send sends a message with text and metadata and returns the task.
func (e *env) send(ctx context.Context, text string, meta map[string]any) (*a2a.Task, error) {
	e.t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.Metadata = meta
	return e.sendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
}

func (e *env) sendMessage(ctx context.Context, req *a2a.SendMessageRequest) (*a2a.Task, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := e.client().SendMessage(ctx, req)
	if err != nil {
		return nil, err
	}
	task, ok := res.(*a2a.Task)
	require.True(e.t, ok, "SendMessage answered %T, want a task", res)
	return task, nil
}

// statusText is the text of a task's status message.
func statusText(t *a2a.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	var s string
	for _, p := range t.Status.Message.Parts {
		s += p.Text()
	}
	return s
}

// artifact returns the task's artifact called name.
func artifact(t *testing.T, task *a2a.Task, name string) *a2a.Artifact {
	t.Helper()
	for _, a := range task.Artifacts {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("task has no artifact %q: %+v", name, task.Artifacts)
	return nil
}

// a2aError requires err to be an A2A error of kind and returns it.
func a2aError(t *testing.T, err error, kind error) *a2a.Error {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, kind)
	var ae *a2a.Error
	require.ErrorAs(t, err, &ae)
	return ae
}
