package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
)

// TestBreakerStore runs the conformance cases of [breaker.Store] as
// subtests of t. open must return a fresh, empty store for the subtest it
// is given and arrange its cleanup with t.Cleanup; it is called once per
// case. A nil opts means the zero [Options].
func TestBreakerStore(t *testing.T, open func(t *testing.T) breaker.Store, opts *Options) {
	errClosed := opts.errClosed()
	cases := []suiteCase[breaker.Store]{
		{"LoadEmpty", testBreakerLoadEmpty},
		{"EveryStateRoundTrips", testBreakerRoundTrip},
		{"ZeroTimesStayZero", testBreakerZeroTimes},
		{"SaveReplaces", testBreakerSaveReplaces},
		{"ManyNamesAreIndependent", testBreakerManyNames},
		{"NamesAreExactAndCaseSensitive", testBreakerNames},
		{"DeleteRemovesOnlyThatName", testBreakerDelete},
		{"DeleteMissingIsNoOp", testBreakerDeleteMissing},
		{"LoadReturnsTheCallersMap", testBreakerLoadCopy},
		{"ConcurrentSaves", testBreakerConcurrentSaves},
		{"DoneContextFails", testBreakerDoneContext},
		{"CallsAfterCloseFail", func(t *testing.T, s breaker.Store) { testBreakerClose(t, s, errClosed) }},
	}
	runSuite(t, open, cases)
}

// sampleSnapshots returns one snapshot per state, with every field set
// and times that carry nanoseconds and a non-UTC zone.
func sampleSnapshots() map[string]breaker.Snapshot {
	zone := time.FixedZone("IST", 5*3600+1800)
	since := time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone)
	return map[string]breaker.Snapshot{
		"closed-agent": {State: breaker.StateClosed, Since: since, Multiplier: 1, Failures: 4},
		"open-agent": {
			State: breaker.StateOpen, Since: since,
			OpenUntil: since.Add(8 * time.Minute), Multiplier: 16,
		},
		"half-open-agent": {State: breaker.StateHalfOpen, Since: since.Add(time.Nanosecond), Multiplier: 32},
	}
}

// normalizeSnapshot drops the location and monotonic reading of s's times,
// so that equal instants compare equal.
func normalizeSnapshot(s breaker.Snapshot) breaker.Snapshot {
	if !s.Since.IsZero() {
		s.Since = s.Since.UTC()
	}
	if !s.OpenUntil.IsZero() {
		s.OpenUntil = s.OpenUntil.UTC()
	}
	return s
}

// loadBreakers returns every stored snapshot, normalised, failing the test
// on error.
func loadBreakers(t *testing.T, s breaker.Store) map[string]breaker.Snapshot {
	t.Helper()
	m, err := s.LoadBreakers(t.Context())
	require.NoError(t, err)
	out := make(map[string]breaker.Snapshot, len(m))
	for name, snap := range m {
		out[name] = normalizeSnapshot(snap)
	}
	return out
}

// saveBreaker stores snap under name, failing the test on error.
func saveBreaker(t *testing.T, s breaker.Store, name string, snap breaker.Snapshot) {
	t.Helper()
	require.NoError(t, s.SaveBreaker(t.Context(), name, snap))
}

func testBreakerLoadEmpty(t *testing.T, s breaker.Store) {
	assert.Empty(t, loadBreakers(t, s))
}

func testBreakerRoundTrip(t *testing.T, s breaker.Store) {
	want := sampleSnapshots()
	for name, snap := range want {
		saveBreaker(t, s, name, snap)
	}
	got := loadBreakers(t, s)
	require.Len(t, got, len(want))
	for name, snap := range want {
		assert.Equal(t, normalizeSnapshot(snap), got[name], "%s: every field, times to the nanosecond", name)
	}
}

func testBreakerZeroTimes(t *testing.T, s breaker.Store) {
	saveBreaker(t, s, "a", breaker.Snapshot{State: breaker.StateClosed, Multiplier: 1})
	got := loadBreakers(t, s)["a"]
	assert.True(t, got.Since.IsZero(), "zero Since came back as %v", got.Since)
	assert.True(t, got.OpenUntil.IsZero(), "zero OpenUntil came back as %v", got.OpenUntil)
	assert.Equal(t, breaker.Snapshot{State: breaker.StateClosed, Multiplier: 1}, got)
}

func testBreakerSaveReplaces(t *testing.T, s breaker.Store) {
	snaps := sampleSnapshots()
	saveBreaker(t, s, "a", snaps["open-agent"])
	saveBreaker(t, s, "a", snaps["half-open-agent"])
	got := loadBreakers(t, s)
	require.Len(t, got, 1)
	// OpenUntil of the first save must not survive (no field merging).
	assert.Equal(t, normalizeSnapshot(snaps["half-open-agent"]), got["a"])
	saveBreaker(t, s, "a", snaps["closed-agent"])
	assert.Equal(t, normalizeSnapshot(snaps["closed-agent"]), loadBreakers(t, s)["a"])
}

func testBreakerManyNames(t *testing.T, s breaker.Store) {
	const n = 200
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		saveBreaker(t, s, fmt.Sprintf("agent-%03d", i), breaker.Snapshot{
			State: breaker.StateOpen, Since: base, OpenUntil: base.Add(time.Duration(i) * time.Second),
			Multiplier: 1 << (i % 6),
		})
	}
	got := loadBreakers(t, s)
	require.Len(t, got, n)
	for i := range n {
		snap := got[fmt.Sprintf("agent-%03d", i)]
		assert.True(t, base.Add(time.Duration(i)*time.Second).Equal(snap.OpenUntil), "agent-%03d", i)
		assert.Equal(t, 1<<(i%6), snap.Multiplier, "agent-%03d", i)
	}
}

