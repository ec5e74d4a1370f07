package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/store/memstore"
)

var testBase = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// testRecord returns a small record in UTC (so that it compares equal
// after a round trip through JSON).
func testRecord(id string, status delegation.Status, target string, created time.Time) delegation.Record {
	r := delegation.Record{
		ID:          id,
		TargetAgent: target,
		Task:        "task " + id,
		Status:      status,
		CreatedAt:   created,
		UpdatedAt:   created,
	}
	if status.Final() {
		finished := created.Add(time.Second)
		r.FinishedAt = &finished
		r.UpdatedAt = finished
		r.Result = json.RawMessage(`{"id":"` + id + `"}`)
	}
	return r
}

// checkIndexes verifies that every index of the delegation records holds
// exactly the entries the stored records call for, that every header
// matches its record, and that the count is right.
func checkIndexes(t *testing.T, s *Store) {
	t.Helper()
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		d, err := delegationBucketsOf(tx)
		require.NoError(t, err)
		want := make([]map[string]string, len(d.indexes()))
		for i := range want {
			want[i] = map[string]string{}
		}
		n := 0
		require.NoError(t, d.records.ForEach(func(id, v []byte) error {
			n++
			keys, _, err := decodeHeader(id, v)
			require.NoError(t, err)
			var rec delegation.Record
			require.NoError(t, decodeRecord(id, v, &rec))
			assert.Equal(t, string(id), rec.ID, "a record under another id")
			assert.Equal(t, keysOf(&rec), keys, "the header of %s does not match its record", id)
			for i, ix := range d.indexes() {
				if k, v := ix.entry(id, &keys); k != nil {
					want[i][string(k)] = string(v)
				}
			}
			return nil
		}))
		for i, ix := range d.indexes() {
			got := map[string]string{}
			require.NoError(t, ix.bucket.ForEach(func(k, v []byte) error {
				got[string(k)] = string(v)
				return nil
			}))
			assert.Equal(t, want[i], got, "index %s", delegationBucketNames[i+1])
		}
		count, err := d.count()
		require.NoError(t, err)
		assert.Equal(t, uint64(n), count, "the record count")
		return nil
	}))
}

func TestDelegationsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.db")
	s, err := Open(path, nil)
	require.NoError(t, err)
	var recs []delegation.Record
	for i := range 300 {
		st := []delegation.Status{delegation.StatusCompleted, delegation.StatusAccepted, delegation.StatusFailed}[i%3]
		recs = append(recs, testRecord(fmt.Sprintf("d-%03d", i), st, fmt.Sprintf("agent-%d", i%4), testBase.Add(time.Duration(i)*time.Second)))
	}
	secret := recs[1]
	secret.SecretHash = bytes.Repeat([]byte{0x5a}, 32)
	recs[1] = secret
	require.NoError(t, s.PutDelegations(t.Context(), recs[:150]))
	for _, r := range recs[150:] {
		require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{r}))
	}
	require.NoError(t, s.UpdateDelegation(t.Context(), "d-001", func(cur *delegation.Record) (*delegation.Record, error) {
		next := *cur
		next.Status = delegation.StatusTimeout
		next.Code = delegation.CodeTimeout
		finished := testBase.Add(time.Hour) // not pruned below
		next.FinishedAt = &finished
		return &next, nil
	}))
	n, err := s.PruneDelegations(t.Context(), testBase.Add(10*time.Second), 0)
	require.NoError(t, err)
	require.Positive(t, n)
	before, err := s.ListDelegations(t.Context(), delegation.ListFilter{Limit: delegation.MaxListLimit})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	checkIndexes(t, s)
	after, err := s.ListDelegations(t.Context(), delegation.ListFilter{Limit: delegation.MaxListLimit})
	require.NoError(t, err)
	assert.Equal(t, before, after)
	got, err := s.GetDelegation(t.Context(), "d-001")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusTimeout, got.Status)
	assert.Equal(t, secret.SecretHash, got.SecretHash)
	accepted, err := s.ListDelegations(t.Context(), delegation.ListFilter{Status: delegation.StatusAccepted, Target: "agent-1", Limit: 5})
	require.NoError(t, err)
	assert.Equal(t, []string{"d-289", "d-277", "d-265", "d-253", "d-241"}, ids(accepted))
}

