package storetest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/principal"
)

// TestDelegationStore runs the conformance cases of [delegation.Store] as
// subtests of t. open must return a fresh, empty store for the subtest it
// is given and arrange its cleanup with t.Cleanup; it is called once per
// case. A nil opts means the zero [Options].
//
// Besides the interface's own contract, the suite checks the choices every
// store must make the same way where the interface is silent:
//
//   - PutDelegations refuses a record with an empty ID, and then writes
//     none of the batch; records with the same ID in one batch are
//     written in order (the last stays);
//   - an UpdateDelegation function that returns nil and no error writes
//     nothing; one that returns a record with another ID fails the call,
//     writing nothing;
//   - ListDelegations applies Status and Statuses both (a record must pass
//     each filter that is set), orders IDs byte-wise, treats Limit ≤ 0 as
//     [delegation.DefaultListLimit] and caps it at
//     [delegation.MaxListLimit];
//   - PruneDelegations counts keep against all records (final or not),
//     treats keep ≤ 0 as no limit, takes a final record's finish time from
//     FinishedAt or, when that is nil, UpdatedAt, deletes only records
//     that finished strictly before olderThan, and breaks ties in finish
//     time by ID.
//
// Result is compared as JSON (a store may re-encode it: compact it, escape
// HTML characters).
func TestDelegationStore(t *testing.T, open func(t *testing.T) delegation.Store, opts *Options) {
	errClosed := opts.errClosed()
	cases := []suiteCase[delegation.Store]{
		{"GetMissingIsNotFound", testDelegationGetMissing},
		{"ListEmpty", testDelegationListEmpty},
		{"EveryFieldRoundTrips", testDelegationRoundTrip},
		{"LargeResult", testDelegationLargeResult},
		{"PutReplaces", testDelegationPutReplaces},
		{"PutBatch", testDelegationPutBatch},
		{"PutRefusesEmptyIDAndWritesNothing", testDelegationPutEmptyID},
		{"UpdateSeesCurrentAndMovesIndexes", testDelegationUpdate},
		{"UpdateMissingIsNotFound", testDelegationUpdateMissing},
		{"UpdateFnErrorWritesNothing", testDelegationUpdateFnError},
		{"UpdateReturningNilWritesNothing", testDelegationUpdateNil},
		{"UpdateCannotChangeID", testDelegationUpdateID},
		{"ConcurrentUpdatesLoseNothing", testDelegationConcurrentUpdates},
		{"FailedUpdatesDoNotAffectOthers", testDelegationUpdateIsolation},
		{"ConcurrentWritersLoseNothing", testDelegationConcurrentWriters},
		{"ListNewestFirst", testDelegationListOrder},
		{"ListFilters", testDelegationListFilters},
		{"ListPaging", testDelegationListPaging},
		{"ListDuringWrites", testDelegationListDuringWrites},
		{"PruneByAge", testDelegationPruneByAge},
		{"PruneByCount", testDelegationPruneByCount},
		{"PruneByAgeThenCount", testDelegationPruneBoth},
		{"PruneHoldsTheBoundUnderWrites", testDelegationPruneUnderWrites},
		{"PrunedRecordsAreGone", testDelegationPrunedGone},
		{"ReturnsCopies", testDelegationCopies},
		{"DoneContextFails", testDelegationDoneContext},
		{"CallsAfterCloseFail", func(t *testing.T, s delegation.Store) { testDelegationClose(t, s, errClosed) }},
		{"CloseWhileWriting", func(t *testing.T, s delegation.Store) { testDelegationCloseWhileWriting(t, s, errClosed) }},
	}
	runSuite(t, open, cases)
}

// delegationBase is the time the delegation cases are built around.
var delegationBase = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// putRecords stores recs in one call, failing the test on error.
func putRecords(t *testing.T, s delegation.Store, recs ...delegation.Record) {
	t.Helper()
	require.NoError(t, s.PutDelegations(t.Context(), recs))
}

// getRecord returns the record id, failing the test on error.
func getRecord(t *testing.T, s delegation.Store, id string) delegation.Record {
	t.Helper()
	rec, err := s.GetDelegation(t.Context(), id)
	require.NoError(t, err)
	return rec
}

// listIDs returns the IDs ListDelegations returns for f, failing the test
// on error.
func listIDs(t *testing.T, s delegation.Store, f delegation.ListFilter) []string {
	t.Helper()
	recs, err := s.ListDelegations(t.Context(), f)
	require.NoError(t, err)
	return recordIDs(recs)
}

func recordIDs(recs []delegation.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// storedIDs returns the IDs of every stored record, sorted.
func storedIDs(t *testing.T, s delegation.Store) []string {
	t.Helper()
	var ids []string
	for offset := 0; ; offset += delegation.MaxListLimit {
		page := listIDs(t, s, delegation.ListFilter{Limit: delegation.MaxListLimit, Offset: offset})
		ids = append(ids, page...)
		if len(page) < delegation.MaxListLimit {
			break
		}
		// The suite never stores this many: the store ignores Offset.
		require.Less(t, offset, 100*delegation.MaxListLimit, "paging does not end")
	}
	slices.Sort(ids)
	return ids
}

// minimalRecord returns a record with only the fields a new delegation
// always has.
func minimalRecord(id string, status delegation.Status, created time.Time) delegation.Record {
	return delegation.Record{
		ID:          id,
		TargetAgent: "finance",
		Task:        "task " + id,
		Status:      status,
		CreatedAt:   created,
		UpdatedAt:   created,
	}
}

// finishedRecord returns a final record that finished at finished.
func finishedRecord(id string, status delegation.Status, finished time.Time) delegation.Record {
	r := minimalRecord(id, status, finished.Add(-time.Second))
	r.UpdatedAt = finished
	r.FinishedAt = &finished
	return r
}

// fullRecord returns a record with every field set, times with
// nanoseconds in a non-UTC zone, distinct per id.
func fullRecord(id string) delegation.Record {
	zone := time.FixedZone("IST", 5*3600+1800)
	created := time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone)
	finished := created.Add(1500*time.Millisecond + 7)
	deadline := created.Add(time.Hour).In(time.UTC)
	return delegation.Record{
		ID:          id,
		SourceAgent: "orchestrator",
		TargetAgent: "finance",
		Task:        "Get budget and cost center for " + id + "\nunicode: café ✓ <b>&</b>",
		Status:      delegation.StatusCompleted,
		Result:      json.RawMessage(`{"budget": 125000.5, "currency": "EUR", "items": [1, "two", null, true], "html": "<b>&</b>", "id": "` + id + `"}`),
		LatencyMs:   1500,
		Attempts:    3,
		Depth:       2,
		Async:       true,
		NeedsInput:  true,
		Response: &delegation.AgentResponse{
			Content:          "The budget is 125k EUR for " + id,
			WorkflowComplete: true,
			WorkflowState:    workflowState(),
		},
		CreatedAt:  created,
		UpdatedAt:  finished,
		FinishedAt: &finished,
		Deadline:   &deadline,
		SecretHash: []byte{0x00, 0xff, 0x10, 0x80, 'a', 0x7f, 0xfe, 0x01, 0x00, 0x9c, 0x42, 0x13, 0x37, 0xde, 0xad, 0xbe,
			0xef, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee},
		Owner:     "owner-of-" + id,
		Principal: "team-a",
	}
}

