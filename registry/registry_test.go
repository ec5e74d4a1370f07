package registry_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// clock is a manual clock for TTL tests.
type clock = clocktest.Clock

func newClock() *clock { return clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

func newRegistry(t *testing.T, store registry.Store, opts *registry.Options) *registry.Registry {
	t.Helper()
	if store == nil {
		store = memstore.New()
	}
	o := registry.Options{SweepInterval: -1}
	if opts != nil {
		o = *opts
		if o.SweepInterval == 0 {
			o.SweepInterval = -1
		}
	}
	r, err := registry.New(context.Background(), store, &o)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

func agent(name string) registry.Agent {
	return registry.Agent{
		Name:         name,
		Description:  "Answers questions about " + name,
		Capabilities: []string{"budget", "cost-center"},
		Endpoint:     "https://agents.example.com/" + name,
	}
}

func TestRegisterCreatesThenReplaces(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	store := memstore.New()
	r := newRegistry(t, store, &registry.Options{Now: clk.Now})

	a := agent("finance")
	a.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}
	got, created, err := r.Register(ctx, a)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "finance", got.DisplayName, "displayName defaults to name")
	assert.Equal(t, registry.ProtocolHTTP, got.Protocol)
	assert.Equal(t, registry.SourceAPI, got.Source)
	assert.Equal(t, clk.Now(), got.RegisteredAt)
	assert.Equal(t, 0.7, *got.ConfidenceThreshold)
	require.NotNil(t, got.Auth)
	assert.Equal(t, registry.AuthBearer, got.Auth.Type)
	assert.Empty(t, got.Auth.Token, "Register must not return the token")

	first := clk.Now()
	clk.Advance(time.Minute)
	a.Description = "replaced"
	got, created, err = r.Register(ctx, a)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, first, got.RegisteredAt, "registeredAt survives re-registration")
	assert.Equal(t, clk.Now(), got.UpdatedAt)
	assert.Equal(t, "replaced", got.Description)

	stored, err := store.GetAgent(ctx, "finance")
	require.NoError(t, err)
	assert.Equal(t, "s3cret", stored.Auth.Token, "the store keeps the token for outbound calls")

	for _, read := range []func() registry.Agent{
		func() registry.Agent { g, err := r.Get(ctx, "finance"); require.NoError(t, err); return g },
		func() registry.Agent {
			p, err := r.List(ctx, registry.ListOptions{})
			require.NoError(t, err)
			return p.Agents[0]
		},
	} {
		g := read()
		assert.Empty(t, g.Auth.Token, "read paths never return the token")
		assert.Equal(t, "replaced", g.Description)
	}
	assert.Equal(t, 1, r.Len())
}

func TestRegisterIgnoresServerSetFields(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	r := newRegistry(t, nil, &registry.Options{Now: clk.Now})
	a := agent("x")
	a.RegisteredAt = time.Unix(1, 0)
	a.Source = registry.SourceFile
	a.Stale = true
	got, _, err := r.Register(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, clk.Now(), got.RegisteredAt)
	assert.Equal(t, registry.SourceAPI, got.Source)
	assert.False(t, got.Stale)
}

