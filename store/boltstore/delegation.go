package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentmesh/agentmesh/delegation"
)

var _ delegation.Store = (*Store)(nil)

// The buckets nested in the delegations bucket. Records are stored once,
// by id; the other buckets are indexes whose keys end in the record's
// creation time and id, so that a reverse cursor over any of them lists
// newest first, and a filtered page costs the entries it skips and returns
// plus one decode per record returned — never a decode per record stored.
//
//	records      id                                  → header + JSON of delegation.Record
//	by_created   created · id                        → (empty)
//	by_status    len16 · status · created · id       → (empty)
//	by_target    len16 · target · created · id       → status
//	by_finished  finished · id                       → (empty), final records only
//
// created and finished are 12-byte order-preserving times (timeKey).
// The header at the front of a record's value holds what its index keys
// are made of, so that replacing or pruning a record removes its old index
// entries without decoding its JSON (which may carry a 4 MiB result).
// keyDelegationCount, in the delegations bucket itself, is the number of
// records, kept for pruning by count.
var (
	bucketRecords    = []byte("records")
	bucketByCreated  = []byte("by_created")
	bucketByStatus   = []byte("by_status")
	bucketByTarget   = []byte("by_target")
	bucketByFinished = []byte("by_finished")

	keyDelegationCount = []byte("count")

	delegationBucketNames = [][]byte{bucketRecords, bucketByCreated, bucketByStatus, bucketByTarget, bucketByFinished}
)

// timeKeyLen is the length of a time in keys: 8 bytes of Unix seconds with
// the sign bit flipped, then 4 of nanoseconds, both big-endian, so that
// byte order is time order for every time.Time, the zero time included.
const timeKeyLen = 12

func appendTime(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix())^1<<63)
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

// timeKey returns the key form of t.
func timeKey(t time.Time) (k [timeKeyLen]byte) {
	appendTime(k[:0], t) // fits: cap is timeKeyLen
	return k
}

// appendAttr appends s with a 2-byte length in front, so that the keys of
// one status or target share a prefix that no other value's keys start
// with.
func appendAttr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// recordHeaderVersion is the first byte of a record's value.
const recordHeaderVersion = 1

// indexKeys is what a record's index entries are made of. It is stored as
// the header of the record's value.
type indexKeys struct {
	created  [timeKeyLen]byte
	final    bool
	finished [timeKeyLen]byte // when final
	status   string
	target   string
}

// keysOf returns the index keys of rec. A final record's finish time is
// FinishedAt, or UpdatedAt when FinishedAt is nil.
func keysOf(rec *delegation.Record) indexKeys {
	k := indexKeys{
		created: timeKey(rec.CreatedAt),
		final:   rec.Status.Final(),
		status:  string(rec.Status),
		target:  rec.TargetAgent,
	}
	if k.final {
		k.finished = timeKey(finishTime(rec))
	}
	return k
}

// finishTime is when a final record finished, for pruning.
func finishTime(rec *delegation.Record) time.Time {
	if rec.FinishedAt != nil {
		return *rec.FinishedAt
	}
	return rec.UpdatedAt
}

// appendHeader appends the header form of k:
//
//	version(1) · final(1) · created(12) · finished(12) · len16 · status · len16 · target
func (k *indexKeys) appendHeader(b []byte) []byte {
	final := byte(0)
	if k.final {
		final = 1
	}
	b = append(b, recordHeaderVersion, final)
	b = append(b, k.created[:]...)
	b = append(b, k.finished[:]...)
	b = appendAttr(b, k.status)
	return appendAttr(b, k.target)
}

// decodeHeader splits the stored value v of record id into its index keys
// and its JSON.
func decodeHeader(id, v []byte) (indexKeys, []byte, error) {
	var k indexKeys
	bad := func(what string) (indexKeys, []byte, error) {
		return k, nil, fmt.Errorf("%w: record of delegation %q: %s", ErrCorrupt, id, what)
	}
	const fixed = 2 + 2*timeKeyLen
	if len(v) < fixed+4 {
		return bad("too short")
	}
	if v[0] != recordHeaderVersion {
		return bad(fmt.Sprintf("unknown header version %d", v[0]))
	}
	k.final = v[1] == 1
	copy(k.created[:], v[2:])
	copy(k.finished[:], v[2+timeKeyLen:])
	rest := v[fixed:]
	for _, s := range []*string{&k.status, &k.target} {
		if len(rest) < 2 {
			return bad("truncated header")
		}
		n := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+n {
			return bad("truncated header")
		}
		*s, rest = string(rest[2:2+n]), rest[2+n:]
	}
	return k, rest, nil
}