// normalizeRecord returns a copy of r in the form the suite compares:
// times in UTC without monotonic reading, empty slices and maps as nil,
// Result left out (compared as JSON by assertRecord).
func normalizeRecord(r delegation.Record) delegation.Record {
	utc := func(p *time.Time) *time.Time {
		if p == nil {
			return nil
		}
		u := p.UTC()
		return &u
	}
	r.Result = nil
	r.SecretHash = nilIfEmpty(slices.Clone(r.SecretHash))
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	r.FinishedAt, r.Deadline = utc(r.FinishedAt), utc(r.Deadline)
	if r.Response != nil {
		resp := *r.Response
		resp.WorkflowState = nilIfEmptyMap(resp.WorkflowState)
		r.Response = &resp
	}
	return r
}

// assertRecord checks that got is want, as normalizeRecord compares them,
// with the same Result as JSON and each time the same instant.
func assertRecord(t *testing.T, want, got delegation.Record) bool {
	t.Helper()
	ok := assert.Equal(t, normalizeRecord(want), normalizeRecord(got), "record %s", want.ID)
	if len(want.Result) == 0 {
		ok = assert.Empty(t, got.Result, "record %s: result", want.ID) && ok
	} else {
		ok = assert.JSONEq(t, string(want.Result), string(got.Result), "record %s: result", want.ID) && ok
	}
	ok = assert.Truef(t, want.CreatedAt.Equal(got.CreatedAt), "CreatedAt %v stored as %v", want.CreatedAt, got.CreatedAt) && ok
	ok = assert.Truef(t, want.UpdatedAt.Equal(got.UpdatedAt), "UpdatedAt %v stored as %v", want.UpdatedAt, got.UpdatedAt) && ok
	return ok
}

func testDelegationGetMissing(t *testing.T, s delegation.Store) {
	_, err := s.GetDelegation(t.Context(), "missing")
	require.Error(t, err)
	assert.ErrorIs(t, err, delegation.ErrNotFound)
	putRecords(t, s, minimalRecord("present", delegation.StatusPending, delegationBase))
	_, err = s.GetDelegation(t.Context(), "presen")
	assert.ErrorIs(t, err, delegation.ErrNotFound, "ids are matched exactly, not by prefix")
	_, err = s.GetDelegation(t.Context(), "Present")
	assert.ErrorIs(t, err, delegation.ErrNotFound, "ids are case-sensitive")
}

func testDelegationListEmpty(t *testing.T, s delegation.Store) {
	for _, f := range []delegation.ListFilter{{}, {Status: delegation.StatusRunning}, {Target: "finance"}, {Offset: 10}} {
		recs, err := s.ListDelegations(t.Context(), f)
		require.NoError(t, err)
		assert.Empty(t, recs, "%+v", f)
	}
}

func testDelegationRoundTrip(t *testing.T, s delegation.Store) {
	full := fullRecord("full")
	full.UpdatedAt = time.Now() // with a monotonic clock reading
	failed := minimalRecord("failed", delegation.StatusFailed, delegationBase.In(time.Local))
	failed.SourceAgent = "hr"
	failed.Error = `agent returned 500: {"error":"boom"}`
	failed.Code = delegation.CodeAgentError
	failed.Attempts = 1
	failedAt := delegationBase.Add(time.Millisecond)
	failed.FinishedAt = &failedAt
	text := minimalRecord("text", delegation.StatusCompleted, delegationBase)
	text.Result = json.RawMessage(`"just a string, with \"quotes\" and \\ and ✓"`)
	text.Response = &delegation.AgentResponse{Content: "just a string"} // no workflow state
	array := minimalRecord("array", delegation.StatusCompleted, delegationBase)
	array.Result = json.RawMessage(`[1,2,3]`)
	accepted := minimalRecord("accepted", delegation.StatusAccepted, delegationBase)
	accepted.Async = true
	deadline := delegationBase.Add(time.Hour)
	accepted.Deadline = &deadline
	accepted.SecretHash = bytes.Repeat([]byte{0xab}, 32)
	// A running record with an owner whose id needs care in keys.
	owned := minimalRecord("owned/running", delegation.StatusRunning, delegationBase)
	owned.Owner = "owner/with spaces/ü"
	recs := []delegation.Record{
		full,
		failed,
		text,
		array,
		accepted,
		owned,
		// The fewest fields: zero times, no result, no response.
		{ID: "minimal", TargetAgent: "finance", Status: delegation.StatusPending},
		// An id with characters that need care in keys and JSON.
		minimalRecord("id/with spaces/ünïcode/\"quote\"", delegation.StatusRunning, delegationBase),
	}
	putRecords(t, s, recs...)
	for _, want := range recs {
		got := getRecord(t, s, want.ID)
		assertRecord(t, want, got)
		assert.Equal(t, want.SecretHash, nilIfEmpty(got.SecretHash), "%s: the store keeps the secret hash", want.ID)
		assert.Equal(t, want.CreatedAt.Nanosecond(), got.CreatedAt.Nanosecond(), "%s: nanoseconds must survive", want.ID)
		assert.Equal(t, want.CreatedAt.IsZero(), got.CreatedAt.IsZero(), "%s: zero CreatedAt", want.ID)
		assert.Equal(t, want.UpdatedAt.IsZero(), got.UpdatedAt.IsZero(), "%s: zero UpdatedAt", want.ID)
		assert.Equal(t, want.FinishedAt == nil, got.FinishedAt == nil, "%s: FinishedAt", want.ID)
		assert.Equal(t, want.Deadline == nil, got.Deadline == nil, "%s: Deadline", want.ID)
		assert.Equal(t, want.Response == nil, got.Response == nil, "%s: Response", want.ID)
	}
	list, err := s.ListDelegations(t.Context(), delegation.ListFilter{Limit: delegation.MaxListLimit})
	require.NoError(t, err)
	require.Len(t, list, len(recs))
	byID := map[string]delegation.Record{}
	for _, r := range list {
		byID[r.ID] = r
	}
	for _, want := range recs {
		assertRecord(t, want, byID[want.ID])
		assert.Equal(t, want.SecretHash, nilIfEmpty(byID[want.ID].SecretHash), "%s: listing keeps the secret hash", want.ID)
	}
}