func TestValidation(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	many := func(n int, s string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	threshold := func(f float64) *float64 { return &f }
	cases := []struct {
		name  string
		edit  func(*registry.Agent)
		field string
		code  string
	}{
		{"empty name", func(a *registry.Agent) { a.Name = "" }, "name", apierr.CodeInvalidArgument},
		{"name with space", func(a *registry.Agent) { a.Name = "a b" }, "name", apierr.CodeInvalidArgument},
		{"name starting with dash", func(a *registry.Agent) { a.Name = "-a" }, "name", apierr.CodeInvalidArgument},
		{"name too long", func(a *registry.Agent) { a.Name = long(129) }, "name", apierr.CodeInvalidArgument},
		{"displayName too long", func(a *registry.Agent) { a.DisplayName = long(201) }, "displayName", apierr.CodeInvalidArgument},
		{"description too long", func(a *registry.Agent) { a.Description = long(5001) }, "description", apierr.CodeInvalidArgument},
		{"no description and no capabilities", func(a *registry.Agent) { a.Description, a.Capabilities = "", nil }, "description", apierr.CodeInvalidArgument},
		{"too many capabilities", func(a *registry.Agent) { a.Capabilities = many(65, "c") }, "capabilities", apierr.CodeInvalidArgument},
		{"empty capability", func(a *registry.Agent) { a.Capabilities = []string{"ok", ""} }, "capabilities[1]", apierr.CodeInvalidArgument},
		{"capability too long", func(a *registry.Agent) { a.Capabilities = []string{long(129)} }, "capabilities[0]", apierr.CodeInvalidArgument},
		{"too many examples", func(a *registry.Agent) { a.Examples = many(201, "e") }, "examples", apierr.CodeInvalidArgument},
		{"example too long", func(a *registry.Agent) { a.Examples = []string{long(501)} }, "examples[0]", apierr.CodeInvalidArgument},
		{"too many resources", func(a *registry.Agent) {
			for range 65 {
				a.Resources = append(a.Resources, registry.Resource{URI: "file://h/x"})
			}
		}, "resources", apierr.CodeInvalidArgument},
		{"resource without uri", func(a *registry.Agent) { a.Resources = []registry.Resource{{Description: "d"}} }, "resources[0].uri", apierr.CodeInvalidArgument},
		{"resource bad access", func(a *registry.Agent) { a.Resources = []registry.Resource{{URI: "u", Access: "root"}} }, "resources[0].access", apierr.CodeInvalidArgument},
		{"no endpoint", func(a *registry.Agent) { a.Endpoint = "" }, "endpoint", apierr.CodeInvalidArgument},
		{"relative endpoint", func(a *registry.Agent) { a.Endpoint = "/task" }, "endpoint", apierr.CodeInvalidArgument},
		{"ftp endpoint", func(a *registry.Agent) { a.Endpoint = "ftp://example.com/x" }, "endpoint", registry.CodeEndpointNotAllowed},
		{"file endpoint", func(a *registry.Agent) { a.Endpoint = "file:///etc/passwd" }, "endpoint", registry.CodeEndpointNotAllowed},
		{"endpoint without host", func(a *registry.Agent) { a.Endpoint = "http:///task" }, "endpoint", apierr.CodeInvalidArgument},
		{"endpoint too long", func(a *registry.Agent) { a.Endpoint = "https://example.com/" + long(2048) }, "endpoint", apierr.CodeInvalidArgument},
		{"metadata endpoint", func(a *registry.Agent) { a.Endpoint = "http://169.254.169.254/latest" }, "endpoint", registry.CodeEndpointNotAllowed},
		{"unknown protocol", func(a *registry.Agent) { a.Protocol = "grpc" }, "protocol", apierr.CodeInvalidArgument},
		{"unknown auth type", func(a *registry.Agent) { a.Auth = &registry.Auth{Type: "basic", Token: "t"} }, "auth.type", apierr.CodeInvalidArgument},
		{"bearer without token", func(a *registry.Agent) { a.Auth = &registry.Auth{Type: "bearer"} }, "auth.token", apierr.CodeInvalidArgument},
		{"token with newline", func(a *registry.Agent) { a.Auth = &registry.Auth{Type: "bearer", Token: "a\nb"} }, "auth.token", apierr.CodeInvalidArgument},
		{"header without name", func(a *registry.Agent) { a.Auth = &registry.Auth{Type: "header", Token: "t"} }, "auth.headerName", apierr.CodeInvalidArgument},
		{"header reserved", func(a *registry.Agent) { a.Auth = &registry.Auth{Type: "header", Token: "t", HeaderName: "Host"} }, "auth.headerName", apierr.CodeInvalidArgument},
		{"none with token", func(a *registry.Agent) { a.Auth = &registry.Auth{Type: "none", Token: "t"} }, "auth", apierr.CodeInvalidArgument},
		{"threshold above 1", func(a *registry.Agent) { a.ConfidenceThreshold = threshold(1.5) }, "confidenceThreshold", apierr.CodeInvalidArgument},
		{"threshold negative", func(a *registry.Agent) { a.ConfidenceThreshold = threshold(-0.1) }, "confidenceThreshold", apierr.CodeInvalidArgument},
		{"clarificationContext too long", func(a *registry.Agent) { a.ClarificationContext = long(501) }, "clarificationContext", apierr.CodeInvalidArgument},
		{"bad label key", func(a *registry.Agent) { a.Labels = map[string]string{"Team": "x"} }, "labels", apierr.CodeInvalidArgument},
		{"label value too long", func(a *registry.Agent) { a.Labels = map[string]string{"team": long(257)} }, "labels.team", apierr.CodeInvalidArgument},
		{"too many labels", func(a *registry.Agent) {
			a.Labels = map[string]string{}
			for i := range 33 {
				a.Labels["k"+strconv.Itoa(i)] = "v"
			}
		}, "labels", apierr.CodeInvalidArgument},
		{"ttl too small", func(a *registry.Agent) { a.TTLSeconds = 4 }, "ttlSeconds", apierr.CodeInvalidArgument},
		{"ttl too large", func(a *registry.Agent) { a.TTLSeconds = 86401 }, "ttlSeconds", apierr.CodeInvalidArgument},
		{"invalid utf-8", func(a *registry.Agent) { a.Description = "bad \xff" }, "description", apierr.CodeInvalidArgument},
	}
	ctx := context.Background()
	store := memstore.New()
	r := newRegistry(t, store, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := agent("valid-name")
			tc.edit(&a)
			_, _, err := r.Register(ctx, a)
			require.Error(t, err)
			var fe *registry.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field, "error: %v", err)
			assert.NotEmpty(t, fe.Rule)
			assert.Equal(t, tc.code, registry.Code(err))
			if tc.code == registry.CodeEndpointNotAllowed {
				assert.ErrorIs(t, err, registry.ErrEndpointNotAllowed)
			} else {
				assert.ErrorIs(t, err, registry.ErrInvalid)
			}
			list, err := store.ListAgents(ctx)
			require.NoError(t, err)
			assert.Empty(t, list, "nothing is stored on a validation error")
		})
	}
}