// decodeRecord decodes the stored value v of record id.
func decodeRecord(id, v []byte, rec *delegation.Record) error {
	_, data, err := decodeHeader(id, v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, rec); err != nil {
		return fmt.Errorf("%w: record of delegation %q: %w", ErrCorrupt, id, err)
	}
	return nil
}

// encodedRecord is a record ready to be written: its stored value and its
// index keys.
type encodedRecord struct {
	id    []byte
	keys  indexKeys
	value []byte
}

// encodeRecord checks that rec can be stored and encodes it.
func encodeRecord(rec *delegation.Record) (encodedRecord, error) {
	switch {
	case rec.ID == "":
		return encodedRecord{}, errors.New("empty id")
	case len(rec.Status) > 255:
		return encodedRecord{}, fmt.Errorf("status is %d bytes, more than 255", len(rec.Status))
	case 2+len(rec.TargetAgent)+timeKeyLen+len(rec.ID) > bbolt.MaxKeySize:
		return encodedRecord{}, fmt.Errorf("id and target agent are %d bytes together, more than %d",
			len(rec.ID)+len(rec.TargetAgent), bbolt.MaxKeySize-2-timeKeyLen)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return encodedRecord{}, fmt.Errorf("encode: %w", err)
	}
	e := encodedRecord{id: []byte(rec.ID), keys: keysOf(rec)}
	e.value = e.keys.appendHeader(make([]byte, 0, 64+len(rec.Status)+len(rec.TargetAgent)+len(data)))
	e.value = append(e.value, data...)
	return e, nil
}

// appendFillPercent is the fill percent of the index buckets whose keys
// mostly grow at the end.
const appendFillPercent = 0.9

// delegationBuckets are the buckets of the delegation records in one
// transaction.
type delegationBuckets struct {
	root, records, byCreated, byStatus, byTarget, byFinished *bbolt.Bucket
}

// delegationBucketsOf returns the delegation buckets of tx. Open creates
// them, so a missing one means the file was changed behind the store.
func delegationBucketsOf(tx *bbolt.Tx) (delegationBuckets, error) {
	var d delegationBuckets
	d.root = tx.Bucket(bucketDelegations)
	if d.root == nil {
		return d, fmt.Errorf("%w: no %q bucket", ErrCorrupt, bucketDelegations)
	}
	for i, b := range []**bbolt.Bucket{&d.records, &d.byCreated, &d.byStatus, &d.byTarget, &d.byFinished} {
		if *b = d.root.Bucket(delegationBucketNames[i]); *b == nil {
			return d, fmt.Errorf("%w: no %q bucket in %q", ErrCorrupt, delegationBucketNames[i], bucketDelegations)
		}
	}
	// A record's key is its id, which the delegation client makes a
	// version 7 UUID (time-ordered): new records land at the end of the
	// bucket too. Records from before, with random version 4 ids, stay
	// where they are.
	d.records.FillPercent = appendFillPercent
	// Records are created and finish in time order, so these two indexes
	// grow at their end: pages split full rather than half full
	// (measured at 100,000 records: about half the pages). The status and
	// target indexes grow at the end of each status's or target's range
	// (their keys are the prefix, then the creation time), so the same
	// holds for them: in a soak's file they were half full (50 %, against
	// 89 % for by_created), 5.6 of its 22 MiB of delegations.
	d.byCreated.FillPercent = appendFillPercent
	d.byFinished.FillPercent = appendFillPercent
	d.byStatus.FillPercent = appendFillPercent
	d.byTarget.FillPercent = appendFillPercent
	return d, nil
}

// index is one index bucket and how a record's entry in it is made.
type index struct {
	bucket *bbolt.Bucket
	// entry returns the key and value of record id in this index, or a
	// nil key when the record has no entry in it.
	entry func(id []byte, k *indexKeys) (key, value []byte)
}