func testBreakerNames(t *testing.T, s breaker.Store) {
	// Every name the registry accepts, including the longest, and names
	// that differ only in case or by a prefix.
	names := []string{"a", "A", "ab", "a.b", "a_b", "a-b", "0", strings.Repeat("x", 128)}
	for i, name := range names {
		saveBreaker(t, s, name, breaker.Snapshot{State: breaker.StateClosed, Multiplier: 1, Failures: i})
	}
	got := loadBreakers(t, s)
	require.Len(t, got, len(names))
	for i, name := range names {
		assert.Equal(t, i, got[name].Failures, "name %q", name)
	}
}

func testBreakerDelete(t *testing.T, s breaker.Store) {
	for name, snap := range sampleSnapshots() {
		saveBreaker(t, s, name, snap)
	}
	require.NoError(t, s.DeleteBreaker(t.Context(), "open-agent"))
	got := loadBreakers(t, s)
	assert.NotContains(t, got, "open-agent")
	assert.Contains(t, got, "closed-agent")
	assert.Contains(t, got, "half-open-agent")

	// A deleted name can be saved again.
	saveBreaker(t, s, "open-agent", sampleSnapshots()["open-agent"])
	assert.Contains(t, loadBreakers(t, s), "open-agent")
}

func testBreakerDeleteMissing(t *testing.T, s breaker.Store) {
	assert.NoError(t, s.DeleteBreaker(t.Context(), "never-stored"))
	saveBreaker(t, s, "a", sampleSnapshots()["closed-agent"])
	require.NoError(t, s.DeleteBreaker(t.Context(), "a"))
	assert.NoError(t, s.DeleteBreaker(t.Context(), "a"), "deleting twice")
	assert.Empty(t, loadBreakers(t, s))
}

func testBreakerLoadCopy(t *testing.T, s breaker.Store) {
	saveBreaker(t, s, "a", sampleSnapshots()["open-agent"])
	m, err := s.LoadBreakers(t.Context())
	require.NoError(t, err)
	m["a"] = breaker.Snapshot{State: breaker.StateClosed, Multiplier: 1}
	m["injected"] = breaker.Snapshot{}
	delete(m, "a")
	got := loadBreakers(t, s)
	assert.Equal(t, normalizeSnapshot(sampleSnapshots()["open-agent"]), got["a"])
	assert.NotContains(t, got, "injected")
}

func testBreakerConcurrentSaves(t *testing.T, s breaker.Store) {
	// Writers to different names lose nothing; writers to one name leave
	// one of the written values, whole.
	const goroutines, each = 16, 20
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				until := base.Add(time.Duration(g*each+i) * time.Second)
				snap := breaker.Snapshot{State: breaker.StateOpen, Since: base, OpenUntil: until, Multiplier: 1 + g%2}
				assert.NoError(t, s.SaveBreaker(t.Context(), fmt.Sprintf("own-%02d", g), snap))
				assert.NoError(t, s.SaveBreaker(t.Context(), "shared", snap))
				if i%5 == 0 {
					_, err := s.LoadBreakers(t.Context())
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	got := loadBreakers(t, s)
	require.Len(t, got, goroutines+1)
	for g := range goroutines {
		snap := got[fmt.Sprintf("own-%02d", g)]
		assert.True(t, base.Add(time.Duration(g*each+each-1)*time.Second).Equal(snap.OpenUntil),
			"own-%02d: the last save of its only writer must win", g)
	}
	shared := got["shared"]
	g := int(shared.OpenUntil.Sub(base)/time.Second) / each
	assert.Equal(t, 1+g%2, shared.Multiplier, "shared: fields from different saves were mixed")
}

func testBreakerDoneContext(t *testing.T, s breaker.Store) {
	saveBreaker(t, s, "a", sampleSnapshots()["open-agent"])
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := s.LoadBreakers(ctx)
	assert.ErrorIs(t, err, context.Canceled, "LoadBreakers")
	err = s.SaveBreaker(ctx, "b", sampleSnapshots()["closed-agent"])
	assert.ErrorIs(t, err, context.Canceled, "SaveBreaker")
	err = s.DeleteBreaker(ctx, "a")
	assert.ErrorIs(t, err, context.Canceled, "DeleteBreaker")

	got := loadBreakers(t, s)
	assert.NotContains(t, got, "b", "SaveBreaker with a done context must write nothing")
	assert.Contains(t, got, "a", "DeleteBreaker with a done context must delete nothing")
}

func testBreakerClose(t *testing.T, s breaker.Store, errClosed error) {
	c := closerOf(t, s)
	saveBreaker(t, s, "a", sampleSnapshots()["open-agent"])
	closeTwice(t, c)

	check := afterCloseCheck(t, errClosed)
	_, err := s.LoadBreakers(t.Context())
	check("LoadBreakers", err)
	check("SaveBreaker", s.SaveBreaker(t.Context(), "a", sampleSnapshots()["closed-agent"]))
	check("DeleteBreaker", s.DeleteBreaker(t.Context(), "a"))
}
