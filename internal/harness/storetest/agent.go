package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
)

// TestAgentStore runs the conformance cases of [registry.Store] as subtests
// of t. open must return a fresh, empty store for the subtest it is given
// and arrange its cleanup with t.Cleanup; it is called once per case. A nil
// opts means the zero [Options].
func TestAgentStore(t *testing.T, open func(t *testing.T) registry.Store, opts *Options) {
	errClosed := opts.errClosed()
	cases := []suiteCase[registry.Store]{
		{"GetMissingIsNotFound", testGetMissing},
		{"ListEmpty", testListEmpty},
		{"CreateSeesNil", testCreate},
		{"ReplaceSeesCurrent", testReplace},
		{"DeleteByReturningNil", testDelete},
		{"DeleteMissingIsNoOp", testDeleteMissing},
		{"FnErrorWritesNothing", testFnError},
		{"EveryFieldRoundTrips", testRoundTrip},
		{"LargeRecord", testLargeRecord},
		{"ListInNameOrder", testListOrder},
		{"ReturnsCopies", testCopies},
		{"ConcurrentUpdatesSameName", testConcurrentSameName},
		{"ConcurrentWritersDifferentNames", testConcurrentDifferentNames},
		{"ReadersSeeWholeRecords", testReadersSeeWholeRecords},
		{"DoneContextFails", testDoneContext},
		{"CallsAfterCloseFail", func(t *testing.T, s registry.Store) { testClose(t, s, errClosed) }},
		{"CloseWhileWriting", func(t *testing.T, s registry.Store) { testCloseWhileWriting(t, s, errClosed) }},
	}
	runSuite(t, open, cases)
}

// put stores a under its name, failing the test on error.
func put(t *testing.T, s registry.Store, a registry.Agent) {
	t.Helper()
	require.NoError(t, s.UpdateAgent(t.Context(), a.Name, func(*registry.Agent) (*registry.Agent, error) {
		return &a, nil
	}))
}

// get returns the agent stored under name, failing the test on error.
func get(t *testing.T, s registry.Store, name string) registry.Agent {
	t.Helper()
	a, err := s.GetAgent(t.Context(), name)
	require.NoError(t, err)
	return a
}

// sampleAgent returns an agent with every field set, distinct per name.
func sampleAgent(name string) registry.Agent {
	th := 0.85
	zone := time.FixedZone("IST", 5*3600+1800)
	return registry.Agent{
		Name:         name,
		DisplayName:  "Agent " + name,
		Description:  "Handles " + name + " requests.\nSecond line with unicode: café ✓",
		Capabilities: []string{"budget", "cost-center", name},
		Examples:     []string{"what is my budget?", "move cost center " + name},
		Resources: []registry.Resource{
			{URI: "https://finance.example.com/" + name, Description: "ledger", Access: registry.AccessRead},
			{URI: "db://ledgers/*", Access: registry.AccessAdmin},
		},
		Endpoint: "https://" + name + ".example.com/task",
		Protocol: registry.ProtocolMCP,
		Auth: &registry.Auth{
			Type:       registry.AuthHeader,
			Token:      "tok-" + name + "-s3cret",
			HeaderName: "X-Api-Key",
		},
		IsDefault:             false,
		ConfidenceThreshold:   &th,
		ClarificationRequired: true,
		ClarificationContext:  "I can move budgets.",
		Labels:                map[string]string{"team": "finance", "tier": "gold", "n": "0"},
		TTLSeconds:            30,
		RegisteredAt:          time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone),
		UpdatedAt:             time.Date(2025, 3, 14, 15, 9, 27, 1, time.UTC),
		LastSeen:              time.Date(2025, 3, 14, 15, 10, 0, 999, time.Local),
		Source:                registry.SourceAPI,
	}
}