func testDelegationLargeResult(t *testing.T, s delegation.Store) {
	// The largest result an agent may return: 4 MiB (docs/SECURITY.md#input).
	big := minimalRecord("big", delegation.StatusCompleted, delegationBase)
	big.Result = json.RawMessage(`"` + strings.Repeat("x", delegation.MaxResultBytes-2) + `"`)
	small := minimalRecord("small", delegation.StatusCompleted, delegationBase.Add(time.Second))
	small.Result = json.RawMessage(`{"small":true}`)
	putRecords(t, s, big, small)
	got := getRecord(t, s, "big")
	assert.Len(t, got.Result, len(big.Result))
	assert.True(t, bytes.Equal(big.Result, got.Result), "the 4 MiB result must survive")
	assertRecord(t, small, getRecord(t, s, "small"))

	// Replacing it with a small record, and updating it, both work.
	err := s.UpdateDelegation(t.Context(), "big", func(cur *delegation.Record) (*delegation.Record, error) {
		next := *cur
		next.Result = json.RawMessage(`"shrunk"`)
		return &next, nil
	})
	require.NoError(t, err)
	assert.JSONEq(t, `"shrunk"`, string(getRecord(t, s, "big").Result))
	assert.Equal(t, []string{"small", "big"}, listIDs(t, s, delegation.ListFilter{}))
}

func testDelegationPutReplaces(t *testing.T, s delegation.Store) {
	first := minimalRecord("d1", delegation.StatusRunning, delegationBase)
	first.TargetAgent = "hr"
	first.Result = json.RawMessage(`{"first":true}`)
	other := minimalRecord("d2", delegation.StatusRunning, delegationBase.Add(time.Minute))
	putRecords(t, s, first, other)

	// Replace with a record that differs in everything the listing
	// filters and orders by: a replacement is not a merge.
	second := finishedRecord("d1", delegation.StatusCompleted, delegationBase.Add(2*time.Minute))
	second.CreatedAt = delegationBase.Add(time.Hour)
	second.TargetAgent = "it"
	putRecords(t, s, second)

	assertRecord(t, second, getRecord(t, s, "d1"))
	assert.Empty(t, getRecord(t, s, "d1").Result, "the old result must not survive")
	assert.Equal(t, []string{"d1", "d2"}, listIDs(t, s, delegation.ListFilter{}), "new CreatedAt, new place")
	assert.Equal(t, []string{"d2"}, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusRunning}), "old status")
	assert.Equal(t, []string{"d1"}, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusCompleted}))
	assert.Empty(t, listIDs(t, s, delegation.ListFilter{Target: "hr"}), "old target")
	assert.Equal(t, []string{"d1"}, listIDs(t, s, delegation.ListFilter{Target: "it"}))
	assert.Equal(t, []string{"d1"}, listIDs(t, s, delegation.ListFilter{Target: "it", Status: delegation.StatusCompleted}))
	assert.Empty(t, listIDs(t, s, delegation.ListFilter{Target: "it", Status: delegation.StatusRunning}))

	// And back: the record is not final any more, so pruning leaves it.
	third := minimalRecord("d1", delegation.StatusAccepted, delegationBase)
	putRecords(t, s, third)
	n, err := s.PruneDelegations(t.Context(), delegationBase.Add(24*time.Hour), 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a record replaced by a non-final one must not be pruned")
	assert.Equal(t, []string{"d2", "d1"}, listIDs(t, s, delegation.ListFilter{}))
	assert.Equal(t, []string{"d1"}, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusAccepted}))
	assert.Empty(t, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusCompleted}))
}

func testDelegationPutBatch(t *testing.T, s delegation.Store) {
	require.NoError(t, s.PutDelegations(t.Context(), nil), "an empty batch")
	require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{}))
	assert.Empty(t, storedIDs(t, s))

	const n = 200
	recs := make([]delegation.Record, 0, n+2)
	for i := range n {
		recs = append(recs, minimalRecord(fmt.Sprintf("d-%03d", i), delegation.StatusRunning, delegationBase.Add(time.Duration(i)*time.Second)))
	}
	// The same ID twice in one batch: written in order, the last stays.
	dup1 := minimalRecord("dup", delegation.StatusRunning, delegationBase)
	dup1.TargetAgent = "hr"
	dup2 := finishedRecord("dup", delegation.StatusFailed, delegationBase.Add(time.Minute))
	recs = append(recs, dup1, dup2)
	putRecords(t, s, recs...)

	ids := storedIDs(t, s)
	require.Len(t, ids, n+1)
	for i := range n {
		id := fmt.Sprintf("d-%03d", i)
		assertRecord(t, recs[i], getRecord(t, s, id))
	}
	assertRecord(t, dup2, getRecord(t, s, "dup"))
	assert.Equal(t, []string{"dup"}, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusFailed}))
	assert.Empty(t, listIDs(t, s, delegation.ListFilter{Target: "hr"}), "the first of two records with one ID must leave no trace")
	assert.Len(t, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusRunning, Limit: delegation.MaxListLimit}), n)
}

func testDelegationPutEmptyID(t *testing.T, s delegation.Store) {
	existing := minimalRecord("existing", delegation.StatusRunning, delegationBase)
	putRecords(t, s, existing)
	changed := finishedRecord("existing", delegation.StatusCompleted, delegationBase.Add(time.Minute))
	err := s.PutDelegations(t.Context(), []delegation.Record{
		minimalRecord("new", delegation.StatusRunning, delegationBase),
		changed,
		minimalRecord("", delegation.StatusRunning, delegationBase),
	})
	require.Error(t, err, "a record with an empty ID must be refused")
	_, err = s.GetDelegation(t.Context(), "new")
	assert.ErrorIs(t, err, delegation.ErrNotFound, "a refused batch must write none of its records")
	assertRecord(t, existing, getRecord(t, s, "existing"))
	assert.Equal(t, []string{"existing"}, storedIDs(t, s))
}