func (d delegationBuckets) indexes() [4]index {
	return [4]index{
		{d.byCreated, func(id []byte, k *indexKeys) ([]byte, []byte) {
			return append(k.created[:len(k.created):len(k.created)], id...), nil
		}},
		{d.byStatus, func(id []byte, k *indexKeys) ([]byte, []byte) {
			b := appendAttr(make([]byte, 0, 2+len(k.status)+timeKeyLen+len(id)), k.status)
			return append(append(b, k.created[:]...), id...), nil
		}},
		{d.byTarget, func(id []byte, k *indexKeys) ([]byte, []byte) {
			b := appendAttr(make([]byte, 0, 2+len(k.target)+timeKeyLen+len(id)), k.target)
			return append(append(b, k.created[:]...), id...), []byte(k.status)
		}},
		{d.byFinished, func(id []byte, k *indexKeys) ([]byte, []byte) {
			if !k.final {
				return nil, nil
			}
			return append(k.finished[:len(k.finished):len(k.finished)], id...), nil
		}},
	}
}

// reindex moves the index entries of record id from old (nil for a new
// record) to cur, writing only the entries that change.
func (d delegationBuckets) reindex(id []byte, old, cur *indexKeys) error {
	for _, ix := range d.indexes() {
		var oldKey, oldVal []byte
		if old != nil {
			oldKey, oldVal = ix.entry(id, old)
		}
		var newKey, newVal []byte
		if cur != nil {
			newKey, newVal = ix.entry(id, cur)
		}
		sameKey := bytes.Equal(oldKey, newKey)
		if oldKey != nil && !sameKey {
			if err := ix.bucket.Delete(oldKey); err != nil {
				return err
			}
		}
		if newKey != nil && (!sameKey || !bytes.Equal(oldVal, newVal)) {
			if err := ix.bucket.Put(newKey, newVal); err != nil {
				return err
			}
		}
	}
	return nil
}

// count returns the number of records.
func (d delegationBuckets) count() (uint64, error) {
	v := d.root.Get(keyDelegationCount)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("%w: delegation count is %d bytes", ErrCorrupt, len(v))
}

func (d delegationBuckets) addCount(delta int) error {
	n, err := d.count()
	if err != nil {
		return err
	}
	return d.root.Put(keyDelegationCount, binary.BigEndian.AppendUint64(nil, uint64(int64(n)+int64(delta))))
}

// oldKeys returns the index keys of the stored record id, or nil when
// there is none.
func (d delegationBuckets) oldKeys(id []byte) (*indexKeys, error) {
	v := d.records.Get(id)
	if v == nil {
		return nil, nil
	}
	k, _, err := decodeHeader(id, v)
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// write stores e, whose stored predecessor had the index keys old (nil
// for none). Any error leaves the transaction partly written.
func (d delegationBuckets) write(e *encodedRecord, old *indexKeys) error {
	if err := d.reindex(e.id, old, &e.keys); err != nil {
		return err
	}
	return d.records.Put(e.id, e.value)
}

// remove deletes the stored record id with index keys k. Any error leaves
// the transaction partly written.
func (d delegationBuckets) remove(id []byte, k *indexKeys) error {
	if err := d.reindex(id, k, nil); err != nil {
		return err
	}
	return d.records.Delete(id)
}

// PutDelegations implements [delegation.Store.PutDelegations]: it writes
// every record of recs (creating or replacing the record with its ID) in
// one transaction and returns once that is fsync'd. Records with the same
// ID are written in order, so the last one stays.
//
// The records are validated and encoded by the caller's goroutine; a
// record that cannot be stored (an empty ID, an ID and target agent longer
// than a key allows, a Result that is not valid JSON) fails the call
// before anything is written. The write then goes through the group
// commit, sharing its fsync with concurrent writers. A nil or empty recs
// writes nothing and returns nil.
//
// If ctx is done before the committer takes the write, it returns ctx's
// error and nothing is written. After [Store.Close] it returns an error
// wrapping [ErrClosed].
func (s *Store) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op := fmt.Sprintf("put %d delegations", len(recs))
	if len(recs) == 1 {
		op = fmt.Sprintf("put delegation %q", recs[0].ID)
	}
	if len(recs) == 0 {
		if s.db == nil || s.closed.Load() {
			return fmt.Errorf("boltstore: %s: %w", op, ErrClosed)
		}
		return nil
	}
	enc := make([]encodedRecord, len(recs))
	for i := range recs {
		e, err := encodeRecord(&recs[i])
		if err != nil {
			return fmt.Errorf("boltstore: put delegation %q: %w", recs[i].ID, err)
		}
		enc[i] = e
	}
	return s.submit(ctx, &request{
		op:    op,
		apply: func(tx *bbolt.Tx) error { return applyPut(tx, op, enc) },
	})
}