// normalize returns a copy of a in the form the suite compares: times
// without location or monotonic reading, empty slices and maps as nil.
func normalize(a registry.Agent) registry.Agent {
	a = a.Clone()
	a.RegisteredAt, a.UpdatedAt, a.LastSeen = a.RegisteredAt.UTC(), a.UpdatedAt.UTC(), a.LastSeen.UTC()
	a.Capabilities = nilIfEmpty(a.Capabilities)
	a.Examples = nilIfEmpty(a.Examples)
	a.Resources = nilIfEmpty(a.Resources)
	a.Labels = nilIfEmptyMap(a.Labels)
	return a
}

// assertAgent checks that got is want, as normalize compares them, and that
// each time is the same instant.
func assertAgent(t *testing.T, want, got registry.Agent) bool {
	t.Helper()
	ok := assert.Equal(t, normalize(want), normalize(got))
	for _, p := range [][2]time.Time{
		{want.RegisteredAt, got.RegisteredAt},
		{want.UpdatedAt, got.UpdatedAt},
		{want.LastSeen, got.LastSeen},
	} {
		ok = assert.Truef(t, p[0].Equal(p[1]), "time %v stored as %v", p[0], p[1]) && ok
	}
	return ok
}

func testGetMissing(t *testing.T, s registry.Store) {
	_, err := s.GetAgent(t.Context(), "missing")
	require.Error(t, err)
	assert.ErrorIs(t, err, registry.ErrNotFound)
}

func testListEmpty(t *testing.T, s registry.Store) {
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	assert.Empty(t, list)
}

func testCreate(t *testing.T, s registry.Store) {
	want := sampleAgent("finance")
	calls := 0
	err := s.UpdateAgent(t.Context(), "finance", func(cur *registry.Agent) (*registry.Agent, error) {
		calls++
		assert.Nil(t, cur, "fn must see nil for a missing record")
		a := want.Clone()
		return &a, nil
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, calls, 1, "fn must be called")
	assertAgent(t, want, get(t, s, "finance"))
}

func testReplace(t *testing.T, s registry.Store) {
	first := sampleAgent("finance")
	put(t, s, first)
	second := sampleAgent("finance")
	second.Description = "replaced"
	second.Labels = map[string]string{"team": "other"}
	second.Auth = nil
	second.ConfidenceThreshold = nil
	err := s.UpdateAgent(t.Context(), "finance", func(cur *registry.Agent) (*registry.Agent, error) {
		if assert.NotNil(t, cur, "fn must see the stored record") {
			assertAgent(t, first, *cur)
		}
		a := second.Clone()
		return &a, nil
	})
	require.NoError(t, err)
	got := get(t, s, "finance")
	assertAgent(t, second, got)
	assert.Nil(t, got.Auth, "a nil Auth must replace the stored one")
	assert.Nil(t, got.ConfidenceThreshold, "a nil threshold must replace the stored one")

	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1, "replacing must not add a record")
}

func testDelete(t *testing.T, s registry.Store) {
	put(t, s, sampleAgent("finance"))
	put(t, s, sampleAgent("hr"))
	err := s.UpdateAgent(t.Context(), "finance", func(cur *registry.Agent) (*registry.Agent, error) {
		assert.NotNil(t, cur)
		return nil, nil
	})
	require.NoError(t, err)
	_, err = s.GetAgent(t.Context(), "finance")
	assert.ErrorIs(t, err, registry.ErrNotFound)
	assert.Equal(t, "hr", get(t, s, "hr").Name, "deleting one record must leave the others")

	err = s.UpdateAgent(t.Context(), "finance", func(cur *registry.Agent) (*registry.Agent, error) {
		assert.Nil(t, cur, "fn must see nil after a delete")
		return nil, nil
	})
	require.NoError(t, err)

	// A deleted name can be created again.
	put(t, s, sampleAgent("finance"))
	assert.Equal(t, "finance", get(t, s, "finance").Name)
}