func testDelegationUpdate(t *testing.T, s delegation.Store) {
	running := minimalRecord("d1", delegation.StatusRunning, delegationBase)
	running.Attempts = 1
	putRecords(t, s, running, minimalRecord("d2", delegation.StatusRunning, delegationBase.Add(time.Second)))

	finished := delegationBase.Add(3 * time.Second)
	var want delegation.Record
	calls := 0
	err := s.UpdateDelegation(t.Context(), "d1", func(cur *delegation.Record) (*delegation.Record, error) {
		calls++
		if assert.NotNil(t, cur) {
			assertRecord(t, running, *cur)
		}
		next := *cur
		next.Status = delegation.StatusCompleted
		next.Result = json.RawMessage(`{"ok":true}`)
		next.Attempts++
		next.UpdatedAt = finished
		next.FinishedAt = &finished
		next.TargetAgent = "hr"
		want = next
		return &next, nil
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, calls, 1, "fn must be called")
	assertRecord(t, want, getRecord(t, s, "d1"))

	assert.Equal(t, []string{"d2"}, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusRunning}))
	assert.Equal(t, []string{"d1"}, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusCompleted}))
	assert.Equal(t, []string{"d1"}, listIDs(t, s, delegation.ListFilter{Target: "hr"}))
	assert.Equal(t, []string{"d2"}, listIDs(t, s, delegation.ListFilter{Target: "finance"}))
	assert.Equal(t, []string{"d2", "d1"}, listIDs(t, s, delegation.ListFilter{}))

	// The updated record is final now: pruning sees it.
	n, err := s.PruneDelegations(t.Context(), finished.Add(time.Nanosecond), 0)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"d2"}, storedIDs(t, s))
}

func testDelegationUpdateMissing(t *testing.T, s delegation.Store) {
	called := false
	err := s.UpdateDelegation(t.Context(), "missing", func(cur *delegation.Record) (*delegation.Record, error) {
		called = true
		return cur, nil
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, delegation.ErrNotFound)
	assert.False(t, called, "fn must not be called for a missing record")
	assert.Empty(t, storedIDs(t, s), "updating a missing record must not create it")
}

func testDelegationUpdateFnError(t *testing.T, s delegation.Store) {
	want := minimalRecord("d1", delegation.StatusAccepted, delegationBase)
	putRecords(t, s, want)
	errBoom := errors.New("storetest: boom")
	err := s.UpdateDelegation(t.Context(), "d1", func(cur *delegation.Record) (*delegation.Record, error) {
		next := *cur
		next.Status = delegation.StatusCompleted
		return &next, errBoom
	})
	assert.Same(t, errBoom, err, "UpdateDelegation must return fn's error unchanged") //nolint:testifylint // identity is the point
	assertRecord(t, want, getRecord(t, s, "d1"))

	wrapped := fmt.Errorf("wrapped: %w", delegation.ErrFinal)
	err = s.UpdateDelegation(t.Context(), "d1", func(*delegation.Record) (*delegation.Record, error) {
		return nil, wrapped
	})
	assert.Same(t, wrapped, err, "a wrapped error comes back as the same value") //nolint:testifylint // identity
	assertRecord(t, want, getRecord(t, s, "d1"))
	assert.Equal(t, []string{"d1"}, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusAccepted}))
	assert.Empty(t, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusCompleted}))
}

func testDelegationUpdateNil(t *testing.T, s delegation.Store) {
	want := minimalRecord("d1", delegation.StatusAccepted, delegationBase)
	putRecords(t, s, want)
	err := s.UpdateDelegation(t.Context(), "d1", func(*delegation.Record) (*delegation.Record, error) {
		return nil, nil
	})
	require.NoError(t, err)
	assertRecord(t, want, getRecord(t, s, "d1"))
}

func testDelegationUpdateID(t *testing.T, s delegation.Store) {
	want := minimalRecord("d1", delegation.StatusAccepted, delegationBase)
	putRecords(t, s, want)
	err := s.UpdateDelegation(t.Context(), "d1", func(cur *delegation.Record) (*delegation.Record, error) {
		next := *cur
		next.ID = "d2"
		next.Status = delegation.StatusCompleted
		return &next, nil
	})
	require.Error(t, err, "fn must not be able to change the ID")
	assertRecord(t, want, getRecord(t, s, "d1"))
	assert.Equal(t, []string{"d1"}, storedIDs(t, s))
}

func testDelegationConcurrentUpdates(t *testing.T, s delegation.Store) {
	const goroutines, each = 16, 25
	putRecords(t, s, minimalRecord("counter", delegation.StatusAccepted, delegationBase))
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				err := s.UpdateDelegation(t.Context(), "counter", func(cur *delegation.Record) (*delegation.Record, error) {
					next := *cur
					next.Attempts++
					return &next, nil
				})
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, goroutines*each, getRecord(t, s, "counter").Attempts, "concurrent read-modify-writes lost updates")
}

func testDelegationUpdateIsolation(t *testing.T, s delegation.Store) {
	// Updates that succeed and updates whose fn fails run at the same
	// time (a batching store may commit them together): each failed one
	// writes nothing, each successful one lands.
	const n = 32
	recs := make([]delegation.Record, n)
	for i := range recs {
		recs[i] = minimalRecord(fmt.Sprintf("d-%02d", i), delegation.StatusAccepted, delegationBase.Add(time.Duration(i)*time.Second))
	}
	putRecords(t, s, recs...)
	errBoom := errors.New("storetest: boom")
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := s.UpdateDelegation(t.Context(), recs[i].ID, func(cur *delegation.Record) (*delegation.Record, error) {
				next := *cur
				next.Status = delegation.StatusCompleted
				if i%2 == 1 {
					return &next, errBoom
				}
				return &next, nil
			})
			if i%2 == 1 {
				assert.Same(t, errBoom, err) //nolint:testifylint // identity
			} else {
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		want := delegation.StatusCompleted
		if i%2 == 1 {
			want = delegation.StatusAccepted
		}
		assert.Equal(t, want, getRecord(t, s, recs[i].ID).Status, recs[i].ID)
	}
	assert.Len(t, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusAccepted}), n/2)
}