func TestValidationAcceptsBoundaries(t *testing.T) {
	r := newRegistry(t, nil, nil)
	th := 1.0
	a := registry.Agent{
		Name:                 strings.Repeat("n", 128),
		DisplayName:          strings.Repeat("é", 200),
		Capabilities:         []string{strings.Repeat("c", 128)},
		Examples:             []string{strings.Repeat("e", 500)},
		Resources:            []registry.Resource{{URI: "file://host/a/*", Access: registry.AccessAdmin}},
		Endpoint:             "http://127.0.0.1:9000/task",
		Protocol:             registry.ProtocolMCP,
		Auth:                 &registry.Auth{Type: registry.AuthHeader, HeaderName: "X-Api-Key", Token: "t"},
		ConfidenceThreshold:  &th,
		ClarificationContext: strings.Repeat("q", 500),
		Labels:               map[string]string{"team.io/x-y_z": strings.Repeat("v", 256)},
		TTLSeconds:           5,
	}
	_, _, err := r.Register(context.Background(), a)
	require.NoError(t, err, "the library default allows private endpoints")
}

func TestValidationReportsEveryField(t *testing.T) {
	a := registry.Agent{Name: "", Endpoint: "", TTLSeconds: 1}
	a.Normalize()
	err := a.Validate(nil)
	require.Error(t, err)
	for _, field := range []string{"name", "description", "endpoint", "ttlSeconds"} {
		assert.Contains(t, err.Error(), field)
	}
}

func TestEndpointPolicyAtRegistration(t *testing.T) {
	strict, err := netguard.NewPolicy(netguard.Options{})
	require.NoError(t, err)
	r := newRegistry(t, nil, &registry.Options{Policy: strict})
	a := agent("local")
	a.Endpoint = "http://localhost:8080/task"
	_, _, err = r.Register(context.Background(), a)
	require.ErrorIs(t, err, registry.ErrEndpointNotAllowed)
	assert.Equal(t, registry.CodeEndpointNotAllowed, registry.Code(err))
	var fe *registry.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, strings.ToLower(fe.Rule), "loopback")
	assert.Equal(t, 0, r.Len())
}