func ids(recs []delegation.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// TestDelegationsMatchMemstore runs one random sequence of writes, prunes
// and reads against a boltstore and a memstore and expects the same
// answers, checking the indexes as it goes.
func TestDelegationsMatchMemstore(t *testing.T) {
	bolt := openTemp(t)
	mem := memstore.New()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 11))
	statuses := []delegation.Status{
		delegation.StatusPending, delegation.StatusRunning, delegation.StatusAccepted, delegation.StatusCompleted,
		delegation.StatusFailed, delegation.StatusTimeout, delegation.StatusCanceled,
	}
	targets := []string{"a", "b", "ab", "", "b\x00"}
	randomTime := func() time.Time { return testBase.Add(time.Duration(rng.IntN(50)) * time.Second) }
	randomRecord := func() delegation.Record {
		r := testRecord(fmt.Sprintf("d%d", rng.IntN(80)), statuses[rng.IntN(len(statuses))], targets[rng.IntN(len(targets))], randomTime())
		if r.FinishedAt != nil && rng.IntN(4) == 0 {
			r.FinishedAt = nil // pruned by UpdatedAt
		}
		return r
	}
	randomFilter := func() delegation.ListFilter {
		f := delegation.ListFilter{Limit: rng.IntN(30), Offset: rng.IntN(5) * rng.IntN(10)}
		switch rng.IntN(4) {
		case 0:
			f.Status = statuses[rng.IntN(len(statuses))]
		case 1:
			for range 1 + rng.IntN(3) {
				f.Statuses = append(f.Statuses, statuses[rng.IntN(len(statuses))])
			}
		}
		if rng.IntN(3) == 0 {
			f.Target = targets[rng.IntN(len(targets))]
		}
		return f
	}
	for step := range 1500 {
		switch op := rng.IntN(10); {
		case op < 4:
			recs := make([]delegation.Record, 1+rng.IntN(4))
			for i := range recs {
				recs[i] = randomRecord()
			}
			require.NoError(t, bolt.PutDelegations(ctx, recs))
			require.NoError(t, mem.PutDelegations(ctx, recs))
		case op < 6:
			id := fmt.Sprintf("d%d", rng.IntN(80))
			next := randomRecord()
			next.ID = id
			fail := rng.IntN(5) == 0
			fn := func(cur *delegation.Record) (*delegation.Record, error) {
				if fail {
					return nil, errors.New("no")
				}
				n := next
				n.Attempts = cur.Attempts + 1
				return &n, nil
			}
			errB, errM := bolt.UpdateDelegation(ctx, id, fn), mem.UpdateDelegation(ctx, id, fn)
			assert.Equal(t, errM == nil, errB == nil, "step %d: update %s: %v / %v", step, id, errB, errM)
			assert.Equal(t, errors.Is(errM, delegation.ErrNotFound), errors.Is(errB, delegation.ErrNotFound), "step %d", step)
		case op < 7:
			cutoff := randomTime()
			if rng.IntN(2) == 0 {
				cutoff = time.Time{}
			}
			keep := rng.IntN(60)
			nB, err := bolt.PruneDelegations(ctx, cutoff, keep)
			require.NoError(t, err)
			nM, err := mem.PruneDelegations(ctx, cutoff, keep)
			require.NoError(t, err)
			assert.Equal(t, nM, nB, "step %d: prune %v keep %d", step, cutoff, keep)
		default:
			f := randomFilter()
			got, err := bolt.ListDelegations(ctx, f)
			require.NoError(t, err)
			want, err := mem.ListDelegations(ctx, f)
			require.NoError(t, err)
			require.Equal(t, want, got, "step %d: list %+v", step, f)
			id := fmt.Sprintf("d%d", rng.IntN(80))
			gotRec, errB := bolt.GetDelegation(ctx, id)
			wantRec, errM := mem.GetDelegation(ctx, id)
			assert.Equal(t, errM == nil, errB == nil, "step %d: get %s", step, id)
			assert.Equal(t, wantRec, gotRec, "step %d: get %s", step, id)
		}
		if step%100 == 99 {
			checkIndexes(t, bolt)
		}
	}
	checkIndexes(t, bolt)
}