func testDelegationConcurrentWriters(t *testing.T, s delegation.Store) {
	// Single-record writers (the client's async path), batch writers (its
	// background writer) and updaters all at once: every write lands.
	const singles, batches, each, batchSize = 8, 4, 20, 8
	var wg sync.WaitGroup
	for g := range singles {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("s-%02d-%02d", g, i)
				rec := minimalRecord(id, delegation.StatusAccepted, delegationBase.Add(time.Duration(g*each+i)*time.Millisecond))
				if !assert.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{rec})) {
					return
				}
				// Finish every other record at once, racing the other writers.
				if i%2 == 0 {
					assert.NoError(t, s.UpdateDelegation(t.Context(), id, func(cur *delegation.Record) (*delegation.Record, error) {
						next := *cur
						next.Status = delegation.StatusCompleted
						return &next, nil
					}))
				}
			}
		})
	}
	for g := range batches {
		wg.Go(func() {
			for i := range each / 4 {
				recs := make([]delegation.Record, batchSize)
				for j := range recs {
					id := fmt.Sprintf("b-%02d-%02d-%02d", g, i, j)
					recs[j] = finishedRecord(id, delegation.StatusFailed, delegationBase.Add(time.Duration(g*100+i*10+j)*time.Millisecond))
				}
				if !assert.NoError(t, s.PutDelegations(t.Context(), recs)) {
					return
				}
			}
		})
	}
	wg.Wait()
	wantSingles, wantBatched := singles*each, batches*(each/4)*batchSize
	assert.Len(t, storedIDs(t, s), wantSingles+wantBatched)
	f := delegation.ListFilter{Limit: delegation.MaxListLimit}
	f.Status = delegation.StatusCompleted
	assert.Len(t, listIDs(t, s, f), wantSingles/2)
	f.Status = delegation.StatusAccepted
	assert.Len(t, listIDs(t, s, f), wantSingles/2)
	f.Status = delegation.StatusFailed
	assert.Len(t, listIDs(t, s, f), wantBatched)
}

// listFixture returns records covering every status and three targets,
// with CreatedAt ties (broken by ID), times in several zones and one zero
// CreatedAt.
func listFixture() []delegation.Record {
	statuses := []delegation.Status{
		delegation.StatusCompleted, delegation.StatusFailed, delegation.StatusRunning, delegation.StatusAccepted,
		delegation.StatusPending, delegation.StatusTimeout, delegation.StatusCanceled,
	}
	targets := []string{"finance", "hr", "it"}
	// "" is principal.Default's too.
	principals := []string{"", "team-a", "team-b", principal.Default, "team-a"}
	zone := time.FixedZone("PST", -8*3600)
	var recs []delegation.Record
	for i := range 90 {
		created := delegationBase.Add(time.Duration(i/3) * time.Second) // three records per instant
		if i%2 == 1 {
			created = created.In(zone)
		}
		// IDs whose byte order differs from their numeric order.
		r := minimalRecord(fmt.Sprintf("d-%d", i), statuses[(i*5+i/7)%len(statuses)], created)
		r.TargetAgent = targets[(i/2)%len(targets)]
		r.Principal = principals[i%len(principals)]
		recs = append(recs, r)
	}
	recs = append(recs, delegation.Record{ID: "zero-time", TargetAgent: "hr", Status: delegation.StatusCompleted})
	return recs
}

// expectedIDs returns the IDs of recs that f selects, in listing order,
// following the rules TestDelegationStore documents.
func expectedIDs(recs []delegation.Record, f delegation.ListFilter) []string {
	sel := selectIDs(recs, f)
	limit := f.Limit
	if limit <= 0 {
		limit = delegation.DefaultListLimit
	}
	limit = min(limit, delegation.MaxListLimit)
	offset := min(max(f.Offset, 0), len(sel))
	return nilIfEmpty(sel[offset:min(offset+limit, len(sel))])
}

// selectIDs returns the IDs of every record of recs that the filters of f
// keep, in listing order, ignoring Limit and Offset.
func selectIDs(recs []delegation.Record, f delegation.ListFilter) []string {
	var sel []delegation.Record
	for _, r := range recs {
		if (f.Status == "" || r.Status == f.Status) &&
			(len(f.Statuses) == 0 || slices.Contains(f.Statuses, r.Status)) &&
			(f.Target == "" || r.TargetAgent == f.Target) &&
			f.KeepsPrincipal(&r) {
			sel = append(sel, r)
		}
	}
	slices.SortFunc(sel, func(a, b delegation.Record) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	})
	return recordIDs(sel)
}

// putShuffled stores recs in a deterministic random order, in batches of
// random size.
func putShuffled(t *testing.T, s delegation.Store, recs []delegation.Record) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	shuffled := slices.Clone(recs)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for len(shuffled) > 0 {
		n := min(1+rng.IntN(16), len(shuffled))
		putRecords(t, s, shuffled[:n]...)
		shuffled = shuffled[n:]
	}
}

func testDelegationListOrder(t *testing.T, s delegation.Store) {
	recs := listFixture()
	putShuffled(t, s, recs)
	all := delegation.ListFilter{Limit: delegation.MaxListLimit}
	got := listIDs(t, s, all)
	assert.Equal(t, expectedIDs(recs, all), got, "newest CreatedAt first, ties by ID descending")
	assert.Equal(t, "zero-time", got[len(got)-1], "a zero CreatedAt is the oldest")
	// The three records of the newest instant, by ID descending
	// (byte-wise: "d-89" > "d-88" > "d-87").
	assert.Equal(t, []string{"d-89", "d-88", "d-87"}, got[:3])
}

func testDelegationListFilters(t *testing.T, s delegation.Store) {
	recs := listFixture()
	putShuffled(t, s, recs)
	const all = delegation.MaxListLimit
	filters := []delegation.ListFilter{
		{Limit: all},
		{Status: delegation.StatusCompleted, Limit: all},
		{Status: delegation.StatusFailed, Limit: all},
		{Status: delegation.StatusRunning, Limit: all},
		{Status: delegation.StatusAccepted, Limit: all},
		{Status: delegation.StatusPending, Limit: all},
		{Status: delegation.StatusTimeout, Limit: all},
		{Status: delegation.StatusCanceled, Limit: all},
		{Status: "no-such-status", Limit: all},
		{Statuses: []delegation.Status{delegation.StatusRunning, delegation.StatusAccepted}, Limit: all},
		{Statuses: []delegation.Status{delegation.StatusTimeout, delegation.StatusFailed, delegation.StatusCanceled}, Limit: all},
		{Statuses: []delegation.Status{delegation.StatusCompleted, delegation.StatusCompleted}, Limit: all},
		{Statuses: []delegation.Status{"no-such-status", delegation.StatusPending}, Limit: all},
		{Status: delegation.StatusFailed, Statuses: []delegation.Status{delegation.StatusFailed, delegation.StatusTimeout}, Limit: all},
		{Status: delegation.StatusCompleted, Statuses: []delegation.Status{delegation.StatusFailed}, Limit: all},
		{Target: "finance", Limit: all},
		{Target: "hr", Limit: all},
		{Target: "fin", Limit: all},
		{Target: "no-such-agent", Limit: all},
		{Target: "hr", Status: delegation.StatusCompleted, Limit: all},
		{Target: "it", Statuses: []delegation.Status{delegation.StatusRunning, delegation.StatusPending, delegation.StatusFailed}, Limit: all},
		{Target: "finance", Status: delegation.StatusRunning, Statuses: []delegation.Status{delegation.StatusRunning}, Limit: all},
		{Target: "finance", Status: delegation.StatusRunning, Statuses: []delegation.Status{delegation.StatusFailed}, Limit: all},
		// Filters with paging.
		{Status: delegation.StatusCompleted, Limit: 3, Offset: 2},
		{Statuses: []delegation.Status{delegation.StatusRunning, delegation.StatusAccepted}, Limit: 4, Offset: 5},
		{Target: "hr", Limit: 5, Offset: 7},
		{Target: "hr", Status: delegation.StatusCompleted, Limit: 2, Offset: 1},
		{Target: "hr", Status: delegation.StatusCompleted, Offset: 1000},
		// Principals: "" and principal.Default are the same one.
		{Principal: "team-a", Limit: all},
		{Principal: principal.Default, Limit: all},
		{Principal: "team-c", Limit: all},
		{Principal: "team-b", Status: delegation.StatusCompleted, Limit: all},
		{Principal: "team-a", Statuses: []delegation.Status{delegation.StatusRunning, delegation.StatusFailed}, Limit: all},
		{Principal: "team-a", Target: "hr", Limit: all},
		{Principal: "team-a", Limit: 4, Offset: 3},
		{Principal: principal.Default, Target: "it", Limit: 2, Offset: 1},
	}
	for _, f := range filters {
		want := expectedIDs(recs, f)
		got := listIDs(t, s, f)
		assert.Equal(t, want, nilIfEmpty(got), "filter %+v", f)
	}
	// The fixture must exercise the filters: every status and target is
	// present.
	assert.NotEmpty(t, expectedIDs(recs, delegation.ListFilter{Status: delegation.StatusCanceled, Target: "it"}))
	assert.NotEmpty(t, expectedIDs(recs, delegation.ListFilter{Principal: principal.Default, Target: "it", Limit: 2, Offset: 1}))
	assert.NotEmpty(t, expectedIDs(recs, delegation.ListFilter{Principal: "team-a", Target: "hr"}))
}