func TestInProcessEndpointIsSetByTheRegistry(t *testing.T) {
	r := newRegistry(t, nil, nil)
	got, _, err := r.Register(context.Background(), registry.Agent{
		Name: "local-go", Capabilities: []string{"echo"}, Protocol: registry.ProtocolInProcess,
		Endpoint: "https://ignored.example.com",
	})
	require.NoError(t, err)
	assert.Equal(t, "inprocess:local-go", got.Endpoint)
}

func TestDefaultAgent(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, nil, nil)
	d := agent("fallback")
	d.IsDefault = true
	th := 0.9
	d.ConfidenceThreshold = &th
	got, _, err := r.Register(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, 0.0, *got.ConfidenceThreshold, "the default agent's threshold is forced to 0")

	other := agent("other")
	other.IsDefault = true
	_, _, err = r.Register(ctx, other)
	require.ErrorIs(t, err, registry.ErrDefaultConflict)
	assert.Equal(t, registry.CodeConflict, registry.Code(err))

	_, _, err = r.Register(ctx, d) // re-registering the default itself is fine
	require.NoError(t, err)

	d.IsDefault = false
	_, _, err = r.Register(ctx, d)
	require.NoError(t, err)
	_, _, err = r.Register(ctx, other)
	require.NoError(t, err, "once the old default steps down another may take over")
}

func TestDeleteAndFileAgents(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	file := agent("from-file")
	file.Normalize()
	file.Source = registry.SourceFile
	require.NoError(t, store.UpdateAgent(ctx, file.Name, func(*registry.Agent) (*registry.Agent, error) { return &file, nil }))
	r := newRegistry(t, store, nil)

	_, _, err := r.Register(ctx, agent("from-file"))
	require.ErrorIs(t, err, registry.ErrManagedByFile)
	assert.Equal(t, registry.CodeManagedByFile, registry.Code(err))
	require.ErrorIs(t, r.Delete(ctx, "from-file"), registry.ErrManagedByFile)

	err = r.Delete(ctx, "missing")
	require.ErrorIs(t, err, registry.ErrNotFound)
	assert.Equal(t, registry.CodeNotFound, registry.Code(err))

	_, _, err = r.Register(ctx, agent("api"))
	require.NoError(t, err)
	require.NoError(t, r.Delete(ctx, "api"))
	_, err = r.Get(ctx, "api")
	require.ErrorIs(t, err, registry.ErrNotFound)
	_, err = store.GetAgent(ctx, "api")
	require.ErrorIs(t, err, registry.ErrNotFound)
}

func TestTTLStaleAndExpiry(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	r := newRegistry(t, nil, &registry.Options{Now: clk.Now})
	var events []registry.Event
	_, cancel := r.Subscribe(func(ev registry.Event) { events = append(events, ev) })
	defer cancel()

	a := agent("ephemeral")
	a.TTLSeconds = 10
	_, _, err := r.Register(ctx, a)
	require.NoError(t, err)
	_, _, err = r.Register(ctx, agent("forever"))
	require.NoError(t, err)

	clk.Advance(10 * time.Second)
	got, err := r.Get(ctx, "ephemeral")
	require.NoError(t, err)
	assert.False(t, got.Stale, "exactly one TTL after the last heartbeat is not yet stale")

	clk.Advance(time.Second)
	got, err = r.Get(ctx, "ephemeral")
	require.NoError(t, err)
	assert.True(t, got.Stale)
	n, err := r.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "stale agents are kept during the grace period")

	_, err = r.Heartbeat(ctx, "ephemeral")
	require.NoError(t, err)
	got, err = r.Get(ctx, "ephemeral")
	require.NoError(t, err)
	assert.False(t, got.Stale, "a heartbeat revives a stale agent")
	assert.Equal(t, clk.Now(), got.LastSeen)

	clk.Advance(40 * time.Second)
	n, err = r.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "removal comes after TTL + 3×TTL, not at it")

	clk.Advance(time.Second)
	n, err = r.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = r.Get(ctx, "ephemeral")
	require.ErrorIs(t, err, registry.ErrNotFound)
	_, err = r.Get(ctx, "forever")
	require.NoError(t, err, "agents without a TTL never expire")

	require.Len(t, events, 4)
	assert.Equal(t, registry.EventHeartbeat, events[2].Type)
	assert.Equal(t, registry.EventDelete, events[3].Type)
	assert.True(t, events[3].Expired)
	assert.Equal(t, "ephemeral", events[3].Agent.Name)
}

