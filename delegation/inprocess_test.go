package delegation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

func (e *env) inprocess(name string, h delegation.Handler) {
	e.t.Helper()
	e.c.Handle(name, h)
	a := e.register(registry.Agent{Name: name, Protocol: registry.ProtocolInProcess,
		Description: "in-process " + name, Capabilities: []string{name}})
	require.Equal(e.t, "inprocess:"+name, a.Endpoint)
}

// In-process agents (docs/AGENTS.md#in-process-agents): a Go handler answers
// an inprocess agent, with the same records and context as any agent.
func TestInProcessHandler(t *testing.T) {
	eng := discovery.New(nil)
	e := newEnv(t, &delegation.Options{Discovery: eng})
	defer eng.Follow(e.reg)()
	tasks := make(chan delegation.Task, 1)
	e.inprocess("calc", func(ctx context.Context, task delegation.Task) (any, error) {
		tasks <- task
		return map[string]int{"sum": 5}, nil
	})
	rec := e.delegate(delegation.Request{Query: "calc", Task: "2+3", SourceAgent: "boss"})
	require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
	assert.Equal(t, "calc", rec.TargetAgent)
	assert.JSONEq(t, `{"sum":5}`, string(rec.Result))
	assert.Equal(t, 1, rec.Attempts)
	task := <-tasks
	assert.Equal(t, rec.ID, task.DelegationID)
	assert.Equal(t, "2+3", task.Task)
	assert.Equal(t, "boss", task.SourceAgent)
	assert.Equal(t, 1, task.Context["depth"])
	assert.Equal(t, []string{"boss"}, task.Context["chain"])
	assert.Equal(t, delegation.StatusCompleted, e.stored(rec.ID).Status)
}

func TestInProcessResults(t *testing.T) {
	e := newEnv(t, nil)
	for name, tc := range map[string]struct {
		v      any
		err    error
		status delegation.Status
		code   string
		result string
		errMsg string
	}{
		"raw":       {v: json.RawMessage(`[1, 2]`), status: delegation.StatusCompleted, result: `[1,2]`},
		"string":    {v: "hello", status: delegation.StatusCompleted, result: `"hello"`},
		"nil":       {v: nil, status: delegation.StatusCompleted, result: `null`},
		"response":  {v: delegation.AgentResponse{Content: "hi", WorkflowComplete: true}, status: delegation.StatusCompleted, result: `"hi"`},
		"badraw":    {v: json.RawMessage(`{`), status: delegation.StatusFailed, code: delegation.CodeBadResponse},
		"unencoded": {v: make(chan int), status: delegation.StatusFailed, code: delegation.CodeBadResponse},
		"toolarge":  {v: strings.Repeat("x", delegation.MaxResultBytes), status: delegation.StatusFailed, code: delegation.CodeResponseTooLarge},
		"error":     {err: errors.New("ledger locked"), status: delegation.StatusFailed, code: delegation.CodeAgentError, errMsg: "ledger locked"},
		"typed": {err: &delegation.TransportError{Code: "quota", Message: "over quota", Retryable: true},
			status: delegation.StatusFailed, code: "quota", errMsg: "over quota"},
	} {
		e.inprocess(name, func(ctx context.Context, task delegation.Task) (any, error) { return tc.v, tc.err })
		rec := e.delegate(delegation.Request{Target: name, Task: "t"})
		assert.Equal(t, tc.status, rec.Status, name)
		assert.Equal(t, tc.code, rec.Code, name)
		assert.Equal(t, 1, rec.Attempts, "%s: handlers are never retried", name)
		if tc.result != "" {
			assert.JSONEq(t, tc.result, string(rec.Result), name)
		}
		if tc.errMsg != "" {
			assert.Equal(t, tc.errMsg, rec.Error, name)
		}
		if name == "response" {
			require.NotNil(t, rec.Response)
			assert.True(t, rec.Response.WorkflowComplete)
		}
	}
}