func testDelegationListPaging(t *testing.T, s delegation.Store) {
	const n = delegation.MaxListLimit + 20
	recs := make([]delegation.Record, n)
	for i := range recs {
		status := delegation.StatusCompleted
		if i%3 == 0 {
			status = delegation.StatusFailed
		}
		recs[i] = minimalRecord(fmt.Sprintf("d-%04d", i), status, delegationBase.Add(time.Duration(i)*time.Millisecond))
	}
	putRecords(t, s, recs...)

	for _, f := range []delegation.ListFilter{
		{},                      // the default page
		{Limit: -1},             // also the default page
		{Limit: n},              // capped
		{Limit: 7},              // a short page
		{Limit: 7, Offset: 100}, // further on
		{Offset: n - 10},        // a short last page
		{Offset: n},             // past the end
		{Offset: n + 1000},      // far past the end
		{Status: delegation.StatusFailed, Limit: 10, Offset: 170}, // the last failed ones
	} {
		assert.Equal(t, expectedIDs(recs, f), nilIfEmpty(listIDs(t, s, f)), "filter %+v", f)
	}
	assert.Len(t, listIDs(t, s, delegation.ListFilter{}), delegation.DefaultListLimit)
	assert.Len(t, listIDs(t, s, delegation.ListFilter{Limit: n}), delegation.MaxListLimit)

	// Walking the pages gives every record once, in order.
	for _, f := range []delegation.ListFilter{{Limit: 37}, {Status: delegation.StatusCompleted, Limit: 50}} {
		var walked []string
		for {
			page := listIDs(t, s, f)
			walked = append(walked, page...)
			if len(page) < f.Limit {
				break
			}
			f.Offset += f.Limit
			require.LessOrEqual(t, f.Offset, n, "paging with limit %d does not end", f.Limit)
		}
		assert.Equal(t, selectIDs(recs, delegation.ListFilter{Status: f.Status}), walked, "pages of %d", f.Limit)
	}
}

func testDelegationListDuringWrites(t *testing.T, s delegation.Store) {
	// Readers list while writers add and finish records: every page is in
	// order, has no duplicates, and holds whole records.
	const writers, each = 4, 40
	ctx := t.Context()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				recs, err := s.ListDelegations(ctx, delegation.ListFilter{Limit: 100})
				if !assert.NoError(t, err) {
					return
				}
				for i, r := range recs {
					if !assert.Equal(t, "task "+r.ID, r.Task, "a record listed while written") {
						return
					}
					if i > 0 {
						prev := recs[i-1]
						ok := prev.CreatedAt.After(r.CreatedAt) || prev.CreatedAt.Equal(r.CreatedAt) && prev.ID > r.ID
						if !assert.True(t, ok, "%s listed before %s", prev.ID, r.ID) {
							return
						}
					}
				}
				recs, err = s.ListDelegations(ctx, delegation.ListFilter{Status: delegation.StatusCompleted, Limit: 100})
				if !assert.NoError(t, err) {
					return
				}
				for _, r := range recs {
					if !assert.Equal(t, delegation.StatusCompleted, r.Status) {
						return
					}
				}
			}
		})
	}
	var writersWG sync.WaitGroup
	for g := range writers {
		writersWG.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%03d", g, i)
				rec := minimalRecord(id, delegation.StatusRunning, delegationBase.Add(time.Duration(i)*time.Second))
				if !assert.NoError(t, s.PutDelegations(ctx, []delegation.Record{rec})) {
					return
				}
				assert.NoError(t, s.UpdateDelegation(ctx, id, func(cur *delegation.Record) (*delegation.Record, error) {
					next := *cur
					next.Status = delegation.StatusCompleted
					return &next, nil
				}))
			}
		})
	}
	writersWG.Wait()
	close(stop)
	readers.Wait()
	assert.Len(t, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusCompleted, Limit: delegation.MaxListLimit}), writers*each)
}