func TestPruneInChunks(t *testing.T) {
	s := openTemp(t)
	const n = 2*pruneChunk + 500
	recs := make([]delegation.Record, n)
	for i := range recs {
		recs[i] = testRecord(fmt.Sprintf("d-%05d", i), delegation.StatusCompleted, "a", testBase.Add(time.Duration(i)*time.Millisecond))
	}
	recs = append(recs, testRecord("open", delegation.StatusRunning, "a", testBase))
	require.NoError(t, s.PutDelegations(t.Context(), recs))

	before := s.commits.Load()
	pruned, err := s.PruneDelegations(t.Context(), testBase.Add(time.Hour), 10)
	require.NoError(t, err)
	assert.Equal(t, n, pruned)
	assert.Equal(t, before, s.commits.Load(), "pruning does not go through the group commit")
	checkIndexes(t, s)
	left, err := s.ListDelegations(t.Context(), delegation.ListFilter{})
	require.NoError(t, err)
	assert.Equal(t, []string{"open"}, ids(left))

	// A context done after the first chunk stops the prune there, and it
	// reports what it deleted.
	require.NoError(t, s.PutDelegations(t.Context(), recs[:n]))
	ctx, cancel := context.WithCancel(t.Context())
	s.pruneChunkDone = cancel
	defer func() { s.pruneChunkDone = nil }()
	pruned, err = s.PruneDelegations(ctx, testBase.Add(time.Hour), 0)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, pruneChunk, pruned)
	checkIndexes(t, s)
	left, err = s.ListDelegations(t.Context(), delegation.ListFilter{Limit: delegation.MaxListLimit, Offset: n - pruneChunk - 10})
	require.NoError(t, err)
	assert.Len(t, left, 11, "the records of the first chunk are gone, the others stay")
}

func TestDelegationWritesShareCommits(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{
		testRecord("existing", delegation.StatusAccepted, "a", testBase),
	}))
	errBoom := errors.New("boom")
	calls := []func() error{
		func() error {
			return s.PutDelegations(t.Context(), []delegation.Record{testRecord("single", delegation.StatusAccepted, "a", testBase)})
		},
		func() error {
			return s.PutDelegations(t.Context(), []delegation.Record{
				testRecord("batch-1", delegation.StatusCompleted, "a", testBase),
				testRecord("batch-2", delegation.StatusCompleted, "b", testBase),
			})
		},
		func() error {
			return s.UpdateDelegation(t.Context(), "existing", func(cur *delegation.Record) (*delegation.Record, error) {
				next := *cur
				next.Status = delegation.StatusCompleted
				return &next, nil
			})
		},
		func() error {
			return s.UpdateDelegation(t.Context(), "existing", func(*delegation.Record) (*delegation.Record, error) {
				panic("kaboom")
			})
		},
		func() error {
			return s.UpdateDelegation(t.Context(), "single", func(cur *delegation.Record) (*delegation.Record, error) {
				next := *cur
				next.Status = delegation.StatusFailed
				return &next, errBoom
			})
		},
		func() error { return storeAgent(t.Context(), s, testAgent("agent")) },
	}
	errs := commitAsOneBatch(t, s, calls)
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.NoError(t, errs[2])
	assert.ErrorContains(t, errs[3], "kaboom")
	assert.Same(t, errBoom, errs[4]) //nolint:testifylint // returned unchanged
	assert.NoError(t, errs[5])

	got, err := s.GetDelegation(t.Context(), "existing")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, got.Status)
	got, err = s.GetDelegation(t.Context(), "single")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusAccepted, got.Status, "a failed update in a batch writes nothing")
	checkIndexes(t, s)
}

func TestAbortRollsBackTheBatch(t *testing.T) {
	s := openTemp(t)
	release, held := holdCommitter(t, s)
	errc := make(chan error, 2)
	go func() {
		errc <- s.PutDelegations(t.Context(), []delegation.Record{testRecord("innocent", delegation.StatusAccepted, "a", testBase)})
	}()
	waitQueued(t, s, 1)
	errDisk := errors.New("disk on fire")
	go func() {
		errc <- s.submit(t.Context(), &request{op: "abort", apply: func(tx *bbolt.Tx) error {
			if err := tx.Bucket(bucketBreakers).Put([]byte("partial"), []byte("{}")); err != nil {
				return err
			}
			return &abortError{errDisk}
		}})
	}()
	waitQueued(t, s, 2)
	release()
	require.NoError(t, <-held)
	for range 2 {
		assert.ErrorIs(t, <-errc, errDisk, "every request of an aborted batch fails")
	}
	_, err := s.GetDelegation(t.Context(), "innocent")
	assert.ErrorIs(t, err, delegation.ErrNotFound, "nothing of an aborted batch is committed")
	m, err := s.LoadBreakers(t.Context())
	require.NoError(t, err)
	assert.Empty(t, m)
	checkIndexes(t, s)
}