// A handler panic is recovered into a failed delegation.
func TestInProcessPanic(t *testing.T) {
	e := newEnv(t, nil)
	e.inprocess("crashy", func(ctx context.Context, task delegation.Task) (any, error) {
		var m map[string]int
		m["boom"]++ // nil map write
		return nil, nil
	})
	rec := e.delegate(delegation.Request{Target: "crashy", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentError, rec.Code)
	assert.Contains(t, rec.Error, "in-process handler panicked: assignment to entry in nil map")
}

// The handler's ctx is cancelled at the deadline; a handler that ignores
// it does not hold the delegation past the deadline.
func TestInProcessDeadline(t *testing.T) {
	e := newEnv(t, nil)
	sawDeadline := make(chan error, 1)
	e.inprocess("polite", func(ctx context.Context, task delegation.Task) (any, error) {
		<-ctx.Done()
		sawDeadline <- ctx.Err()
		return nil, ctx.Err()
	})
	release := make(chan struct{})
	defer close(release)
	e.inprocess("rude", func(ctx context.Context, task delegation.Task) (any, error) {
		<-release // ignores ctx
		return "late", nil
	})
	rec := e.delegate(delegation.Request{Target: "polite", Task: "t", Timeout: 50 * time.Millisecond})
	assert.Equal(t, delegation.StatusTimeout, rec.Status)
	assert.ErrorIs(t, <-sawDeadline, context.DeadlineExceeded)

	start := time.Now()
	rec = e.delegate(delegation.Request{Target: "rude", Task: "t", Timeout: 50 * time.Millisecond})
	assert.Equal(t, delegation.StatusTimeout, rec.Status)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestInProcessNoHandler(t *testing.T) {
	e := newEnv(t, nil)
	e.register(registry.Agent{Name: "orphan", Protocol: registry.ProtocolInProcess, Description: "no handler"})
	rec := e.delegate(delegation.Request{Target: "orphan", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentUnreachable, rec.Code)

	e.inprocess("gone", func(context.Context, delegation.Task) (any, error) { return 1, nil })
	e.c.Handle("gone", nil)
	assert.Equal(t, delegation.CodeAgentUnreachable, e.delegate(delegation.Request{Target: "gone", Task: "t"}).Code)
	_, err := e.c.Delegate(context.Background(), delegation.Request{Target: "orphan", Task: "t", Async: true})
	require.NoError(t, err)
}

// In-process agents have breakers like any other.
func TestInProcessBreaker(t *testing.T) {
	set := breaker.NewSet(nil, nil)
	e := newEnv(t, &delegation.Options{Breakers: set})
	var calls atomic.Int64
	e.inprocess("flaky", func(context.Context, delegation.Task) (any, error) {
		calls.Add(1)
		return nil, errors.New("nope")
	})
	for range 5 {
		e.delegate(delegation.Request{Target: "flaky", Task: "t"})
	}
	rec := e.delegate(delegation.Request{Target: "flaky", Task: "t"})
	assert.Equal(t, delegation.CodeAgentUnavailable, rec.Code)
	assert.EqualValues(t, 5, calls.Load())
}

// An async delegation to an in-process agent is accepted at once; the
// handler runs in the background and its result completes the record.
func TestInProcessAsync(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	e.inprocess("worker", func(ctx context.Context, task delegation.Task) (any, error) {
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	rec := e.delegate(delegation.Request{Target: "worker", Task: "t", Async: true})
	require.Equal(t, delegation.StatusAccepted, rec.Status, rec.Error)
	close(release)
	r, err := e.c.Wait(context.Background(), rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, r.Status)
	assert.JSONEq(t, `"done"`, string(r.Result))

	// Cancel stops the handler.
	stopped := make(chan struct{})
	e.inprocess("stuck", func(ctx context.Context, task delegation.Task) (any, error) {
		<-ctx.Done()
		close(stopped)
		return nil, ctx.Err()
	})
	rec = e.delegate(delegation.Request{Target: "stuck", Task: "t", Async: true})
	c, err := e.c.Cancel(context.Background(), rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, c.Status)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's ctx was not cancelled")
	}
	assert.Equal(t, delegation.StatusCanceled, e.stored(rec.ID).Status)

	// The async deadline cancels it too, and the record becomes timeout.
	e.inprocess("stuck2", func(ctx context.Context, task delegation.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	rec = e.delegate(delegation.Request{Target: "stuck2", Task: "t", Async: true, AsyncTimeout: 50 * time.Millisecond})
	r, err = e.c.Wait(context.Background(), rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusTimeout, r.Status)
}
