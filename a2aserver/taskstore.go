package a2aserver

import (
	"cmp"
	"container/list"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// List page sizes of ListTasks.
const (
	defaultListPageSize = 50
	maxListPageSize     = 100
	// defaultListHistory is the history kept per listed task when the
	// request does not say.
	defaultListHistory = 100
)

// taskStore is the server's [taskstore.Store]: tasks in memory, kept as
// JSON (so every read is a deep copy and the memory held is known), each
// visible only to the caller that created it (the user of the call
// context), and bounded. A task that is not running is dropped once its
// last update is older than retention, and the least recently updated
// ones go first while the total size is over maxBytes. Running tasks
// (submitted, working) are never dropped: their execution still writes
// them.
//
// The SDK's in-memory store keeps every task forever and lets any caller
// read any task by id, which does not suit a long-running shared server.
type taskStore struct {
	retention time.Duration
	maxBytes  int64
	now       func() time.Time

	mu    sync.Mutex
	byID  map[a2a.TaskID]*list.Element // of *storedTask
	order *list.List                   // least recently updated first
	bytes int64
}

var _ taskstore.Store = (*taskStore)(nil)

// storedTask is one task of the store.
type storedTask struct {
	id        a2a.TaskID
	owner     string
	contextID string
	state     a2a.TaskState
	stateTime time.Time // the status timestamp, for ListTasks
	data      []byte    // the task as JSON
	version   taskstore.TaskVersion
	updated   time.Time
}

func newTaskStore(retention time.Duration, maxBytes int64, now func() time.Time) *taskStore {
	return &taskStore{
		retention: retention,
		maxBytes:  maxBytes,
		now:       now,
		byID:      make(map[a2a.TaskID]*list.Element),
		order:     list.New(),
	}
}

// callerOf returns the name of the user of ctx's call context: the owner
// of the tasks the call creates, and the only caller that can read them.
func callerOf(ctx context.Context) string {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil {
		return cc.User.Name
	}
	return ""
}

// running reports whether a task in state s still has an execution that
// writes it.
func running(s a2a.TaskState) bool {
	return s == a2a.TaskStateSubmitted || s == a2a.TaskStateWorking
}

// Create implements [taskstore.Store].
func (s *taskStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	data, err := json.Marshal(task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("a2aserver: encoding task: %w", err)
	}
	now := s.now()
	st := &storedTask{id: task.ID, owner: callerOf(ctx), version: 1, updated: now}
	st.set(task, data)

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[task.ID]; ok {
		return taskstore.TaskVersionMissing, taskstore.ErrTaskAlreadyExists
	}
	s.byID[task.ID] = s.order.PushBack(st)
	s.bytes += int64(len(data))
	s.evict(now)
	return st.version, nil
}

// Update implements [taskstore.Store].
func (s *taskStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	data, err := json.Marshal(req.Task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("a2aserver: encoding task: %w", err)
	}
	now := s.now()

	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[req.Task.ID]
	if !ok {
		return taskstore.TaskVersionMissing, a2a.ErrTaskNotFound
	}
	st := el.Value.(*storedTask)
	if req.PrevVersion != taskstore.TaskVersionMissing && req.PrevVersion != st.version {
		return taskstore.TaskVersionMissing, taskstore.ErrConcurrentModification
	}
	s.bytes += int64(len(data) - len(st.data))
	st.set(req.Task, data)
	st.version++
	st.updated = now
	s.order.MoveToBack(el)
	s.evict(now)
	return st.version, nil
}

// Get implements [taskstore.Store]. A task of another caller, or one past
// its retention, is not found.
func (s *taskStore) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	owner, now := callerOf(ctx), s.now()
	s.mu.Lock()
	el, ok := s.byID[id]
	var (
		data    []byte
		version taskstore.TaskVersion
	)
	if ok {
		st := el.Value.(*storedTask)
		ok = st.owner == owner && !s.expired(st, now)
		data, version = st.data, st.version
	}
	s.mu.Unlock()
	if !ok {
		return nil, a2a.ErrTaskNotFound
	}
	var task a2a.Task
	if err := json.Unmarshal(data, &task); err != nil {
		return nil, fmt.Errorf("a2aserver: decoding task: %w", err)
	}
	return &taskstore.StoredTask{Task: &task, Version: version}, nil
}

