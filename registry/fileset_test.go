package registry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// fileAgent is a valid file agent.
func fileAgent(name, description string) registry.Agent {
	a := agent(name)
	a.Description = description
	return a
}

func listAll(t *testing.T, r *registry.Registry) []registry.Agent {
	t.Helper()
	p, err := r.List(context.Background(), registry.ListOptions{Limit: registry.MaxListLimit})
	require.NoError(t, err)
	return p.Agents
}

// nameFailingStore fails UpdateAgent for the names in fail.
type nameFailingStore struct {
	*memstore.Store
	mu   sync.Mutex
	fail map[string]bool
}

var errStoreDown = errors.New("store down")

func (s *nameFailingStore) UpdateAgent(ctx context.Context, name string, fn func(*registry.Agent) (*registry.Agent, error)) error {
	s.mu.Lock()
	fail := s.fail[name]
	s.mu.Unlock()
	if fail {
		return errStoreDown
	}
	return s.Store.UpdateAgent(ctx, name, fn)
}

func (s *nameFailingStore) setFail(names ...string) {
	s.mu.Lock()
	s.fail = map[string]bool{}
	for _, n := range names {
		s.fail[n] = true
	}
	s.mu.Unlock()
}

func TestReplaceFileAgents(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	store := memstore.New()
	r := newRegistry(t, store, &registry.Options{Now: clk.Now})
	var events []registry.Event
	var evMu sync.Mutex
	_, cancel := r.Subscribe(func(ev registry.Event) {
		evMu.Lock()
		events = append(events, ev)
		evMu.Unlock()
	})
	defer cancel()
	takeEvents := func() []string {
		evMu.Lock()
		defer evMu.Unlock()
		var out []string
		for _, ev := range events {
			out = append(out, fmt.Sprintf("%s %s created=%v", ev.Type, ev.Agent.Name, ev.Created))
		}
		events = nil
		return out
	}

	rep, err := r.ReplaceFileAgents(ctx, []registry.Agent{fileAgent("b", "v1"), fileAgent("a", "v1"), fileAgent("c", "v1")})
	require.NoError(t, err)
	assert.Equal(t, registry.FileAgentsReport{Added: []string{"a", "b", "c"}}, rep)
	assert.True(t, rep.Changed())
	assert.Equal(t, []string{"put a created=true", "put b created=true", "put c created=true"}, takeEvents())
	first := clk.Now()
	for _, a := range listAll(t, r) {
		assert.Equal(t, registry.SourceFile, a.Source)
		assert.Equal(t, first, a.RegisteredAt)
	}

	clk.Advance(time.Minute)
	rep, err = r.ReplaceFileAgents(ctx, []registry.Agent{fileAgent("a", "v1"), fileAgent("b", "v2"), fileAgent("d", "v1")})
	require.NoError(t, err)
	assert.Equal(t, registry.FileAgentsReport{Added: []string{"d"}, Replaced: []string{"b"}, Removed: []string{"c"}, Unchanged: []string{"a"}}, rep)
	assert.Equal(t, []string{"delete c created=false", "put b created=false", "put d created=true"}, takeEvents())
	b, err := r.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "v2", b.Description)
	assert.Equal(t, first, b.RegisteredAt, "registeredAt survives a change")
	assert.Equal(t, clk.Now(), b.UpdatedAt)
	a, err := r.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, first, a.UpdatedAt, "an unchanged agent is not rewritten")
	_, err = store.GetAgent(ctx, "c")
	assert.ErrorIs(t, err, registry.ErrNotFound, "removed from the store")

	// The same set again changes nothing.
	rep, err = r.ReplaceFileAgents(ctx, []registry.Agent{fileAgent("a", "v1"), fileAgent("b", "v2"), fileAgent("d", "v1")})
	require.NoError(t, err)
	assert.False(t, rep.Changed())
	assert.Equal(t, []string{"a", "b", "d"}, rep.Unchanged)
	assert.Empty(t, takeEvents())

	// A token change is a change (tokens are compared, never shown).
	withToken := fileAgent("a", "v1")
	withToken.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "t1"}
	rep, err = r.ReplaceFileAgents(ctx, []registry.Agent{withToken, fileAgent("b", "v2"), fileAgent("d", "v1")})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, rep.Replaced)
	withToken.Auth.Token = "t2"
	rep, err = r.ReplaceFileAgents(ctx, []registry.Agent{withToken, fileAgent("b", "v2"), fileAgent("d", "v1")})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, rep.Replaced)
	stored, err := store.GetAgent(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "t2", stored.Auth.Token)

	// The empty set removes every file agent.
	rep, err = r.ReplaceFileAgents(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "d"}, rep.Removed)
	assert.Equal(t, 0, r.Len())
}