func TestHeartbeatUnknownAgent(t *testing.T) {
	r := newRegistry(t, nil, nil)
	_, err := r.Heartbeat(context.Background(), "nobody")
	require.ErrorIs(t, err, registry.ErrNotFound)
}

func TestListPagingAndLabels(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, nil, nil)
	for i := range 25 {
		a := agent(fmt.Sprintf("agent-%02d", i))
		a.Labels = map[string]string{"team": []string{"red", "blue"}[i%2]}
		_, _, err := r.Register(ctx, a)
		require.NoError(t, err)
	}
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		page, err := r.List(ctx, registry.ListOptions{Limit: 10, Cursor: cursor})
		require.NoError(t, err)
		for _, a := range page.Agents {
			names = append(names, a.Name)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	require.Len(t, names, 25)
	assert.Equal(t, "agent-00", names[0])
	assert.Equal(t, "agent-24", names[24])
	assert.IsNonDecreasing(t, names)

	page, err := r.List(ctx, registry.ListOptions{Labels: map[string]string{"team": "blue"}})
	require.NoError(t, err)
	assert.Len(t, page.Agents, 12)
	for _, a := range page.Agents {
		assert.Equal(t, "blue", a.Labels["team"])
	}

	page, err = r.List(ctx, registry.ListOptions{Limit: 25})
	require.NoError(t, err)
	assert.Len(t, page.Agents, 25)
	assert.Empty(t, page.NextCursor, "an exactly full last page has no next cursor")

	_, err = r.List(ctx, registry.ListOptions{Cursor: "!!not-a-cursor"})
	require.ErrorIs(t, err, registry.ErrBadCursor)
}

func TestSubscribeSnapshotAndOrder(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, nil, nil)
	_, _, err := r.Register(ctx, agent("before"))
	require.NoError(t, err)

	var events []registry.Event
	snapshot, cancel := r.Subscribe(func(ev registry.Event) { events = append(events, ev) })
	require.Len(t, snapshot, 1)
	assert.Equal(t, "before", snapshot[0].Name)

	_, _, err = r.Register(ctx, agent("after"))
	require.NoError(t, err)
	require.NoError(t, r.Delete(ctx, "before"))
	require.Len(t, events, 2, "events are delivered before the write returns")
	assert.Equal(t, registry.EventPut, events[0].Type)
	assert.True(t, events[0].Created)
	assert.Equal(t, registry.EventDelete, events[1].Type)

	cancel()
	_, _, err = r.Register(ctx, agent("later"))
	require.NoError(t, err)
	assert.Len(t, events, 2, "no events after cancel")
}

