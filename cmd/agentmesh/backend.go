package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

// backend is what the MCP tools need from a mesh: this process's own
// (inproc), or one behind the HTTP API — the local holder's Unix socket or
// a remote `agentmesh serve` (remote).
type backend interface {
	mcpserver.Registry
	mcpserver.Delegations
	mcpserver.Router
	discovery.Searcher
	mcpserver.ContextSearcher
}

// inproc is the mesh of this process.
type inproc struct{ m *mesh }

func (b inproc) Register(ctx context.Context, a registry.Agent) (registry.Agent, bool, error) {
	return b.m.Registry().Register(ctx, a)
}

func (b inproc) List(ctx context.Context, opts registry.ListOptions) (registry.Page, error) {
	return b.m.Registry().List(ctx, opts)
}

func (b inproc) Delete(ctx context.Context, name string) error {
	return b.m.Registry().Delete(ctx, name)
}

func (b inproc) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	return b.m.Engine().Search(query, q)
}

func (b inproc) SearchContext(ctx context.Context, query string, q *discovery.Query) ([]discovery.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.m.Engine().Search(query, q)
}

func (b inproc) Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error) {
	return b.m.Delegation().Delegate(ctx, req)
}

func (b inproc) Get(ctx context.Context, id string) (delegation.Record, error) {
	return b.m.Delegation().Get(ctx, id)
}

func (b inproc) Wait(ctx context.Context, id string) (delegation.Record, error) {
	return b.m.Delegation().Wait(ctx, id)
}

func (b inproc) Handle(ctx context.Context, req routing.Request) (routing.Response, error) {
	if b.m.Router() == nil {
		return routing.Response{}, errRoutingOff
	}
	return b.m.Router().Handle(ctx, req)
}

// remote is a mesh behind its HTTP API.
type remote struct {
	c *client.Client
}

func (b remote) Register(ctx context.Context, a registry.Agent) (registry.Agent, bool, error) {
	return b.c.Register(ctx, a)
}

func (b remote) List(ctx context.Context, opts registry.ListOptions) (registry.Page, error) {
	return b.c.List(ctx, opts)
}

func (b remote) Delete(ctx context.Context, name string) error { return b.c.Delete(ctx, name) }

// Search is for callers without a context; the tools use SearchContext.
func (b remote) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	return b.c.Search(context.Background(), query, q)
}

func (b remote) SearchContext(ctx context.Context, query string, q *discovery.Query) ([]discovery.Result, error) {
	return b.c.Search(ctx, query, q)
}

func (b remote) Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error) {
	return b.c.Delegate(ctx, req)
}

func (b remote) Get(ctx context.Context, id string) (delegation.Record, error) {
	return b.c.Delegation(ctx, id)
}

func (b remote) Wait(ctx context.Context, id string) (delegation.Record, error) {
	return b.c.WaitDelegation(ctx, id)
}

func (b remote) Handle(ctx context.Context, req routing.Request) (routing.Response, error) {
	resp, err := b.c.Route(ctx, req)
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		return resp, errRoutingOff // the server has no POST /v1/request
	}
	return resp, err
}

// codedError is a failure of this layer with the code the tools show.
type codedError struct {
	code string
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// Describe makes the tools show the code and message as they are.
func (e *codedError) Describe() (code, message string) { return e.code, e.msg }

var errRoutingOff = &codedError{code: mcpserver.CodeUnavailable,
	msg: "routing is not enabled on this mesh (agentmesh serve enables it with --agents)"}

// errNoMesh is the failure of a call that found no mesh to talk to within
// switchWait: the holder of the store exited and no process took it over.
var errNoMesh = &codedError{code: mcpserver.CodeUnavailable,
	msg: "the local mesh is changing hands (its holder process exited) and no process took it over in time; try again"}

// errLostMidCall is the failure of a call that cannot be repeated safely
// (a delegation, a routed message) when the mesh holding it went away
// before answering: it may or may not have run.
var errLostMidCall = &codedError{code: mcpserver.CodeUnavailable,
	msg: "the process holding the local mesh exited during the call, so it may or may not have run; check mesh_get_delegation or the agent, then try again"}

// switchWait bounds how long a call waits for a mesh while the local
// store changes hands.
const switchWait = 10 * time.Second

// switcher is the backend of a stdio process that shares a store: it
// forwards to the current mesh (its own while it holds the store, the
// holder's over the socket otherwise) and carries calls across a change
// of holder. A call that finds no mesh waits for one (up to switchWait); a
// call that fails because the holder died is repeated once on the next
// mesh when that is safe (reads, upserts, deletes, and anything whose
// request was never sent), and otherwise fails with a retryable
// unavailable error. Safe for concurrent use.
type switcher struct {
	mu    sync.Mutex
	cur   backend       // nil while switching
	ready chan struct{} // closed when cur is set
	lost  chan struct{} // signalled when a call finds cur unreachable
	wait  time.Duration
}

func newSwitcher() *switcher {
	return &switcher{ready: make(chan struct{}), lost: make(chan struct{}, 1), wait: switchWait}
}

// set makes b the current mesh; nil means none until the next set.
func (s *switcher) set(b backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b == nil {
		if s.cur != nil {
			s.cur = nil
			s.ready = make(chan struct{})
		}
		return
	}
	if s.cur == nil {
		close(s.ready)
	}
	s.cur = b
}

// get returns the current mesh, waiting for one while there is none.
func (s *switcher) get(ctx context.Context) (backend, error) {
	s.mu.Lock()
	cur, ready := s.cur, s.ready
	s.mu.Unlock()
	if cur != nil {
		return cur, nil
	}
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case <-ready:
		return s.get(ctx)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, errNoMesh
	}
}