func TestReplaceFileAgentsFileWinsOverAPI(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	clk := newClock()
	r := newRegistry(t, nil, &registry.Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	api := agent("shared")
	api.Description = "from the API"
	_, _, err := r.Register(ctx, api)
	require.NoError(t, err)
	_, _, err = r.Register(ctx, agent("api-only"))
	require.NoError(t, err)

	clk.Advance(time.Minute)
	rep, err := r.ReplaceFileAgents(ctx, []registry.Agent{fileAgent("shared", "from the file")})
	require.NoError(t, err)
	assert.Equal(t, []string{"shared"}, rep.Replaced)
	assert.Equal(t, []string{"shared"}, rep.Overridden)
	got, err := r.Get(ctx, "shared")
	require.NoError(t, err)
	assert.Equal(t, "from the file", got.Description)
	assert.Equal(t, registry.SourceFile, got.Source)
	assert.Equal(t, clk.Now(), got.RegisteredAt, "a new agent under an old name")
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "agent=shared")

	// From now on the API may not replace or delete it…
	_, _, err = r.Register(ctx, agent("shared"))
	assert.ErrorIs(t, err, registry.ErrManagedByFile)
	assert.Equal(t, registry.CodeManagedByFile, registry.Code(err))
	assert.ErrorIs(t, r.Delete(ctx, "shared"), registry.ErrManagedByFile)
	// …while API agents are left alone by reloads.
	rep, err = r.ReplaceFileAgents(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"shared"}, rep.Removed)
	assert.Equal(t, []string{"api-only"}, names(listAll(t, r)))
	// Once the file is gone, the API may register the name again.
	_, created, err := r.Register(ctx, agent("shared"))
	require.NoError(t, err)
	assert.True(t, created)
}