func TestDamagedRecordIsCorrupt(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{
		testRecord("short", delegation.StatusAccepted, "a", testBase),
		testRecord("json", delegation.StatusAccepted, "a", testBase.Add(time.Second)),
	}))
	require.NoError(t, s.db.Update(func(tx *bbolt.Tx) error {
		d, err := delegationBucketsOf(tx)
		require.NoError(t, err)
		require.NoError(t, d.records.Put([]byte("short"), []byte{recordHeaderVersion, 0}))
		v := slices.Clone(d.records.Get([]byte("json")))
		return d.records.Put([]byte("json"), v[:len(v)-3])
	}))
	for _, id := range []string{"short", "json"} {
		_, err := s.GetDelegation(t.Context(), id)
		assert.ErrorIs(t, err, ErrCorrupt, id)
		err = s.UpdateDelegation(t.Context(), id, func(cur *delegation.Record) (*delegation.Record, error) { return cur, nil })
		assert.ErrorIs(t, err, ErrCorrupt, id)
	}
	_, err := s.ListDelegations(t.Context(), delegation.ListFilter{})
	assert.ErrorIs(t, err, ErrCorrupt)
	err = s.PutDelegations(t.Context(), []delegation.Record{testRecord("short", delegation.StatusFailed, "a", testBase)})
	assert.ErrorIs(t, err, ErrCorrupt, "replacing a record whose header is damaged would leave stale index entries")
}

func TestPutDelegationsRejectsBadRecords(t *testing.T) {
	s := openTemp(t)
	long := string(bytes.Repeat([]byte{'x'}, bbolt.MaxKeySize))
	bad := []delegation.Record{
		{ID: ""},
		{ID: "a", TargetAgent: long},
		{ID: long},
		{ID: "a", Status: delegation.Status(long[:256])},
		{ID: "a", Result: json.RawMessage(`{not json`)},
	}
	for _, r := range bad {
		err := s.PutDelegations(t.Context(), []delegation.Record{testRecord("fine", delegation.StatusRunning, "a", testBase), r})
		assert.Error(t, err)
	}
	left, err := s.ListDelegations(t.Context(), delegation.ListFilter{})
	require.NoError(t, err)
	assert.Empty(t, left, "a batch with a bad record writes nothing")

	require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{testRecord("fine", delegation.StatusRunning, "a", testBase)}))
	err = s.UpdateDelegation(t.Context(), "fine", func(cur *delegation.Record) (*delegation.Record, error) {
		next := *cur
		next.Result = json.RawMessage(`{not json`)
		return &next, nil
	})
	assert.Error(t, err)
	assert.Error(t, s.UpdateDelegation(t.Context(), "fine", nil))
	checkIndexes(t, s)
}

func TestOpenCreatesDelegationBuckets(t *testing.T) {
	// A store made before the delegation buckets existed has an empty
	// delegations bucket; Open adds them without a schema change.
	path := fileWithEmptyBucket(t, 2, bucketDelegations)

	s, err := Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{testRecord("d", delegation.StatusRunning, "a", testBase)}))
	got, err := s.ListDelegations(t.Context(), delegation.ListFilter{Status: delegation.StatusRunning})
	require.NoError(t, err)
	assert.Equal(t, []string{"d"}, ids(got))
	checkIndexes(t, s)
}

func TestTimeKeyOrder(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1677, 1, 1, 0, 0, 0, 0, time.UTC), // before UnixNano's range
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Unix(0, 0),
		time.Unix(0, 1),
		testBase,
		testBase.Add(time.Nanosecond),
		time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), // after UnixNano's range
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	}
	for i := 1; i < len(times); i++ {
		a, b := appendTime(nil, times[i-1]), appendTime(nil, times[i])
		assert.Len(t, a, timeKeyLen)
		assert.Negative(t, bytes.Compare(a, b), "%v must sort before %v", times[i-1], times[i])
	}
	zone := time.FixedZone("X", 3600)
	assert.Equal(t, appendTime(nil, testBase), appendTime(nil, testBase.In(zone)), "the zone does not matter")
}