// applyPut writes enc in tx. It reads everything it needs before the first
// write, so that it fails with the transaction unchanged.
func applyPut(tx *bbolt.Tx, op string, enc []encodedRecord) error {
	d, err := delegationBucketsOf(tx)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	olds := make([]*indexKeys, len(enc))
	seen := make(map[string]*indexKeys, len(enc)) // records of this call already placed
	added := 0
	for i := range enc {
		if k, ok := seen[string(enc[i].id)]; ok {
			olds[i] = k
		} else if olds[i], err = d.oldKeys(enc[i].id); err != nil {
			return fmt.Errorf("boltstore: %s: %w", op, err)
		}
		if olds[i] == nil {
			added++
		}
		seen[string(enc[i].id)] = &enc[i].keys
	}
	for i := range enc {
		if err := d.write(&enc[i], olds[i]); err != nil {
			return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
		}
	}
	if added > 0 {
		if err := d.addCount(added); err != nil {
			return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
		}
	}
	return nil
}

// UpdateDelegation implements [delegation.Store.UpdateDelegation]: it
// reads the record with the given id, calls fn with a copy of it, and
// stores what fn returns, returning once that is fsync'd. A missing record
// gives an error wrapping [delegation.ErrNotFound] without calling fn. If
// fn returns an error, nothing is written and the error is returned
// unchanged. If fn returns nil and no error, nothing is written. fn must
// return a record with the same ID; another ID is an error and nothing is
// written.
//
// Like [Store.UpdateAgent], the write goes through the group commit: fn
// runs on the committer goroutine, inside the write transaction, once per
// call, so it must be quick and must not call back into the store's write
// methods. A panic in fn is recovered and returned as an error, with
// nothing written.
//
// If ctx is done before the committer takes the write, it returns ctx's
// error and nothing is written. After [Store.Close] it returns an error
// wrapping [ErrClosed].
func (s *Store) UpdateDelegation(ctx context.Context, id string, fn func(cur *delegation.Record) (*delegation.Record, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("boltstore: update delegation %q: nil function", id)
	}
	op := fmt.Sprintf("update delegation %q", id)
	return s.submit(ctx, &request{
		op:    op,
		apply: func(tx *bbolt.Tx) error { return applyUpdate(tx, op, id, fn) },
	})
}

// applyUpdate runs one UpdateDelegation in tx.
func applyUpdate(tx *bbolt.Tx, op, id string, fn func(cur *delegation.Record) (*delegation.Record, error)) error {
	d, err := delegationBucketsOf(tx)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	key := []byte(id)
	v := d.records.Get(key)
	if v == nil {
		return fmt.Errorf("boltstore: delegation %q: %w", id, delegation.ErrNotFound)
	}
	old, data, err := decodeHeader(key, v)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	var cur delegation.Record
	if err := json.Unmarshal(data, &cur); err != nil {
		return fmt.Errorf("boltstore: %s: %w: %w", op, ErrCorrupt, err)
	}
	next, err := callFn(fn, &cur, "update delegation", id)
	if err != nil {
		return err // fn's error unchanged
	}
	if next == nil {
		return nil
	}
	if next.ID != id {
		return fmt.Errorf("boltstore: %s: the update function changed the id to %q", op, next.ID)
	}
	e, err := encodeRecord(next)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	if err := d.write(&e, &old); err != nil {
		return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
	}
	return nil
}

// GetDelegation implements [delegation.Store.GetDelegation]: it returns the
// record with the given id, SecretHash included, or an error wrapping
// [delegation.ErrNotFound].
func (s *Store) GetDelegation(ctx context.Context, id string) (delegation.Record, error) {
	if err := ctx.Err(); err != nil {
		return delegation.Record{}, err
	}
	var rec delegation.Record
	found := false
	err := s.view(func(tx *bbolt.Tx) error {
		d, err := delegationBucketsOf(tx)
		if err != nil {
			return err
		}
		v := d.records.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		return decodeRecord([]byte(id), v, &rec)
	})
	if err != nil {
		return delegation.Record{}, fmt.Errorf("boltstore: get delegation %q: %w", id, err)
	}
	if !found {
		return delegation.Record{}, fmt.Errorf("boltstore: delegation %q: %w", id, delegation.ErrNotFound)
	}
	return rec, nil
}