// failed is told that b did not answer: if it is still current, it is
// dropped and the process looking after the store is woken.
func (s *switcher) failed(b backend) {
	s.mu.Lock()
	if s.cur == b {
		s.cur = nil
		s.ready = make(chan struct{})
	}
	s.mu.Unlock()
	select {
	case s.lost <- struct{}{}:
	default:
	}
}

// unreached reports whether err means the mesh did not answer, and
// whether the request was certainly never sent.
func unreached(err error) (gone, unsent bool) {
	if !errors.Is(err, client.ErrUnreachable) {
		return false, false
	}
	var op *net.OpError
	return true, errors.As(err, &op) && op.Op == "dial"
}

// forward runs f on the current mesh; safe says f may be repeated after a
// failure without a response.
func forward[T any](ctx context.Context, s *switcher, safe bool, f func(backend) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		b, err := s.get(ctx)
		if err != nil {
			return zero, err
		}
		v, err := f(b)
		gone, unsent := unreached(err)
		if !gone {
			return v, err
		}
		s.failed(b)
		switch {
		case attempt > 0:
			return zero, fmt.Errorf("%w (%w)", errNoMesh, err)
		case !safe && !unsent:
			return zero, errLostMidCall
		}
	}
}

func (s *switcher) Register(ctx context.Context, a registry.Agent) (registry.Agent, bool, error) {
	type reply struct {
		a       registry.Agent
		created bool
	}
	r, err := forward(ctx, s, true, func(b backend) (reply, error) {
		a, created, err := b.Register(ctx, a)
		return reply{a, created}, err
	})
	return r.a, r.created, err
}

func (s *switcher) List(ctx context.Context, opts registry.ListOptions) (registry.Page, error) {
	return forward(ctx, s, true, func(b backend) (registry.Page, error) { return b.List(ctx, opts) })
}

func (s *switcher) Delete(ctx context.Context, name string) error {
	_, err := forward(ctx, s, true, func(b backend) (struct{}, error) { return struct{}{}, b.Delete(ctx, name) })
	return err
}

// Search is for callers without a context; the tools use SearchContext.
func (s *switcher) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	return s.SearchContext(context.Background(), query, q)
}

func (s *switcher) SearchContext(ctx context.Context, query string, q *discovery.Query) ([]discovery.Result, error) {
	return forward(ctx, s, true, func(b backend) ([]discovery.Result, error) { return b.SearchContext(ctx, query, q) })
}

func (s *switcher) Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error) {
	return forward(ctx, s, false, func(b backend) (delegation.Record, error) { return b.Delegate(ctx, req) })
}

func (s *switcher) Get(ctx context.Context, id string) (delegation.Record, error) {
	return forward(ctx, s, true, func(b backend) (delegation.Record, error) { return b.Get(ctx, id) })
}

func (s *switcher) Wait(ctx context.Context, id string) (delegation.Record, error) {
	return forward(ctx, s, true, func(b backend) (delegation.Record, error) { return b.Wait(ctx, id) })
}

func (s *switcher) Handle(ctx context.Context, req routing.Request) (routing.Response, error) {
	return forward(ctx, s, false, func(b backend) (routing.Response, error) { return b.Handle(ctx, req) })
}
