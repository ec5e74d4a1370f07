package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/localsock"
	"github.com/agentmesh/agentmesh/registry"
)

// fakeMesh is a backend whose calls fail with err (nil: succeed), and
// which counts them.
type fakeMesh struct {
	backend // the methods a test does not call stay unimplemented
	mu      sync.Mutex
	calls   int
	err     error
}

func (f *fakeMesh) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeMesh) call() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.err
}

func (f *fakeMesh) Register(_ context.Context, a registry.Agent) (registry.Agent, bool, error) {
	return a, true, f.call()
}

func (f *fakeMesh) Delegate(_ context.Context, req delegation.Request) (delegation.Record, error) {
	return delegation.Record{Task: req.Task, Status: delegation.StatusCompleted}, f.call()
}

var (
	errGoneAfterSend = fmt.Errorf("%w: %w", client.ErrUnreachable, errors.New("EOF"))
	errNeverSent     = fmt.Errorf("%w: %w", client.ErrUnreachable, &net.OpError{Op: "dial", Net: "unix", Err: errors.New("connection refused")})
)

func codeOf(t *testing.T, err error) string {
	t.Helper()
	var ce interface{ Describe() (string, string) }
	require.ErrorAs(t, err, &ce)
	code, _ := ce.Describe()
	return code
}

func TestSwitcherRepeatsSafeCallsOnTheNextMesh(t *testing.T) {
	s := newSwitcher()
	dead, next := &fakeMesh{err: errGoneAfterSend}, &fakeMesh{}
	s.set(dead)
	go func() {
		<-s.lost // the failed call wakes whoever looks after the store
		s.set(next)
	}()
	a, created, err := s.Register(context.Background(), registry.Agent{Name: "x"})
	require.NoError(t, err)
	assert.Equal(t, "x", a.Name)
	assert.True(t, created)
	assert.Equal(t, 1, dead.count())
	assert.Equal(t, 1, next.count(), "repeated once on the next mesh")
}

func TestSwitcherDoesNotRepeatASentDelegation(t *testing.T) {
	s := newSwitcher()
	dead, next := &fakeMesh{err: errGoneAfterSend}, &fakeMesh{}
	s.set(dead)
	go func() { <-s.lost; s.set(next) }()
	_, err := s.Delegate(context.Background(), delegation.Request{Task: "t"})
	require.ErrorIs(t, err, errLostMidCall)
	assert.Equal(t, "unavailable", codeOf(t, err))
	assert.Equal(t, 0, next.count(), "a delegation that may have run is not sent again")
}

func TestSwitcherRepeatsAnUnsentDelegation(t *testing.T) {
	s := newSwitcher()
	dead, next := &fakeMesh{err: errNeverSent}, &fakeMesh{}
	s.set(dead)
	go func() { <-s.lost; s.set(next) }()
	rec, err := s.Delegate(context.Background(), delegation.Request{Task: "t"})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.Equal(t, 1, next.count())
}

func TestSwitcherRepeatsOnlyOnce(t *testing.T) {
	s := newSwitcher()
	first, second := &fakeMesh{err: errGoneAfterSend}, &fakeMesh{err: errGoneAfterSend}
	s.set(first)
	go func() { <-s.lost; s.set(second) }()
	_, _, err := s.Register(context.Background(), registry.Agent{Name: "x"})
	require.ErrorIs(t, err, errNoMesh)
	assert.Equal(t, "unavailable", codeOf(t, err))
	assert.Equal(t, 1, second.count())
}

func TestSwitcherWaitsForAMesh(t *testing.T) {
	s := newSwitcher()
	s.wait = 50 * time.Millisecond
	start := time.Now()
	_, _, err := s.Register(context.Background(), registry.Agent{Name: "x"})
	require.ErrorIs(t, err, errNoMesh, "no mesh within the wait: a retryable error, not a hang")
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = s.Register(ctx, registry.Agent{Name: "x"})
	require.ErrorIs(t, err, context.Canceled)

	s.wait = 5 * time.Second
	m := &fakeMesh{}
	time.AfterFunc(20*time.Millisecond, func() { s.set(m) })
	_, _, err = s.Register(context.Background(), registry.Agent{Name: "x"})
	require.NoError(t, err, "a call made while switching goes to the next mesh")
	assert.Equal(t, 1, m.count())
}

// TestWatchHolderTimesOut: a process that accepts on the socket but never
// answers is not taken for a holder.
func TestWatchHolderTimesOut(t *testing.T) {
	dir, err := os.MkdirTemp("", "wh")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	path, err := localsock.Path(filepath.Join(dir, "mesh.db"))
	require.NoError(t, err)
	ln, err := localsock.Listen(path, nil)
	require.NoError(t, err)
	defer ln.Close()
	hung := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })}
	go func() { _ = hung.Serve(ln) }()
	defer hung.Close()

	start := time.Now()
	_, err = watchHolder(context.Background(), socketHTTP(path))
	require.Error(t, err)
	assert.Less(t, time.Since(start), watchTimeout+2*time.Second)
	assert.GreaterOrEqual(t, time.Since(start), watchTimeout)
}