// ListDelegations implements [delegation.Store.ListDelegations]: records
// newest first (CreatedAt, then ID, descending; IDs byte-wise), filtered
// by f and read from one consistent snapshot. Status and Statuses both
// filter (a record must pass both when both are set). A Limit ≤ 0 means
// [delegation.DefaultListLimit]; a Limit over [delegation.MaxListLimit]
// is capped; a negative Offset counts as 0.
//
// It walks an index: by target when f.Target is set (checking the status
// stored in the entry), else by status (merging the statuses asked for),
// else by creation time. Skipped entries are never decoded, so a page
// costs the index entries up to its end plus the records it returns —
// except with a principal, which is not indexed: then every record up to
// the page's end is read.
func (s *Store) ListDelegations(ctx context.Context, f delegation.ListFilter) ([]delegation.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, offset := f.Page()
	statuses, none := f.StatusSet()
	out := []delegation.Record{}
	if none {
		if s.db == nil || s.closed.Load() {
			return nil, fmt.Errorf("boltstore: list delegations: %w", ErrClosed)
		}
		return out, nil
	}
	err := s.view(func(tx *bbolt.Tx) error {
		d, err := delegationBucketsOf(tx)
		if err != nil {
			return err
		}
		var src *merger
		switch {
		case f.Target != "":
			src = newMerger(d.byTarget, [][]byte{appendAttr(nil, f.Target)})
		case statuses != nil:
			prefixes := make([][]byte, len(statuses))
			for i, st := range statuses {
				prefixes[i] = appendAttr(nil, string(st))
			}
			src = newMerger(d.byStatus, prefixes)
		default:
			src = newMerger(d.byCreated, [][]byte{nil})
		}
		steps := 0
		for suffix, v := src.next(); suffix != nil; suffix, v = src.next() {
			if steps++; steps%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if f.Target != "" && statuses != nil && !slices.Contains(statuses, delegation.Status(v)) {
				continue
			}
			id := suffix[timeKeyLen:]
			var rec delegation.Record
			if f.Principal != "" {
				// The principal is not in the index: read the record.
				if err := readRecord(d, id, &rec); err != nil {
					return err
				}
				if !f.KeepsPrincipal(&rec) {
					continue
				}
			}
			if offset > 0 {
				offset--
				continue
			}
			if f.Principal == "" {
				if err := readRecord(d, id, &rec); err != nil {
					return err
				}
			}
			out = append(out, rec)
			if len(out) == limit {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list delegations: %w", err)
	}
	return out, nil
}

// readRecord decodes the record id that an index entry names.
func readRecord(d delegationBuckets, id []byte, rec *delegation.Record) error {
	rv := d.records.Get(id)
	if rv == nil {
		return fmt.Errorf("%w: index entry for missing delegation %q", ErrCorrupt, id)
	}
	return decodeRecord(id, rv, rec)
}

// merger walks the keys under several prefixes of one index bucket in
// descending order of what follows the prefix (creation time, then id),
// merging the prefixes' ranges.
type merger struct {
	ranges []*reverseRange
}

// reverseRange is a cursor over the keys of one prefix, last first.
type reverseRange struct {
	c      *bbolt.Cursor
	prefix []byte
	suffix []byte // the current key without the prefix; nil when done
	value  []byte
}

func newMerger(b *bbolt.Bucket, prefixes [][]byte) *merger {
	m := &merger{ranges: make([]*reverseRange, len(prefixes))}
	for i, p := range prefixes {
		r := &reverseRange{c: b.Cursor(), prefix: p}
		var k, v []byte
		if end := successor(p); end == nil {
			k, v = r.c.Last()
		} else if k, _ = r.c.Seek(end); k == nil {
			k, v = r.c.Last()
		} else {
			k, v = r.c.Prev()
		}
		r.set(k, v)
		m.ranges[i] = r
	}
	return m
}

func (r *reverseRange) set(k, v []byte) {
	if k == nil || !bytes.HasPrefix(k, r.prefix) {
		r.suffix, r.value = nil, nil
		return
	}
	r.suffix, r.value = k[len(r.prefix):], v
}

// next returns the greatest remaining suffix of all ranges and its value,
// and moves past it; a nil suffix means every range is done.
func (m *merger) next() (suffix, value []byte) {
	var top *reverseRange
	for _, r := range m.ranges {
		if r.suffix != nil && (top == nil || bytes.Compare(r.suffix, top.suffix) > 0) {
			top = r
		}
	}
	if top == nil {
		return nil, nil
	}
	suffix, value = top.suffix, top.value
	top.set(top.c.Prev())
	return suffix, value
}

// successor returns the least key greater than every key starting with p,
// or nil when there is none (p is empty or all 0xff).
func successor(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			s := slices.Clone(p[:i+1])
			s[i]++
			return s
		}
	}
	return nil
}

// pruneChunk is the most records PruneDelegations deletes in one
// transaction, so that a large prune does not hold the writer lock (and
// the group commit behind it) for long.
const pruneChunk = 1000

// PruneDelegations implements [delegation.Store.PruneDelegations]: it
// deletes the final records that finished before olderThan, then, while
// more than keep records remain, the final records that finished first
// (by FinishedAt, or UpdatedAt when FinishedAt is nil; ties by ID). It
// returns how many it deleted. Records that are not final are never
// deleted, so more than keep may remain. keep ≤ 0 means no limit on the
// count; a zero olderThan prunes nothing by age.
//
// It walks the by_finished index from its start, so it costs the records
// it deletes, not the records stored. It deletes in transactions of up to
// 1000 records (each fsync'd) and checks ctx between them: on an error or
// a done ctx it returns the number deleted so far with the error.
func (s *Store) PruneDelegations(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cutoff := appendTime(nil, olderThan)
	// victims returns the ids of the next chunk to delete: the oldest
	// final records while they finished before cutoff or the store holds
	// more than keep.
	victims := func(d delegationBuckets) ([][]byte, error) {
		excess, err := pruneExcess(d, keep)
		if err != nil {
			return nil, err
		}
		var ids [][]byte
		c := d.byFinished.Cursor()
		for k, _ := c.First(); k != nil && len(ids) < pruneChunk; k, _ = c.Next() {
			if bytes.Compare(k[:timeKeyLen], cutoff) >= 0 && len(ids) >= excess {
				break
			}
			ids = append(ids, slices.Clone(k[timeKeyLen:]))
		}
		return ids, nil
	}
	// The client prunes every few seconds, and mostly there is nothing to
	// delete: a read transaction finds that out without the fsyncs of an
	// empty write transaction's commit.
	idle := false
	err := s.view(func(tx *bbolt.Tx) error {
		d, err := delegationBucketsOf(tx)
		if err != nil {
			return err
		}
		ids, err := victims(d)
		idle = len(ids) == 0
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("boltstore: prune delegations: %w", err)
	}
	if idle {
		return 0, nil
	}
	return s.deleteInChunks(ctx, "prune delegations", func(tx *bbolt.Tx) (int, error) {
		d, err := delegationBucketsOf(tx)
		if err != nil {
			return 0, err
		}
		ids, err := victims(d)
		if err != nil {
			return 0, err
		}
		for _, id := range ids {
			k, err := d.oldKeys(id)
			if err != nil {
				return 0, err
			}
			if k == nil {
				return 0, fmt.Errorf("%w: index entry for missing delegation %q", ErrCorrupt, id)
			}
			if err := d.remove(id, k); err != nil {
				return 0, err
			}
		}
		if len(ids) == 0 {
			return 0, nil
		}
		return len(ids), d.addCount(-len(ids))
	}, nil)
}

// pruneExcess returns how many records d holds beyond keep (≤ 0 when
// keep ≤ 0 or none).
func pruneExcess(d delegationBuckets, keep int) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	count, err := d.count()
	if err != nil {
		return 0, err
	}
	return int(min(count, 1<<62)) - keep, nil
}

// deleteInChunks deletes in write transactions of their own (see
// [Store.updateAlone]) until one deletes fewer than pruneChunk entries,
// checking ctx between them: chunk deletes the next entries in tx and
// returns how many, and committed, if set, runs after each commit. It
// returns the number deleted, so far on an error; what names the
// operation in its errors.
func (s *Store) deleteInChunks(ctx context.Context, what string, chunk func(tx *bbolt.Tx) (int, error), committed func()) (int, error) {
	total := 0
	for {
		n := 0
		err := s.updateAlone(func(tx *bbolt.Tx) (err error) {
			n, err = chunk(tx)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("boltstore: %s: %w", what, err)
		}
		total += n
		if committed != nil {
			committed()
		}
		if s.pruneChunkDone != nil {
			s.pruneChunkDone()
		}
		if n < pruneChunk {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// updateAlone runs fn in a write transaction of its own, outside the
// group commit, and commits it: for maintenance (pruning) that must not
// delay the writers of a batch.
func (s *Store) updateAlone(fn func(tx *bbolt.Tx) error) error {
	if s.db == nil || s.closed.Load() {
		return ErrClosed
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err := s.update(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}