func TestReplaceFileAgentsDefault(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	r := newRegistry(t, nil, &registry.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	apiDefault := agent("api-default")
	apiDefault.IsDefault = true
	_, _, err := r.Register(ctx, apiDefault)
	require.NoError(t, err)

	// A file set without a default leaves the API default alone.
	_, err = r.ReplaceFileAgents(ctx, []registry.Agent{fileAgent("a", "x")})
	require.NoError(t, err)
	got, err := r.Get(ctx, "api-default")
	require.NoError(t, err)
	assert.True(t, got.IsDefault)

	// A file default takes over: the API agent is demoted (logged, reported).
	def := fileAgent("file-default", "x")
	def.IsDefault = true
	th := 0.9
	def.ConfidenceThreshold = &th
	rep, err := r.ReplaceFileAgents(ctx, []registry.Agent{fileAgent("a", "x"), def})
	require.NoError(t, err)
	assert.Equal(t, "api-default", rep.Demoted)
	got, err = r.Get(ctx, "api-default")
	require.NoError(t, err)
	assert.False(t, got.IsDefault)
	assert.Equal(t, registry.DefaultConfidenceThreshold, got.Threshold())
	got, err = r.Get(ctx, "file-default")
	require.NoError(t, err)
	assert.True(t, got.IsDefault)
	assert.Equal(t, 0.0, *got.ConfidenceThreshold, "the default agent's threshold is 0")
	assert.Contains(t, logs.String(), "agent=api-default")

	// The API cannot register a second default while the file has one.
	_, _, err = r.Register(ctx, apiDefault)
	assert.ErrorIs(t, err, registry.ErrDefaultConflict)
}

func TestReplaceFileAgentsRefusesBadSets(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, nil, nil)
	_, err := r.ReplaceFileAgents(ctx, []registry.Agent{fileAgent("a", "x")})
	require.NoError(t, err)

	d1, d2 := fileAgent("d1", "x"), fileAgent("d2", "x")
	d1.IsDefault, d2.IsDefault = true, true
	bad := fileAgent("bad", "x")
	bad.Endpoint = "/task" // not absolute: invalid (an ftp URL is refused by the endpoint policy)
	for name, set := range map[string][]registry.Agent{
		"duplicate":    {fileAgent("x", "1"), fileAgent("x", "2")},
		"two defaults": {d1, d2},
		"invalid":      {fileAgent("ok", "x"), bad},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.ReplaceFileAgents(ctx, set)
			require.Error(t, err)
			assert.Equal(t, []string{"a"}, names(listAll(t, r)), "nothing changed")
		})
	}
	_, err = r.ReplaceFileAgents(ctx, []registry.Agent{d1, d2})
	assert.ErrorIs(t, err, registry.ErrDefaultConflict)
	_, err = r.ReplaceFileAgents(ctx, []registry.Agent{bad})
	assert.ErrorIs(t, err, registry.ErrInvalid)

	require.NoError(t, r.Close())
	_, err = r.ReplaceFileAgents(ctx, nil)
	assert.ErrorIs(t, err, registry.ErrClosed)
}

func TestReplaceFileAgentsStoreFailure(t *testing.T) {
	ctx := context.Background()
	store := &nameFailingStore{Store: memstore.New()}
	r := newRegistry(t, store, nil)
	_, _, err := r.Register(ctx, agent("api"))
	require.NoError(t, err)
	old := []registry.Agent{fileAgent("a", "v1"), fileAgent("b", "v1"), fileAgent("c", "v1")}
	_, err = r.ReplaceFileAgents(ctx, old)
	require.NoError(t, err)
	before := listAll(t, r)
	storedBefore, err := store.ListAgents(ctx)
	require.NoError(t, err)

	var events atomic.Int32
	_, cancel := r.Subscribe(func(registry.Event) { events.Add(1) })
	defer cancel()

	// Adding d, changing a, removing b and overriding api: c's write… no,
	// the write of d fails.
	next := []registry.Agent{fileAgent("a", "v2"), fileAgent("c", "v1"), fileAgent("d", "v1"), fileAgent("api", "file")}
	store.setFail("d")
	_, err = r.ReplaceFileAgents(ctx, next)
	require.ErrorIs(t, err, errStoreDown)
	assert.Equal(t, before, listAll(t, r), "the view is unchanged")
	assert.Zero(t, events.Load(), "no events")
	storedAfter, err := store.ListAgents(ctx)
	require.NoError(t, err)
	assert.Equal(t, storedBefore, storedAfter, "the writes that succeeded were undone")

	// The next reload re-applies.
	store.setFail()
	rep, err := r.ReplaceFileAgents(ctx, next)
	require.NoError(t, err)
	assert.Equal(t, []string{"d"}, rep.Added)
	assert.Equal(t, []string{"a", "api"}, rep.Replaced)
	assert.Equal(t, []string{"b"}, rep.Removed)
	assert.Equal(t, []string{"a", "api", "c", "d"}, names(listAll(t, r)))
}

