package a2aserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
)

// callerCtx is a context whose call is made by name.
func callerCtx(name string) context.Context {
	ctx, cc := a2asrv.NewCallContext(context.Background(), nil)
	cc.User = a2asrv.NewAuthenticatedUser(name, nil)
	return ctx
}

func newTask(id string, state a2a.TaskState, text string) *a2a.Task {
	return &a2a.Task{
		ID: a2a.TaskID(id), ContextID: "ctx-" + id,
		Status:    a2a.TaskStatus{State: state},
		Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart(text)}}},
	}
}

func TestTaskStoreVersionsAndOwners(t *testing.T) {
	clk := clocktest.New(time.Unix(1_000_000, 0))
	s := newTaskStore(time.Hour, 1<<20, clk.Now)
	alice, bob := callerCtx("alice"), callerCtx("bob")

	v, err := s.Create(alice, newTask("t1", a2a.TaskStateSubmitted, "x"))
	require.NoError(t, err)
	assert.Equal(t, taskstore.TaskVersion(1), v)
	_, err = s.Create(alice, newTask("t1", a2a.TaskStateSubmitted, "x"))
	require.ErrorIs(t, err, taskstore.ErrTaskAlreadyExists)

	v, err = s.Update(alice, &taskstore.UpdateRequest{Task: newTask("t1", a2a.TaskStateCompleted, "done"), PrevVersion: 1})
	require.NoError(t, err)
	assert.Equal(t, taskstore.TaskVersion(2), v)
	_, err = s.Update(alice, &taskstore.UpdateRequest{Task: newTask("t1", a2a.TaskStateFailed, "late"), PrevVersion: 1})
	require.ErrorIs(t, err, taskstore.ErrConcurrentModification)
	_, err = s.Update(alice, &taskstore.UpdateRequest{Task: newTask("nope", a2a.TaskStateFailed, "")})
	require.ErrorIs(t, err, a2a.ErrTaskNotFound)

	got, err := s.Get(alice, "t1")
	require.NoError(t, err)
	assert.Equal(t, taskstore.TaskVersion(2), got.Version)
	assert.Equal(t, a2a.TaskStateCompleted, got.Task.Status.State)
	got.Task.Artifacts[0].Parts[0] = a2a.NewTextPart("changed by the caller")
	again, err := s.Get(alice, "t1")
	require.NoError(t, err)
	assert.Equal(t, "done", again.Task.Artifacts[0].Parts[0].Text(), "Get returns copies")

	_, err = s.Get(bob, "t1")
	require.ErrorIs(t, err, a2a.ErrTaskNotFound, "another caller's task is not found")
	list, err := s.List(bob, &a2a.ListTasksRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.Tasks)
}

func TestTaskStoreRetention(t *testing.T) {
	clk := clocktest.New(time.Unix(1_000_000, 0))
	s := newTaskStore(time.Hour, 1<<20, clk.Now)
	ctx := callerCtx("alice")
	_, err := s.Create(ctx, newTask("done", a2a.TaskStateCompleted, "x"))
	require.NoError(t, err)
	_, err = s.Create(ctx, newTask("asking", a2a.TaskStateInputRequired, "x"))
	require.NoError(t, err)
	_, err = s.Create(ctx, newTask("running", a2a.TaskStateWorking, "x"))
	require.NoError(t, err)

	clk.Advance(time.Hour + time.Second)
	for _, id := range []a2a.TaskID{"done", "asking"} {
		_, err := s.Get(ctx, id)
		require.ErrorIs(t, err, a2a.ErrTaskNotFound, "%s is past its retention", id)
	}
	_, err = s.Get(ctx, "running")
	require.NoError(t, err, "a running task is kept")

	_, err = s.Create(ctx, newTask("new", a2a.TaskStateSubmitted, "x")) // a write evicts
	require.NoError(t, err)
	s.mu.Lock()
	assert.Len(t, s.byID, 2)
	assert.Equal(t, 2, s.order.Len())
	s.mu.Unlock()
}

