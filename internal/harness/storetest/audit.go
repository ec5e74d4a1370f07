package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
)

// TestAuditStore runs the conformance cases of [audit.Store] as subtests
// of t. open must return a fresh, empty store for the subtest it is given
// and arrange its cleanup with t.Cleanup; it is called once per case. A
// nil opts means the zero [Options].
//
// Entries are made with [audit.NewID], whose IDs sort in time order: the
// suite checks that listings are newest first, that Since is inclusive and
// Before exclusive, that pages of Before cursors visit every entry once,
// and that pruning removes the oldest entries by age and by count.
func TestAuditStore(t *testing.T, open func(t *testing.T) audit.Store, opts *Options) {
	errClosed := opts.errClosed()
	cases := []suiteCase[audit.Store]{
		{"ListEmpty", testAuditListEmpty},
		{"EveryFieldRoundTrips", testAuditRoundTrip},
		{"NewestFirst", testAuditNewestFirst},
		{"SameIDReplaces", testAuditSameID},
		{"LimitDefaultsAndCap", testAuditLimit},
		{"BeforePagesVisitEveryEntryOnce", testAuditPaging},
		{"SinceIsInclusive", testAuditSince},
		{"InvalidEntryWritesNothing", testAuditInvalid},
		{"PruneByAge", testAuditPruneAge},
		{"PruneByCount", testAuditPruneCount},
		{"PruneMany", testAuditPruneMany},
		{"ReturnsCopies", testAuditCopies},
		{"ConcurrentAppends", testAuditConcurrent},
		{"DoneContextFails", testAuditDoneContext},
		{"CallsAfterCloseFail", func(t *testing.T, s audit.Store) { testAuditClose(t, s, errClosed) }},
	}
	runSuite(t, open, cases)
}

// auditBase is the time the audit cases are built around.
var auditBase = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// auditEntry returns an entry at auditBase + i seconds, with an ID made
// for that time.
func auditEntry(i int) audit.Entry {
	at := auditBase.Add(time.Duration(i) * time.Second)
	return audit.Entry{
		ID:      audit.NewID(at),
		Time:    at,
		Actor:   "ci",
		Action:  audit.ActionAgentRegister,
		Target:  fmt.Sprintf("agent-%04d", i),
		Outcome: audit.OutcomeSuccess,
	}
}

// appendAudit appends entries, failing the test on error.
func appendAudit(t *testing.T, s audit.Store, entries ...audit.Entry) {
	t.Helper()
	require.NoError(t, s.AppendAudit(t.Context(), entries))
}

// appendRange appends the entries auditEntry(from) … auditEntry(to-1) in
// one call and returns them.
func appendRange(t *testing.T, s audit.Store, from, to int) []audit.Entry {
	t.Helper()
	var es []audit.Entry
	for i := from; i < to; i++ {
		es = append(es, auditEntry(i))
	}
	appendAudit(t, s, es...)
	return es
}

// listAudit lists with q, failing the test on error.
func listAudit(t *testing.T, s audit.Store, q audit.Query) []audit.Entry {
	t.Helper()
	got, err := s.ListAudit(t.Context(), q)
	require.NoError(t, err)
	return got
}