// TestConcurrentWritesKeepPerAgentOrder hammers a few names from many
// goroutines and checks that every subscriber sees each agent's versions in
// the order they were committed, and that its final view matches the
// registry.
func TestConcurrentWritesKeepPerAgentOrder(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, nil, nil)
	last := map[string]int{}
	view := map[string]registry.Agent{}
	var violations []string
	_, cancel := r.Subscribe(func(ev registry.Event) {
		name := ev.Agent.Name
		if ev.Type == registry.EventDelete {
			delete(view, name)
			return
		}
		view[name] = ev.Agent
		if !strings.HasPrefix(name, "hot-") {
			return
		}
		v, _ := strconv.Atoi(ev.Agent.Labels["v"])
		if v <= last[name] {
			violations = append(violations, fmt.Sprintf("%s: v%d after v%d", name, v, last[name]))
		}
		last[name] = v
	})
	defer cancel()

	var counter [4]struct {
		sync.Mutex
		n int
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := (g + i) % len(counter)
				name := fmt.Sprintf("hot-%d", k)
				// Holding the counter lock across Register makes versions
				// monotonic in commit order, so a subscriber seeing them out
				// of order means the registry reordered its events.
				counter[k].Lock()
				counter[k].n++
				a := agent(name)
				a.Labels = map[string]string{"v": strconv.Itoa(counter[k].n)}
				_, _, err := r.Register(ctx, a)
				counter[k].Unlock()
				assert.NoError(t, err)
				_, _, err = r.Register(ctx, agent(fmt.Sprintf("cold-%d-%d", g, i)))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	assert.Empty(t, violations)
	assert.Equal(t, r.Len(), len(view))
	for name, a := range view {
		got, err := r.Get(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, got.Labels, a.Labels)
	}
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, nil, nil)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "Close is idempotent")
	_, _, err := r.Register(ctx, agent("a"))
	require.ErrorIs(t, err, registry.ErrClosed)
	_, err = r.Get(ctx, "a")
	require.ErrorIs(t, err, registry.ErrClosed)
	_, err = r.List(ctx, registry.ListOptions{})
	require.ErrorIs(t, err, registry.ErrClosed)
}

// barrierStore is a real memstore whose writes each wait until n of them
// have arrived, to prove writes reach the store concurrently.
type barrierStore struct {
	*memstore.Store
	n       int
	mu      sync.Mutex
	waiting int
	all     chan struct{}
}

func (s *barrierStore) UpdateAgent(ctx context.Context, name string, fn func(*registry.Agent) (*registry.Agent, error)) error {
	s.mu.Lock()
	if s.waiting++; s.waiting == s.n {
		close(s.all)
	}
	s.mu.Unlock()
	select {
	case <-s.all:
	case <-time.After(5 * time.Second):
		return errors.New("the other writes never came")
	}
	return s.Store.UpdateAgent(ctx, name, fn)
}

// With MaxAgents, creations still reach the store concurrently (so a
// store that group-commits, like bbolt's, shares one fsync among them):
// the cap is kept by reserving places, not by a lock held across the
// write.
func TestMaxAgentsCreationsShareTheStore(t *testing.T) {
	ctx := context.Background()
	const n = 4
	// Two writes in the store at once suffice (one lock across the write
	// would allow only one); asking for all four would also wait on the
	// registry's per-name locks, which two of the names may share.
	store := &barrierStore{Store: memstore.New(), n: 2, all: make(chan struct{})}
	reg, err := registry.New(ctx, store, &registry.Options{MaxAgents: n})
	require.NoError(t, err)
	defer reg.Close()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, created, err := reg.Register(ctx, agent(fmt.Sprintf("a%d", i)))
			assert.NoError(t, err)
			assert.True(t, created)
		})
	}
	wg.Wait()
	assert.Equal(t, n, reg.Len())
	_, _, err = reg.Register(ctx, agent("one-more"))
	require.ErrorIs(t, err, registry.ErrFull, "the reservations were given back and the agents counted")
}

// failingStore is a real memstore whose writes can be made to fail, to prove
// a store failure stores nothing and changes no view.
type failingStore struct {
	*memstore.Store
	fail bool
}

func (s *failingStore) UpdateAgent(ctx context.Context, name string, fn func(*registry.Agent) (*registry.Agent, error)) error {
	if s.fail {
		return errors.New("disk on fire")
	}
	return s.Store.UpdateAgent(ctx, name, fn)
}

func TestStoreFailureChangesNothing(t *testing.T) {
	ctx := context.Background()
	store := &failingStore{Store: memstore.New(), fail: true}
	r := newRegistry(t, store, nil)
	var events int
	_, cancel := r.Subscribe(func(registry.Event) { events++ })
	defer cancel()
	_, _, err := r.Register(ctx, agent("a"))
	require.Error(t, err)
	assert.Empty(t, registry.Code(err), "a store failure is not a client error")
	assert.Equal(t, 0, r.Len())
	assert.Zero(t, events)
}