// List implements [taskstore.Store]: the caller's tasks, most recently
// updated first.
func (s *taskStore) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	size := req.PageSize
	switch {
	case size == 0:
		size = defaultListPageSize
	case size < 1 || size > maxListPageSize:
		return nil, invalidParams("pageSize: must be from 1 to %d", maxListPageSize)
	}
	var after *pageCursor
	if req.PageToken != "" {
		c, err := parsePageToken(req.PageToken)
		if err != nil {
			return nil, err
		}
		after = &c
	}

	type hit struct {
		id      a2a.TaskID
		updated time.Time
		data    []byte
	}
	owner, now := callerOf(ctx), s.now()
	var hits []hit
	s.mu.Lock()
	for el := s.order.Front(); el != nil; el = el.Next() {
		st := el.Value.(*storedTask)
		switch {
		case st.owner != owner, s.expired(st, now),
			req.ContextID != "" && st.contextID != req.ContextID,
			req.Status != a2a.TaskStateUnspecified && st.state != req.Status,
			req.StatusTimestampAfter != nil && st.stateTime.Before(*req.StatusTimestampAfter):
			continue
		}
		hits = append(hits, hit{st.id, st.updated, st.data})
	}
	s.mu.Unlock()

	slices.SortFunc(hits, func(a, b hit) int {
		if c := b.updated.Compare(a.updated); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	page := hits
	if after != nil {
		i, _ := slices.BinarySearchFunc(hits, *after, func(h hit, c pageCursor) int {
			if x := c.updated.Compare(h.updated); x != 0 {
				return x
			}
			return cmp.Compare(c.id, h.id)
		})
		for i < len(hits) && hits[i].updated.Equal(after.updated) && hits[i].id == after.id {
			i++
		}
		page = hits[i:]
	}
	resp := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, TotalSize: len(hits), PageSize: size}
	if len(page) > size {
		last := page[size-1]
		resp.NextPageToken = pageCursor{last.updated, last.id}.token()
		page = page[:size]
	}
	history := defaultListHistory
	if req.HistoryLength != nil {
		history = *req.HistoryLength
	}
	for _, h := range page {
		var t a2a.Task
		if err := json.Unmarshal(h.data, &t); err != nil {
			return nil, fmt.Errorf("a2aserver: decoding task: %w", err)
		}
		if history >= 0 && len(t.History) > history {
			t.History = t.History[len(t.History)-history:]
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		resp.Tasks = append(resp.Tasks, &t)
	}
	return resp, nil
}

// set records the task's data and the fields the store filters on.
func (st *storedTask) set(t *a2a.Task, data []byte) {
	st.data = data
	st.contextID = t.ContextID
	st.state = t.Status.State
	st.stateTime = time.Time{}
	if t.Status.Timestamp != nil {
		st.stateTime = *t.Status.Timestamp
	}
}

// expired reports whether st is past its retention at now.
func (s *taskStore) expired(st *storedTask, now time.Time) bool {
	return !running(st.state) && now.Sub(st.updated) > s.retention
}

// evict drops, least recently updated first, the tasks that are not
// running while they are past their retention or the store is over its
// size. It keeps the task written last, whose blocking caller is about to
// read it back. The caller holds s.mu.
func (s *taskStore) evict(now time.Time) {
	last := s.order.Back()
	for el := s.order.Front(); el != nil && el != last; {
		next := el.Next()
		st := el.Value.(*storedTask)
		switch {
		case running(st.state):
		case s.bytes > s.maxBytes || s.expired(st, now):
			s.order.Remove(el)
			delete(s.byID, st.id)
			s.bytes -= int64(len(st.data))
		default:
			return // every later task is more recent, and the store fits
		}
		el = next
	}
}

// pageCursor is the position after which a ListTasks page starts.
type pageCursor struct {
	updated time.Time
	id      a2a.TaskID
}

func (c pageCursor) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.updated.UnixNano(), 10) + "." + string(c.id)))
}

func parsePageToken(tok string) (pageCursor, error) {
	bad := invalidParams("pageToken: not a token this server issued; start again without one")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return pageCursor{}, bad
	}
	ns, id, ok := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return pageCursor{}, bad
	}
	return pageCursor{time.Unix(0, n), a2a.TaskID(id)}, nil
}