// TestReplaceFileAgentsRacingReaders swaps the file set between A and B
// while readers and a subscriber watch: every List, every Subscribe
// snapshot and the follower's final state is exactly one of the sets, and
// writes of API agents keep going.
func TestReplaceFileAgentsRacingReaders(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, nil, nil)
	_, _, err := r.Register(ctx, agent("api-fixed"))
	require.NoError(t, err)

	defA, defB := fileAgent("default-a", "A"), fileAgent("default-b", "B")
	defA.IsDefault, defB.IsDefault = true, true
	setA := []registry.Agent{fileAgent("only-a1", "A"), fileAgent("only-a2", "A"), fileAgent("both", "A"), defA}
	setB := []registry.Agent{fileAgent("only-b", "B"), fileAgent("both", "B"), defB}
	key := func(agents []registry.Agent) string {
		var parts []string
		for _, a := range agents {
			if a.Source == registry.SourceFile {
				parts = append(parts, a.Name+"="+a.Description)
			}
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	norm := func(set []registry.Agent) []registry.Agent {
		out := slices.Clone(set)
		for i := range out {
			out[i].Source = registry.SourceFile
		}
		return out
	}
	keyA, keyB := key(norm(setA)), key(norm(setB))
	_, err = r.ReplaceFileAgents(ctx, setA)
	require.NoError(t, err)

	// The follower applies events to its own copy of the registry.
	var fmu sync.Mutex
	follower := map[string]registry.Agent{}
	snapshot, cancel := r.Subscribe(func(ev registry.Event) {
		fmu.Lock()
		defer fmu.Unlock()
		if ev.Type == registry.EventDelete {
			delete(follower, ev.Agent.Name)
		} else {
			follower[ev.Agent.Name] = ev.Agent
		}
	})
	defer cancel()
	for _, a := range snapshot {
		follower[a.Name] = a
	}

	var stopped atomic.Bool // the readers' and writers' loops end once it is set
	var readers sync.WaitGroup
	var lists, bad atomic.Int64
	var firstBad atomic.Value
	check := func(what string, agents []registry.Agent) {
		lists.Add(1)
		if k := key(agents); k != keyA && k != keyB {
			if bad.Add(1) == 1 {
				firstBad.Store(what + ": " + k)
			}
		}
		defaults := 0
		for _, a := range agents {
			if a.IsDefault {
				defaults++
			}
		}
		if defaults != 1 {
			if bad.Add(1) == 1 {
				firstBad.Store(fmt.Sprintf("%s: %d defaults", what, defaults))
			}
		}
	}
	for range 4 {
		readers.Go(func() {
			for !stopped.Load() {
				p, err := r.List(ctx, registry.ListOptions{Limit: registry.MaxListLimit})
				if err != nil {
					bad.Add(1)
					return
				}
				check("List", p.Agents)
				if _, err := r.Get(ctx, "both"); err != nil {
					bad.Add(1)
				}
			}
		})
	}
	readers.Go(func() {
		for !stopped.Load() {
			snap, cancel := r.Subscribe(func(registry.Event) {})
			cancel()
			check("Subscribe", snap)
		}
	})
	// API writes to other agents keep going during the swaps.
	readers.Go(func() {
		for i := 0; !stopped.Load(); i++ {
			name := fmt.Sprintf("api-%d", i%4)
			if _, _, err := r.Register(ctx, agent(name)); err != nil {
				bad.Add(1)
			}
			if _, err := r.Heartbeat(ctx, "api-fixed"); err != nil {
				bad.Add(1)
			}
		}
	})

	var reloads sync.WaitGroup
	for g := range 2 {
		reloads.Go(func() {
			for i := range 30 {
				set := setA
				if (i+g)%2 == 0 {
					set = setB
				}
				if _, err := r.ReplaceFileAgents(ctx, set); err != nil {
					bad.Add(1)
				}
			}
		})
	}
	reloads.Wait()
	stopped.Store(true)
	readers.Wait()

	require.Zero(t, bad.Load(), "first bad observation: %v", firstBad.Load())
	assert.Greater(t, lists.Load(), int64(100))
	final := listAll(t, r)
	assert.Contains(t, []string{keyA, keyB}, key(final))
	fmu.Lock()
	defer fmu.Unlock()
	var followed []registry.Agent
	for _, a := range follower {
		followed = append(followed, a)
	}
	assert.Equal(t, key(final), key(followed), "the follower ends where the registry is")
	assert.Len(t, followed, len(final))
}