func TestSweeperGoroutine(t *testing.T) {
	clk := newClock()
	r, err := registry.New(context.Background(), memstore.New(), &registry.Options{Now: clk.Now, SweepInterval: time.Millisecond})
	require.NoError(t, err)
	defer r.Close()
	a := agent("short")
	a.TTLSeconds = 5
	_, _, err = r.Register(context.Background(), a)
	require.NoError(t, err)
	clk.Advance(time.Minute)
	require.Eventually(t, func() bool { return r.Len() == 0 }, 5*time.Second, time.Millisecond)
}

func FuzzValidate(f *testing.F) {
	f.Add("name", "desc", "cap", "http://example.com/x", "team", "v", 0)
	f.Add("", "", "", "http://[::1]:80/", "K", "", 3)
	f.Add("a.b_c-d", "\xff", "\x00", "https://user@host/", "a/b", "\n", 86401)
	f.Fuzz(func(t *testing.T, name, desc, capability, endpoint, key, value string, ttl int) {
		a := registry.Agent{
			Name: name, Description: desc, Capabilities: []string{capability}, Endpoint: endpoint,
			Labels: map[string]string{key: value}, TTLSeconds: ttl,
		}
		a.Normalize()
		err := a.Validate(nil)
		if err != nil && registry.Code(err) == "" {
			t.Fatalf("validation error without a code: %v", err)
		}
	})
}

// Redacted copies everything and drops the token; RedactedView drops the
// token without copying the rest; neither touches the original.
func TestRedactedAndRedactedView(t *testing.T) {
	a := registry.Agent{Name: "x", Capabilities: []string{"a"}, Labels: map[string]string{"k": "v"},
		Auth: &registry.Auth{Type: registry.AuthBearer, Token: "secret"}}
	for name, r := range map[string]registry.Agent{"Redacted": a.Redacted(), "RedactedView": a.RedactedView()} {
		assert.Empty(t, r.Auth.Token, name)
		assert.Equal(t, registry.AuthBearer, r.Auth.Type, name)
		assert.Equal(t, a.Capabilities, r.Capabilities, name)
	}
	assert.Equal(t, "secret", a.Auth.Token, "the original keeps its token")
	v := a.RedactedView()
	assert.Same(t, &a.Capabilities[0], &v.Capabilities[0], "the view shares the slices")
	c := a.Redacted()
	assert.NotSame(t, &a.Capabilities[0], &c.Capabilities[0], "Redacted copies them")
	noToken := registry.Agent{Name: "y", Auth: &registry.Auth{Type: registry.AuthBearer}}
	assert.Same(t, noToken.Auth, noToken.RedactedView().Auth, "nothing to drop: nothing copied")
}

// MaxAgents caps creations, never replacements; deleting frees a place.
func TestMaxAgents(t *testing.T) {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), &registry.Options{MaxAgents: 3})
	require.NoError(t, err)
	defer reg.Close()
	agent := func(name string) registry.Agent {
		return registry.Agent{Name: name, Description: "d", Capabilities: []string{"c"}, Endpoint: "https://" + name + ".example.com/task"}
	}
	// Concurrent creations: exactly three succeed.
	var wg sync.WaitGroup
	var full atomic.Int32
	for i := range 10 {
		wg.Go(func() {
			_, _, err := reg.Register(ctx, agent(fmt.Sprintf("a%d", i)))
			if errors.Is(err, registry.ErrFull) {
				full.Add(1)
			} else {
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(7), full.Load())
	assert.Equal(t, 3, reg.Len())
	page, err := reg.List(ctx, registry.ListOptions{})
	require.NoError(t, err)
	first := page.Agents[0].Name
	a := agent(first)
	a.Description = "replaced"
	_, created, err := reg.Register(ctx, a)
	require.NoError(t, err, "replacing an agent of a full registry works")
	assert.False(t, created)
	_, _, err = reg.Register(ctx, agent("one-more"))
	require.ErrorIs(t, err, registry.ErrFull)
	code, msg, _ := apierr.Describe(err)
	assert.Equal(t, apierr.CodeConflict, code)
	assert.Contains(t, msg, "maximum of 3 agents")
	require.NoError(t, reg.Delete(ctx, first))
	_, _, err = reg.Register(ctx, agent("one-more"))
	require.NoError(t, err, "a deletion frees a place")
}