func testDeleteMissing(t *testing.T, s registry.Store) {
	err := s.UpdateAgent(t.Context(), "missing", func(cur *registry.Agent) (*registry.Agent, error) {
		assert.Nil(t, cur)
		return nil, nil
	})
	require.NoError(t, err)
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = s.GetAgent(t.Context(), "missing")
	assert.ErrorIs(t, err, registry.ErrNotFound)
}

func testFnError(t *testing.T, s registry.Store) {
	errBoom := errors.New("storetest: boom")

	// On a missing record: nothing is created.
	err := s.UpdateAgent(t.Context(), "new", func(*registry.Agent) (*registry.Agent, error) {
		a := sampleAgent("new")
		return &a, errBoom
	})
	assert.Same(t, errBoom, err, "UpdateAgent must return fn's error unchanged") //nolint:testifylint // identity is the point
	_, err = s.GetAgent(t.Context(), "new")
	assert.ErrorIs(t, err, registry.ErrNotFound, "fn's error must write nothing")

	// On an existing record: it is neither replaced nor deleted.
	want := sampleAgent("finance")
	put(t, s, want)
	err = s.UpdateAgent(t.Context(), "finance", func(*registry.Agent) (*registry.Agent, error) {
		a := sampleAgent("finance")
		a.Description = "must not be written"
		return &a, errBoom
	})
	assert.Same(t, errBoom, err)
	assertAgent(t, want, get(t, s, "finance"))

	err = s.UpdateAgent(t.Context(), "finance", func(*registry.Agent) (*registry.Agent, error) {
		return nil, errBoom
	})
	assert.Same(t, errBoom, err)
	assertAgent(t, want, get(t, s, "finance"))

	// A wrapped error comes back as the same value too.
	wrapped := fmt.Errorf("wrapped: %w", registry.ErrManagedByFile)
	err = s.UpdateAgent(t.Context(), "finance", func(*registry.Agent) (*registry.Agent, error) {
		return nil, wrapped
	})
	assert.Same(t, wrapped, err)
}

func testRoundTrip(t *testing.T, s registry.Store) {
	zero := 0.0
	full := sampleAgent("full")
	full.LastSeen = time.Now() // with a monotonic clock reading
	agents := []registry.Agent{
		full,
		{
			// The fewest fields: zero times, no auth, no threshold.
			Name:     "minimal",
			Endpoint: "https://minimal.example.com/task",
		},
		{
			// A threshold pointer to zero is not the same as no threshold.
			Name:                "default-agent",
			Capabilities:        []string{},
			Endpoint:            "inprocess:default-agent",
			Protocol:            registry.ProtocolInProcess,
			Auth:                &registry.Auth{Type: registry.AuthBearer, Token: "t"},
			IsDefault:           true,
			ConfidenceThreshold: &zero,
			Source:              registry.SourceFile,
			RegisteredAt:        time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		},
	}
	for _, a := range agents {
		put(t, s, a)
	}
	for _, want := range agents {
		got := get(t, s, want.Name)
		assertAgent(t, want, got)
		if want.Auth != nil && assert.NotNil(t, got.Auth, "%s: auth", want.Name) {
			assert.Equal(t, want.Auth.Token, got.Auth.Token, "the store keeps the token")
		}
		if want.ConfidenceThreshold != nil && assert.NotNil(t, got.ConfidenceThreshold, "%s: threshold", want.Name) {
			assert.Equal(t, *want.ConfidenceThreshold, *got.ConfidenceThreshold) //nolint:testifylint // exact round trip
		} else {
			assert.Nil(t, got.ConfidenceThreshold, "%s: threshold", want.Name)
		}
		assert.Equal(t, want.RegisteredAt.Nanosecond(), got.RegisteredAt.Nanosecond(), "nanoseconds must survive")
		assert.Equal(t, want.RegisteredAt.IsZero(), got.RegisteredAt.IsZero())
		assert.Equal(t, want.LastSeen.IsZero(), got.LastSeen.IsZero())
	}
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, len(agents))
	byName := map[string]registry.Agent{}
	for _, a := range list {
		byName[a.Name] = a
	}
	for _, want := range agents {
		assertAgent(t, want, byName[want.Name])
	}
}