func TestTaskStoreSizeBound(t *testing.T) {
	clk := clocktest.New(time.Unix(1_000_000, 0))
	big := strings.Repeat("x", 1000)
	s := newTaskStore(time.Hour, 3500, clk.Now) // room for three tasks
	ctx := callerCtx("alice")
	_, err := s.Create(ctx, newTask("running", a2a.TaskStateWorking, big))
	require.NoError(t, err)
	for i := range 5 {
		clk.Advance(time.Second)
		_, err := s.Create(ctx, newTask(fmt.Sprint("t", i), a2a.TaskStateCompleted, big))
		require.NoError(t, err)
	}
	for _, id := range []a2a.TaskID{"running", "t3", "t4"} {
		_, err := s.Get(ctx, id)
		require.NoError(t, err, "%s is kept", id)
	}
	for _, id := range []a2a.TaskID{"t0", "t1", "t2"} {
		_, err := s.Get(ctx, id)
		require.ErrorIs(t, err, a2a.ErrTaskNotFound, "%s, the least recently updated, is dropped", id)
	}
	s.mu.Lock()
	assert.LessOrEqual(t, s.bytes, int64(3500))
	s.mu.Unlock()
}

func TestTaskStoreList(t *testing.T) {
	clk := clocktest.New(time.Unix(1_000_000, 0))
	s := newTaskStore(time.Hour, 1<<20, clk.Now)
	ctx := callerCtx("alice")
	for i := range 5 {
		clk.Advance(time.Second)
		state := a2a.TaskStateCompleted
		if i == 2 {
			state = a2a.TaskStateFailed
		}
		_, err := s.Create(ctx, newTask(fmt.Sprint("t", i), state, "x"))
		require.NoError(t, err)
	}
	_, err := s.Create(callerCtx("bob"), newTask("b", a2a.TaskStateCompleted, "x"))
	require.NoError(t, err)

	var ids []a2a.TaskID
	req := &a2a.ListTasksRequest{PageSize: 2}
	for {
		page, err := s.List(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, 5, page.TotalSize)
		for _, task := range page.Tasks {
			ids = append(ids, task.ID)
			assert.Nil(t, task.Artifacts, "artifacts only on request")
		}
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	assert.Equal(t, []a2a.TaskID{"t4", "t3", "t2", "t1", "t0"}, ids, "newest first, every task once")

	page, err := s.List(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateFailed, IncludeArtifacts: true})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	assert.Equal(t, a2a.TaskID("t2"), page.Tasks[0].ID)
	assert.Len(t, page.Tasks[0].Artifacts, 1)

	_, err = s.List(ctx, &a2a.ListTasksRequest{PageToken: "garbage!"})
	require.ErrorIs(t, err, a2a.ErrInvalidParams)
	_, err = s.List(ctx, &a2a.ListTasksRequest{PageSize: 101})
	require.ErrorIs(t, err, a2a.ErrInvalidParams)
}

func TestTaskStoreKeepsTheLastWrite(t *testing.T) {
	clk := clocktest.New(time.Unix(1_000_000, 0))
	s := newTaskStore(time.Hour, 10, clk.Now) // smaller than any task
	ctx := callerCtx("alice")
	_, err := s.Create(ctx, newTask("t1", a2a.TaskStateSubmitted, "x"))
	require.NoError(t, err)
	_, err = s.Update(ctx, &taskstore.UpdateRequest{Task: newTask("t1", a2a.TaskStateCompleted, "done")})
	require.NoError(t, err)
	_, err = s.Get(ctx, "t1")
	require.NoError(t, err, "the task written last stays, for its caller to read")
	_, err = s.Create(ctx, newTask("t2", a2a.TaskStateCompleted, "y"))
	require.NoError(t, err)
	_, err = s.Get(ctx, "t1")
	require.ErrorIs(t, err, a2a.ErrTaskNotFound)
}