func testDelegationPruneByAge(t *testing.T, s delegation.Store) {
	now := delegationBase.Add(30 * 24 * time.Hour)
	cutoff := now.Add(-7 * 24 * time.Hour)
	day := 24 * time.Hour
	noFinish := minimalRecord("old-final-no-finishedAt", delegation.StatusCompleted, now.Add(-20*day))
	noFinish.UpdatedAt = now.Add(-9 * day)
	recentNoFinish := minimalRecord("recent-final-no-finishedAt", delegation.StatusFailed, now.Add(-20*day))
	recentNoFinish.UpdatedAt = now.Add(-time.Hour)
	pruned := []delegation.Record{
		finishedRecord("old-completed", delegation.StatusCompleted, now.Add(-10*day)),
		finishedRecord("old-failed", delegation.StatusFailed, now.Add(-8*day)),
		finishedRecord("old-timeout", delegation.StatusTimeout, cutoff.Add(-time.Nanosecond)),
		finishedRecord("old-canceled", delegation.StatusCanceled, now.Add(-365*day)),
		noFinish,
	}
	kept := []delegation.Record{
		finishedRecord("recent-completed", delegation.StatusCompleted, now.Add(-day)),
		finishedRecord("at-cutoff", delegation.StatusCompleted, cutoff),
		minimalRecord("old-running", delegation.StatusRunning, now.Add(-30*day)),
		minimalRecord("old-pending", delegation.StatusPending, now.Add(-30*day)),
		minimalRecord("old-accepted", delegation.StatusAccepted, now.Add(-30*day)),
		recentNoFinish,
	}
	// A non-final record that carries a FinishedAt all the same is still
	// not pruned.
	odd := minimalRecord("running-with-finishedAt", delegation.StatusRunning, now.Add(-30*day))
	oldFinish := now.Add(-29 * day)
	odd.FinishedAt = &oldFinish
	kept = append(kept, odd)
	putShuffled(t, s, append(slices.Clone(pruned), kept...))

	n, err := s.PruneDelegations(t.Context(), cutoff, 0)
	require.NoError(t, err)
	assert.Equal(t, len(pruned), n)
	want := recordIDs(kept)
	slices.Sort(want)
	assert.Equal(t, want, storedIDs(t, s))

	n, err = s.PruneDelegations(t.Context(), cutoff, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a second prune has nothing left to do")

	n, err = s.PruneDelegations(t.Context(), time.Time{}, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a zero olderThan and no keep prunes nothing")
}

func testDelegationPruneByCount(t *testing.T, s delegation.Store) {
	// Ten final records; their finish order is the reverse of their
	// creation order, so a store that prunes by CreatedAt fails. Two share
	// a finish time (ties by ID). Three records are not final, and older
	// than all of them.
	var recs []delegation.Record
	for i := range 10 {
		r := finishedRecord(fmt.Sprintf("final-%d", i), delegation.StatusCompleted, delegationBase.Add(time.Duration(i)*time.Minute))
		r.CreatedAt = delegationBase.Add(-time.Duration(i) * time.Minute)
		recs = append(recs, r)
	}
	tie := recs[5]
	tie.ID = "final-5b"
	recs = append(recs, tie)
	for _, st := range []delegation.Status{delegation.StatusRunning, delegation.StatusAccepted, delegation.StatusPending} {
		recs = append(recs, minimalRecord("open-"+string(st), st, delegationBase.Add(-time.Hour)))
	}
	putShuffled(t, s, recs)
	require.Len(t, storedIDs(t, s), 14)

	n, err := s.PruneDelegations(t.Context(), time.Time{}, 20)
	require.NoError(t, err)
	assert.Zero(t, n, "fewer records than keep")

	// 14 records, keep 8: the six that finished first go, final-5 before
	// final-5b.
	n, err = s.PruneDelegations(t.Context(), time.Time{}, 8)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	assert.Equal(t, []string{"final-5b", "final-6", "final-7", "final-8", "final-9", "open-accepted", "open-pending", "open-running"}, storedIDs(t, s))

	// keep 2: only the final ones can go; the three open ones stay, even
	// though that leaves more than keep.
	n, err = s.PruneDelegations(t.Context(), time.Time{}, 2)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	assert.Equal(t, []string{"open-accepted", "open-pending", "open-running"}, storedIDs(t, s))

	n, err = s.PruneDelegations(t.Context(), time.Time{}, 1)
	require.NoError(t, err)
	assert.Zero(t, n, "records that are not final are never pruned")
}

// testDelegationPruneUnderWrites writes records as a client does (each
// created running, then rewritten final) with a prune by count after
// every batch, as the client's maintainer runs one every few seconds: the
// store holds exactly keep records after each prune (the newest to
// finish, and the one still running), however many were written before.
func testDelegationPruneUnderWrites(t *testing.T, s delegation.Store) {
	const keep, batch, batches = 60, 25, 12
	record := func(k int, status delegation.Status) delegation.Record {
		at := delegationBase.Add(time.Duration(k) * time.Second)
		r := minimalRecord(fmt.Sprintf("d-%04d", k), status, at)
		if status.Final() {
			finished := at.Add(time.Millisecond)
			r.UpdatedAt, r.FinishedAt = finished, &finished
		}
		return r
	}
	i := 0
	for range batches {
		running := make([]delegation.Record, batch)
		final := make([]delegation.Record, batch)
		for j := range batch {
			running[j] = record(i, delegation.StatusRunning)
			final[j] = record(i, delegation.StatusCompleted)
			i++
		}
		putRecords(t, s, running...)
		// The last record of the batch stays running until the next.
		putRecords(t, s, final[:batch-1]...)
		if i > batch {
			putRecords(t, s, record(i-batch-1, delegation.StatusCompleted))
		}
		_, err := s.PruneDelegations(t.Context(), delegationBase, keep)
		require.NoError(t, err)
		ids := storedIDs(t, s)
		want := min(i, keep)
		require.Len(t, ids, want, "after %d records written", i)
		assert.Equal(t, fmt.Sprintf("d-%04d", i-want), ids[0], "the oldest to finish went first")
		assert.Equal(t, fmt.Sprintf("d-%04d", i-1), ids[len(ids)-1])
	}
	running, err := s.ListDelegations(t.Context(), delegation.ListFilter{Status: delegation.StatusRunning})
	require.NoError(t, err)
	assert.Equal(t, []string{fmt.Sprintf("d-%04d", i-1)}, recordIDs(running), "the running record is kept")
}

func testDelegationPruneBoth(t *testing.T, s delegation.Store) {
	var recs []delegation.Record
	for i := range 10 {
		recs = append(recs, finishedRecord(fmt.Sprintf("final-%d", i), delegation.StatusFailed, delegationBase.Add(time.Duration(i)*time.Minute)))
	}
	recs = append(recs, minimalRecord("running", delegation.StatusRunning, delegationBase.Add(-time.Hour)))
	putShuffled(t, s, recs)
	// Age removes final-0..2; 8 remain, keep 5 removes final-3..5.
	n, err := s.PruneDelegations(t.Context(), delegationBase.Add(3*time.Minute), 5)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	assert.Equal(t, []string{"final-6", "final-7", "final-8", "final-9", "running"}, storedIDs(t, s))

	// Age alone removes more than keep asks for.
	n, err = s.PruneDelegations(t.Context(), delegationBase.Add(9*time.Minute), 4)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []string{"final-9", "running"}, storedIDs(t, s))
}

func testDelegationPrunedGone(t *testing.T, s delegation.Store) {
	old := finishedRecord("old", delegation.StatusCompleted, delegationBase)
	old.TargetAgent = "hr"
	putRecords(t, s, old, minimalRecord("open", delegation.StatusRunning, delegationBase))
	n, err := s.PruneDelegations(t.Context(), delegationBase.Add(time.Second), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	_, err = s.GetDelegation(t.Context(), "old")
	assert.ErrorIs(t, err, delegation.ErrNotFound)
	err = s.UpdateDelegation(t.Context(), "old", func(cur *delegation.Record) (*delegation.Record, error) { return cur, nil })
	assert.ErrorIs(t, err, delegation.ErrNotFound)
	assert.Equal(t, []string{"open"}, listIDs(t, s, delegation.ListFilter{}))
	assert.Empty(t, listIDs(t, s, delegation.ListFilter{Target: "hr"}))
	assert.Empty(t, listIDs(t, s, delegation.ListFilter{Status: delegation.StatusCompleted}))

	// The ID can be used again, and is counted again.
	putRecords(t, s, old)
	assert.Equal(t, []string{"old"}, listIDs(t, s, delegation.ListFilter{Target: "hr"}))
	n, err = s.PruneDelegations(t.Context(), time.Time{}, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"open"}, storedIDs(t, s))
}

func testDelegationCopies(t *testing.T, s delegation.Store) {
	want := fullRecord("d1")

	// What was passed to PutDelegations is not kept by reference.
	in := fullRecord("d1")
	recs := []delegation.Record{in}
	putRecords(t, s, recs...)
	mutateRecord(&recs[0])
	assertRecord(t, want, getRecord(t, s, "d1"))

	// Values from GetDelegation are copies.
	got := getRecord(t, s, "d1")
	mutateRecord(&got)
	assertRecord(t, want, getRecord(t, s, "d1"))

	// Values from ListDelegations are copies.
	list, err := s.ListDelegations(t.Context(), delegation.ListFilter{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	mutateRecord(&list[0])
	assertRecord(t, want, getRecord(t, s, "d1"))

	// What fn returned is not kept by reference, and the record fn saw
	// is not the stored one.
	var returned, seen *delegation.Record
	require.NoError(t, s.UpdateDelegation(t.Context(), "d1", func(cur *delegation.Record) (*delegation.Record, error) {
		next := fullRecord("d1")
		returned, seen = &next, cur
		return returned, nil
	}))
	mutateRecord(returned)
	mutateRecord(seen)
	assertRecord(t, want, getRecord(t, s, "d1"))
}

// mutateRecord changes every reference-typed field of r in place.
func mutateRecord(r *delegation.Record) {
	r.Task = "mutated"
	r.Result[0] = '['
	r.SecretHash[0] ^= 0xff
	r.Response.Content = "mutated"
	r.Response.WorkflowState["step"] = "mutated"
	r.Response.WorkflowState["extra"] = "mutated"
	nested := r.Response.WorkflowState["nested"].(map[string]any)
	nested["list"].([]any)[0] = "mutated"
	nested["list"].([]any)[3].(map[string]any)["deep"] = "mutated"
	*r.FinishedAt = r.FinishedAt.Add(time.Hour)
	*r.Deadline = r.Deadline.Add(time.Hour)
}

func testDelegationDoneContext(t *testing.T, s delegation.Store) {
	old := finishedRecord("old", delegation.StatusCompleted, delegationBase)
	putRecords(t, s, old)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	err := s.PutDelegations(ctx, []delegation.Record{minimalRecord("new", delegation.StatusRunning, delegationBase)})
	assert.ErrorIs(t, err, context.Canceled, "PutDelegations")
	called := false
	err = s.UpdateDelegation(ctx, "old", func(cur *delegation.Record) (*delegation.Record, error) {
		called = true
		next := *cur
		next.Task = "changed"
		return &next, nil
	})
	assert.ErrorIs(t, err, context.Canceled, "UpdateDelegation")
	_, err = s.GetDelegation(ctx, "old")
	assert.ErrorIs(t, err, context.Canceled, "GetDelegation")
	_, err = s.ListDelegations(ctx, delegation.ListFilter{})
	assert.ErrorIs(t, err, context.Canceled, "ListDelegations")
	_, err = s.PruneDelegations(ctx, delegationBase.Add(time.Hour), 0)
	assert.ErrorIs(t, err, context.Canceled, "PruneDelegations")

	assert.False(t, called, "UpdateDelegation with a done context must not call fn")
	assert.Equal(t, []string{"old"}, storedIDs(t, s), "a done context must write and prune nothing")
	assertRecord(t, old, getRecord(t, s, "old"))

	ctx, cancel = context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = s.GetDelegation(ctx, "old")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "GetDelegation past its deadline")
}

func testDelegationClose(t *testing.T, s delegation.Store, errClosed error) {
	c := closerOf(t, s)
	putRecords(t, s, finishedRecord("d1", delegation.StatusCompleted, delegationBase))
	closeTwice(t, c)

	check := afterCloseCheck(t, errClosed)
	check("PutDelegations", s.PutDelegations(t.Context(), []delegation.Record{minimalRecord("d2", delegation.StatusRunning, delegationBase)}))
	check("PutDelegations (empty)", s.PutDelegations(t.Context(), nil))
	check("UpdateDelegation", s.UpdateDelegation(t.Context(), "d1", func(cur *delegation.Record) (*delegation.Record, error) {
		return cur, nil
	}))
	_, err := s.GetDelegation(t.Context(), "d1")
	check("GetDelegation", err)
	_, err = s.ListDelegations(t.Context(), delegation.ListFilter{})
	check("ListDelegations", err)
	_, err = s.ListDelegations(t.Context(), delegation.ListFilter{Status: delegation.StatusRunning, Statuses: []delegation.Status{delegation.StatusFailed}})
	check("ListDelegations (a filter nothing passes)", err)
	_, err = s.PruneDelegations(t.Context(), delegationBase.Add(time.Hour), 0)
	check("PruneDelegations", err)
}

func testDelegationCloseWhileWriting(t *testing.T, s delegation.Store, errClosed error) {
	closeWhileWriting(t, s, errClosed, "a write", func(w, i int) error {
		id := fmt.Sprintf("w%d-%d", w, i)
		err := s.PutDelegations(t.Context(), []delegation.Record{minimalRecord(id, delegation.StatusRunning, delegationBase)})
		if err == nil {
			err = s.UpdateDelegation(t.Context(), id, func(cur *delegation.Record) (*delegation.Record, error) {
				next := *cur
				next.Status = delegation.StatusCompleted
				return &next, nil
			})
		}
		return err
	})
}