func testLargeRecord(t *testing.T, s registry.Store) {
	// The largest record the agent record's limits allow is about 200 KiB
	// (docs/AGENTS.md#the-agent-record).
	a := sampleAgent("large")
	a.Description = strings.Repeat("d", registry.MaxDescriptionLen)
	a.Examples = make([]string, registry.MaxExamples)
	for i := range a.Examples {
		a.Examples[i] = fmt.Sprintf("%03d %s", i, strings.Repeat("e", registry.MaxExampleLen-4))
	}
	a.Capabilities = make([]string, registry.MaxCapabilities)
	for i := range a.Capabilities {
		a.Capabilities[i] = fmt.Sprintf("cap-%02d-%s", i, strings.Repeat("c", 100))
	}
	a.Auth.Token = strings.Repeat("t", registry.MaxAuthTokenLen)
	put(t, s, a)
	put(t, s, sampleAgent("small")) // a neighbour, to catch overlapping writes
	assertAgent(t, a, get(t, s, "large"))
	assertAgent(t, sampleAgent("small"), get(t, s, "small"))
}

func testListOrder(t *testing.T, s registry.Store) {
	names := []string{"b", "a", "B", "a-1", "a.1", "a_1", "Z", "0", "aa", "a0", "z9", "Zz"}
	for _, name := range names {
		put(t, s, sampleAgent(name))
	}
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	got := make([]string, len(list))
	for i, a := range list {
		got[i] = a.Name
		assertAgent(t, sampleAgent(a.Name), a)
	}
	want := slices.Clone(names)
	slices.Sort(want) // byte-wise, as strings.Compare
	assert.Equal(t, want, got, "ListAgents must return ascending name order")
}

func testCopies(t *testing.T, s registry.Store) {
	want := sampleAgent("finance")

	// What fn returned is not kept by reference.
	var returned *registry.Agent
	require.NoError(t, s.UpdateAgent(t.Context(), "finance", func(*registry.Agent) (*registry.Agent, error) {
		a := want.Clone()
		returned = &a
		return returned, nil
	}))
	mutate(returned)
	assertAgent(t, want, get(t, s, "finance"))

	// Values from GetAgent are copies.
	got := get(t, s, "finance")
	mutate(&got)
	assertAgent(t, want, get(t, s, "finance"))

	// Values from ListAgents are copies.
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	mutate(&list[0])
	assertAgent(t, want, get(t, s, "finance"))
}

// mutate changes every reference-typed field of a in place.
func mutate(a *registry.Agent) {
	a.Description = "mutated"
	a.Capabilities[0] = "mutated"
	a.Examples[0] = "mutated"
	a.Resources[0].URI = "mutated"
	a.Labels["team"] = "mutated"
	a.Labels["extra"] = "mutated"
	a.Auth.Token = "mutated"
	*a.ConfidenceThreshold = 0.01
}

func testConcurrentSameName(t *testing.T, s registry.Store) {
	const goroutines, each = 16, 25
	put(t, s, sampleAgent("counter"))
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				err := s.UpdateAgent(t.Context(), "counter", func(cur *registry.Agent) (*registry.Agent, error) {
					if cur == nil {
						return nil, errors.New("storetest: counter record vanished")
					}
					n, err := strconv.Atoi(cur.Labels["n"])
					if err != nil {
						return nil, err
					}
					next := cur.Clone()
					next.Labels["n"] = strconv.Itoa(n + 1)
					return &next, nil
				})
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	got := get(t, s, "counter")
	assert.Equal(t, strconv.Itoa(goroutines*each), got.Labels["n"], "concurrent read-modify-writes lost updates")
}