// auditIDs returns the IDs of es.
func auditIDs(es []audit.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// newestFirst returns the IDs of es in reverse.
func newestFirst(es []audit.Entry) []string {
	out := auditIDs(es)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// normalizeEntry returns e as the suite compares entries: its time in
// UTC without monotonic reading, an empty Details as nil.
func normalizeEntry(e audit.Entry) audit.Entry {
	e = e.Clone()
	e.Time = e.Time.UTC()
	e.Details = nilIfEmptyMap(e.Details)
	return e
}

func testAuditListEmpty(t *testing.T, s audit.Store) {
	assert.Empty(t, listAudit(t, s, audit.Query{}))
	assert.Empty(t, listAudit(t, s, audit.Query{Since: auditBase, Before: audit.NewID(auditBase), Limit: 5}))
}

func testAuditRoundTrip(t *testing.T, s audit.Store) {
	zone := time.FixedZone("IST", 5*3600+1800)
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone)
	want := audit.Entry{
		ID:      audit.NewID(at),
		Time:    at,
		Actor:   "ci-bot ✓",
		Action:  audit.ActionDelegation,
		Target:  "billing",
		Outcome: audit.OutcomeFailure,
		Code:    "agent_error",
		Details: map[string]string{"id": "d-1", "status": "failed", "note": "café <b>&</b>\n\"quoted\"", "empty": ""},
	}
	bare := auditEntry(1)
	appendAudit(t, s, want, bare)
	got := listAudit(t, s, audit.Query{})
	require.Len(t, got, 2)
	byID := map[string]audit.Entry{got[0].ID: got[0], got[1].ID: got[1]}
	assert.Equal(t, normalizeEntry(want), normalizeEntry(byID[want.ID]), "every field, the time to the nanosecond")
	assert.Equal(t, normalizeEntry(bare), normalizeEntry(byID[bare.ID]), "an entry without code or details")
}

func testAuditNewestFirst(t *testing.T, s audit.Store) {
	// Appended out of order, within one call and across calls.
	es := make([]audit.Entry, 10)
	for i := range es {
		es[i] = auditEntry(i)
	}
	appendAudit(t, s, es[5], es[2], es[9])
	appendAudit(t, s, es[0], es[7], es[1], es[8])
	appendAudit(t, s, es[4], es[6], es[3])
	assert.Equal(t, newestFirst(es), auditIDs(listAudit(t, s, audit.Query{})))
}

func testAuditSameID(t *testing.T, s audit.Store) {
	es := appendRange(t, s, 0, 3)
	changed := es[1]
	changed.Outcome, changed.Code = audit.OutcomeDenied, "endpoint_not_allowed"
	appendAudit(t, s, changed)
	got := listAudit(t, s, audit.Query{})
	require.Len(t, got, 3, "an entry with a stored ID replaces it")
	assert.Equal(t, audit.OutcomeDenied, got[1].Outcome)
	assert.Equal(t, "endpoint_not_allowed", got[1].Code)

	// Replacing does not count as a new entry when pruning by count.
	n, err := s.PruneAudit(t.Context(), time.Time{}, 3)
	require.NoError(t, err)
	assert.Zero(t, n, "three entries are within keep=3")
	assert.Len(t, listAudit(t, s, audit.Query{}), 3)
}

func testAuditLimit(t *testing.T, s audit.Store) {
	es := appendRange(t, s, 0, audit.MaxListLimit+50)
	got := listAudit(t, s, audit.Query{})
	assert.Equal(t, newestFirst(es)[:audit.DefaultListLimit], auditIDs(got), "limit 0 means DefaultListLimit")
	got = listAudit(t, s, audit.Query{Limit: 7})
	assert.Equal(t, newestFirst(es)[:7], auditIDs(got))
	got = listAudit(t, s, audit.Query{Limit: audit.MaxListLimit + 40})
	assert.Len(t, got, audit.MaxListLimit, "the limit is capped at MaxListLimit")
}

func testAuditPaging(t *testing.T, s audit.Store) {
	es := appendRange(t, s, 0, 25)
	var seen []string
	q := audit.Query{Limit: 10}
	for range 10 {
		page := listAudit(t, s, q)
		seen = append(seen, auditIDs(page)...)
		if len(page) < q.Limit {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	assert.Equal(t, newestFirst(es), seen, "pages of Before cursors list every entry once, newest first")

	// Before need not be a stored ID: a time's MinID pages from that time.
	got := listAudit(t, s, audit.Query{Before: audit.MinID(auditBase.Add(5 * time.Second)), Limit: 100})
	assert.Equal(t, newestFirst(es[:5]), auditIDs(got), "Before is exclusive")
	got = listAudit(t, s, audit.Query{Before: es[0].ID})
	assert.Empty(t, got, "nothing is before the oldest entry")
	got = listAudit(t, s, audit.Query{Before: audit.MinID(auditBase.Add(time.Hour))})
	assert.Equal(t, newestFirst(es), auditIDs(got), "a cursor after the newest lists from the newest")
}

func testAuditSince(t *testing.T, s audit.Store) {
	es := appendRange(t, s, 0, 10)
	got := listAudit(t, s, audit.Query{Since: es[6].Time})
	assert.Equal(t, newestFirst(es[6:]), auditIDs(got), "Since keeps the entries at or after it")
	got = listAudit(t, s, audit.Query{Since: es[6].Time.Add(-time.Nanosecond)})
	assert.Equal(t, newestFirst(es[6:]), auditIDs(got))
	got = listAudit(t, s, audit.Query{Since: es[6].Time.Add(time.Nanosecond)})
	assert.Equal(t, newestFirst(es[7:]), auditIDs(got))
	got = listAudit(t, s, audit.Query{Since: es[3].Time, Before: es[8].ID, Limit: 3})
	assert.Equal(t, []string{es[7].ID, es[6].ID, es[5].ID}, auditIDs(got), "Since, Before and Limit together")
	got = listAudit(t, s, audit.Query{Since: es[3].Time, Before: es[5].ID, Limit: 10})
	assert.Equal(t, []string{es[4].ID, es[3].ID}, auditIDs(got))
	got = listAudit(t, s, audit.Query{Since: auditBase.Add(time.Hour)})
	assert.Empty(t, got)
	got = listAudit(t, s, audit.Query{Since: es[0].Time.In(time.FixedZone("X", -7*3600))})
	assert.Len(t, got, 10, "Since compares instants, whatever the zone")
}

func testAuditInvalid(t *testing.T, s audit.Store) {
	good := auditEntry(1)
	bad := auditEntry(2)
	bad.ID = ""
	err := s.AppendAudit(t.Context(), []audit.Entry{good, bad})
	assert.ErrorIs(t, err, audit.ErrInvalid, "an empty ID")
	long := auditEntry(3)
	long.ID = audit.NewID(long.Time) + string(make([]byte, audit.MaxIDLen))
	err = s.AppendAudit(t.Context(), []audit.Entry{long})
	assert.ErrorIs(t, err, audit.ErrInvalid, "an ID longer than MaxIDLen")
	assert.Empty(t, listAudit(t, s, audit.Query{}), "a call with an invalid entry writes none of its entries")
}

func testAuditPruneAge(t *testing.T, s audit.Store) {
	es := appendRange(t, s, 0, 10)
	n, err := s.PruneAudit(t.Context(), time.Time{}, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "zero olderThan and keep prune nothing")
	n, err = s.PruneAudit(t.Context(), es[4].Time, 0)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "entries before olderThan are deleted, the one at it is kept")
	assert.Equal(t, newestFirst(es[4:]), auditIDs(listAudit(t, s, audit.Query{})))
	n, err = s.PruneAudit(t.Context(), es[4].Time, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "pruning again deletes nothing")
}

func testAuditPruneCount(t *testing.T, s audit.Store) {
	es := appendRange(t, s, 0, 30)
	n, err := s.PruneAudit(t.Context(), time.Time{}, 10)
	require.NoError(t, err)
	assert.Equal(t, 20, n)
	assert.Equal(t, newestFirst(es[20:]), auditIDs(listAudit(t, s, audit.Query{})), "the newest keep entries remain")

	// Both bounds: age first, then count.
	more := appendRange(t, s, 30, 35)
	n, err = s.PruneAudit(t.Context(), es[25].Time, 4)
	require.NoError(t, err)
	assert.Equal(t, 11, n, "5 older than the cutoff, then 6 beyond keep")
	assert.Equal(t, newestFirst(more[1:]), auditIDs(listAudit(t, s, audit.Query{})))

	// The count stays right after pruning: new entries are counted on top.
	appendRange(t, s, 40, 43)
	n, err = s.PruneAudit(t.Context(), time.Time{}, 6)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Len(t, listAudit(t, s, audit.Query{}), 6)
}

func testAuditPruneMany(t *testing.T, s audit.Store) {
	const total, keep = 2600, 150
	for from := 0; from < total; from += 500 {
		appendRange(t, s, from, min(from+500, total))
	}
	n, err := s.PruneAudit(t.Context(), time.Time{}, keep)
	require.NoError(t, err)
	assert.Equal(t, total-keep, n)
	got := listAudit(t, s, audit.Query{Limit: audit.MaxListLimit})
	require.Len(t, got, keep)
	assert.Equal(t, auditEntry(total-1).Target, got[0].Target)
	assert.Equal(t, auditEntry(total-keep).Target, got[keep-1].Target)
}

func testAuditCopies(t *testing.T, s audit.Store) {
	e := auditEntry(1)
	e.Details = map[string]string{"k": "v"}
	in := []audit.Entry{e}
	appendAudit(t, s, in...)
	in[0].Details["k"] = "changed after append"
	in[0].Target = "changed"
	got := listAudit(t, s, audit.Query{})
	require.Len(t, got, 1)
	assert.Equal(t, "v", got[0].Details["k"], "the store keeps its own copy")
	got[0].Details["k"] = "changed after list"
	got[0].Details["new"] = "x"
	again := listAudit(t, s, audit.Query{})
	assert.Equal(t, map[string]string{"k": "v"}, again[0].Details, "a listing returns copies")
	assert.Equal(t, e.Target, again[0].Target)
}

func testAuditConcurrent(t *testing.T, s audit.Store) {
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := auditEntry(w*each + i)
				assert.NoError(t, s.AppendAudit(t.Context(), []audit.Entry{e}))
				if i%10 == 0 {
					_, err := s.ListAudit(t.Context(), audit.Query{Limit: 5})
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	got := listAudit(t, s, audit.Query{Limit: audit.MaxListLimit})
	require.Len(t, got, writers*each, "no entry lost")
	for i := 1; i < len(got); i++ {
		assert.Less(t, got[i].ID, got[i-1].ID, "newest first")
	}
}

func testAuditDoneContext(t *testing.T, s audit.Store) {
	appendRange(t, s, 0, 3)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.AppendAudit(ctx, []audit.Entry{auditEntry(10)})
	assert.ErrorIs(t, err, context.Canceled, "AppendAudit")
	_, err = s.ListAudit(ctx, audit.Query{})
	assert.ErrorIs(t, err, context.Canceled, "ListAudit")
	_, err = s.PruneAudit(ctx, time.Time{}, 1)
	assert.ErrorIs(t, err, context.Canceled, "PruneAudit")
	assert.Len(t, listAudit(t, s, audit.Query{}), 3, "calls with a done context change nothing")
}

func testAuditClose(t *testing.T, s audit.Store, errClosed error) {
	c := closerOf(t, s)
	appendRange(t, s, 0, 2)
	closeTwice(t, c)
	check := afterCloseCheck(t, errClosed)
	check("AppendAudit", s.AppendAudit(t.Context(), []audit.Entry{auditEntry(5)}))
	_, err := s.ListAudit(t.Context(), audit.Query{})
	check("ListAudit", err)
	_, err = s.PruneAudit(t.Context(), time.Time{}, 1)
	check("PruneAudit", err)
}