func testConcurrentDifferentNames(t *testing.T, s registry.Store) {
	const goroutines, each = 16, 10
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				a := sampleAgent(fmt.Sprintf("agent-%02d-%02d", g, i))
				err := s.UpdateAgent(t.Context(), a.Name, func(cur *registry.Agent) (*registry.Agent, error) {
					if cur != nil {
						return nil, errors.New("storetest: fn saw a record for a new name")
					}
					return &a, nil
				})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, goroutines*each, "every concurrent writer's record must land")
	for i, a := range list {
		assert.Equal(t, fmt.Sprintf("agent-%02d-%02d", i/each, i%each), a.Name)
		assertAgent(t, sampleAgent(a.Name), a)
	}
}

func testReadersSeeWholeRecords(t *testing.T, s registry.Store) {
	// A writer rewrites a record whose fields all carry the same generation;
	// readers must never see fields from two generations.
	const generations = 100
	gen := func(n int) registry.Agent {
		a := sampleAgent("torn")
		g := strconv.Itoa(n)
		a.Description = "generation " + g
		a.Capabilities = []string{"gen-" + g}
		a.Labels = map[string]string{"n": g}
		a.Auth.Token = "tok-" + g
		return a
	}
	put(t, s, gen(0))
	ctx := t.Context()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := s.GetAgent(ctx, "torn")
				if !assert.NoError(t, err) {
					return
				}
				n, err := strconv.Atoi(a.Labels["n"])
				if !assert.NoError(t, err) || !assertAgent(t, gen(n), a) {
					return
				}
				list, err := s.ListAgents(ctx)
				if !assert.NoError(t, err) || !assert.Len(t, list, 1) {
					return
				}
			}
		})
	}
	for i := 1; i <= generations; i++ {
		put(t, s, gen(i))
	}
	close(stop)
	wg.Wait()
	assertAgent(t, gen(generations), get(t, s, "torn"))
}

func testDoneContext(t *testing.T, s registry.Store) {
	put(t, s, sampleAgent("finance"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := s.GetAgent(ctx, "finance")
	assert.ErrorIs(t, err, context.Canceled, "GetAgent")
	_, err = s.ListAgents(ctx)
	assert.ErrorIs(t, err, context.Canceled, "ListAgents")
	err = s.UpdateAgent(ctx, "new", func(*registry.Agent) (*registry.Agent, error) {
		a := sampleAgent("new")
		return &a, nil
	})
	assert.ErrorIs(t, err, context.Canceled, "UpdateAgent")
	_, err = s.GetAgent(t.Context(), "new")
	assert.ErrorIs(t, err, registry.ErrNotFound, "UpdateAgent with a done context must write nothing")

	ctx, cancel = context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = s.GetAgent(ctx, "finance")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "GetAgent past its deadline")
}

func testClose(t *testing.T, s registry.Store, errClosed error) {
	c := closerOf(t, s)
	put(t, s, sampleAgent("finance"))
	closeTwice(t, c)

	check := afterCloseCheck(t, errClosed)
	_, err := s.GetAgent(t.Context(), "finance")
	check("GetAgent", err)
	_, err = s.ListAgents(t.Context())
	check("ListAgents", err)
	err = s.UpdateAgent(t.Context(), "finance", func(*registry.Agent) (*registry.Agent, error) {
		a := sampleAgent("finance")
		return &a, nil
	})
	check("UpdateAgent", err)
	err = s.UpdateAgent(t.Context(), "finance", func(*registry.Agent) (*registry.Agent, error) {
		return nil, nil
	})
	check("UpdateAgent (delete)", err)
}

func testCloseWhileWriting(t *testing.T, s registry.Store, errClosed error) {
	closeWhileWriting(t, s, errClosed, "UpdateAgent", func(w, i int) error {
		a := sampleAgent(fmt.Sprintf("w%d-%d", w, i))
		return s.UpdateAgent(t.Context(), a.Name, func(*registry.Agent) (*registry.Agent, error) {
			return &a, nil
		})
	})
}
