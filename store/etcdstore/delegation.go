package etcdstore

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/delegation"
)

var _ delegation.Store = (*Store)(nil)

// The delegation keys. Records are stored once, by id; four indexes
// beside them hold, in every entry, the record's header (its creation
// and finish times, status, target and owner, as JSON); the owners that
// are alive have a key each, on a lease they keep alive (owner.go):
//
//	delegations/records/<id>                          → JSON of delegation.Record
//	delegations/by_created/<newest>                   → header
//	delegations/by_status/<status>/<newest>           → header
//	delegations/by_finished/<finished><id>            → header, final records only
//	delegations/by_owner/<owner>/<id>                 → header, running records with an owner only
//	delegations/owners/<owner>                        → the time it was taken, on the owner's lease
//
// <newest> is an order key that sorts newest first (ascending key order
// is descending creation time, then descending id): the creation time and
// the id, both bit-inverted, in hex, then "~". etcd can only limit a range
// cheaply in ascending key order, so a page of a listing is a limited
// range. <finished> is the finish time in 24 hex digits (oldest first, for
// pruning). <status> and <owner> are path-escaped (so an owner holds no
// "/"). Every write of a record puts all of its index entries in the same
// transaction, so they share the record's mod revision: a conditional
// delete can compare an index entry's revision instead of reading the
// record.
const (
	delegationRecords    = "delegations/records/"
	delegationByCreated  = "delegations/by_created/"
	delegationByStatus   = "delegations/by_status/"
	delegationByFinished = "delegations/by_finished/"
	delegationByOwner    = "delegations/by_owner/"
	delegationOwners     = "delegations/owners/"
)

// timeHex is the order-preserving key form of t: Unix seconds with the sign
// bit flipped and nanoseconds, big-endian, in 24 hex digits.
func timeHex(t time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.Unix())^1<<63)
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
	return hex.EncodeToString(b[:])
}

// newestKey is the order key of a record created at created (in timeHex
// form) with the given id: ascending order of newestKey is descending
// order of (created, id), ids compared byte-wise. Inverted hex digits sort
// below "~", so an id that extends another sorts before it, as a
// descending order wants.
func newestKey(created, id string) string {
	b, _ := hex.DecodeString(created) // created is timeHex output
	return descKey(append(b, id...))
}

// descKey is the order key of b whose ascending order is the descending
// order of the byte strings: b bit-inverted, in hex, then "~". Every hex
// digit sorts below "~", so a string that extends another (and is
// greater) gets the smaller key.
func descKey(b []byte) string {
	var sb strings.Builder
	sb.Grow(2*len(b) + 1)
	for _, c := range b {
		sb.WriteString(hex.EncodeToString([]byte{^c}))
	}
	sb.WriteByte('~')
	return sb.String()
}

// idOfNewestKey returns the id encoded in the order key k.
func idOfNewestKey(k string) (string, error) {
	if len(k) < 25 || k[len(k)-1] != '~' {
		return "", fmt.Errorf("%w: bad index key %q", ErrCorrupt, k)
	}
	b, err := hex.DecodeString(k[24 : len(k)-1])
	if err != nil {
		return "", fmt.Errorf("%w: bad index key %q", ErrCorrupt, k)
	}
	for i := range b {
		b[i] = ^b[i]
	}
	return string(b), nil
}

// header is what a record's index entries are made of, stored as the
// value of each.
type header struct {
	Created  string `json:"c"`           // timeHex of CreatedAt
	Status   string `json:"s"`           // the status
	Target   string `json:"t,omitempty"` // the target agent
	Finished string `json:"f,omitempty"` // timeHex of the finish time, final records only
	Owner    string `json:"o,omitempty"` // the owner, running records only
	// Principal is the principal that started the delegation.
	Principal string `json:"p,omitempty"`
}

// headerOf returns the header of rec. A final record's finish time is
// FinishedAt, or UpdatedAt when FinishedAt is nil.
func headerOf(rec *delegation.Record) header {
	h := header{Created: timeHex(rec.CreatedAt), Status: string(rec.Status), Target: rec.TargetAgent, Principal: rec.Principal}
	switch {
	case rec.Status.Final():
		h.Finished = timeHex(finishTime(rec))
	case rec.Status == delegation.StatusRunning:
		h.Owner = rec.Owner
	}
	return h
}

// finishTime is when a final record finished, for pruning.
func finishTime(rec *delegation.Record) time.Time {
	if rec.FinishedAt != nil {
		return *rec.FinishedAt
	}
	return rec.UpdatedAt
}

// indexKeys returns the keys of the index entries of record id with header
// h.
func (s *Store) indexKeys(id string, h *header) []string {
	nk := newestKey(h.Created, id)
	keys := []string{
		s.prefix + delegationByCreated + nk,
		s.prefix + delegationByStatus + url.PathEscape(h.Status) + "/" + nk,
	}
	if h.Finished != "" {
		keys = append(keys, s.prefix+delegationByFinished+h.Finished+id)
	}
	if h.Owner != "" {
		keys = append(keys, s.ownerIndex(h.Owner)+id)
	}
	return keys
}

// encodedRecord is a record ready to be written.
type encodedRecord struct {
	id    string
	data  []byte
	hdr   header
	owned bool // the record has an owner: it never replaces a final one
}

// encodeRecord checks that rec can be stored and encodes it.
func encodeRecord(rec *delegation.Record) (encodedRecord, error) {
	if rec.ID == "" {
		return encodedRecord{}, errors.New("empty id")
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return encodedRecord{}, fmt.Errorf("encode: %w", err)
	}
	return encodedRecord{id: rec.ID, data: data, hdr: headerOf(rec), owned: rec.Owner != ""}, nil
}

// writeOps returns the operations that store e over its stored version,
// whose header is old (nil for a new record): the record, its index
// entries (all put, so they share the record's mod revision), and the
// deletion of old index entries that moved.
func (s *Store) writeOps(e *encodedRecord, old *header) []clientv3.Op {
	hdr, _ := json.Marshal(e.hdr) // a struct of strings
	keys := s.indexKeys(e.id, &e.hdr)
	ops := make([]clientv3.Op, 0, 1+2*len(keys))
	ops = append(ops, clientv3.OpPut(s.prefix+delegationRecords+e.id, string(e.data)))
	for _, k := range keys {
		ops = append(ops, clientv3.OpPut(k, string(hdr)))
	}
	if old != nil {
		for _, k := range s.indexKeys(e.id, old) {
			if !slices.Contains(keys, k) {
				ops = append(ops, clientv3.OpDelete(k))
			}
		}
	}
	return ops
}

// recordFields are the fields of a stored record its header is made of:
// decoding only them skips the rest (a result of up to 4 MiB).
type recordFields struct {
	TargetAgent string            `json:"targetAgent"`
	Status      delegation.Status `json:"status"`
	CreatedAt   time.Time         `json:"createdAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	FinishedAt  *time.Time        `json:"finishedAt,omitempty"`
	Owner       string            `json:"owner,omitempty"`
	Principal   string            `json:"principal,omitempty"`
}

// storedHeader returns the header of the stored record value v of id.
func storedHeader(id string, v []byte) (header, error) {
	var f recordFields
	if err := json.Unmarshal(v, &f); err != nil {
		return header{}, fmt.Errorf("%w: record of delegation %q: %w", ErrCorrupt, id, err)
	}
	rec := delegation.Record{TargetAgent: f.TargetAgent, Status: f.Status, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt, FinishedAt: f.FinishedAt, Owner: f.Owner, Principal: f.Principal}
	return headerOf(&rec), nil
}

// decodeRecord decodes the stored value v of record id.
func decodeRecord(id string, v []byte, rec *delegation.Record) error {
	if err := json.Unmarshal(v, rec); err != nil {
		return fmt.Errorf("%w: record of delegation %q: %w", ErrCorrupt, id, err)
	}
	return nil
}

// putChunkRecords and putChunkBytes bound the records of one transaction
// of PutDelegations: at most 7 operations and one comparison a record,
// under maxTxnOps, and about 1 MiB (a larger record goes alone).
const (
	putChunkRecords = maxTxnOps / 7
	putChunkBytes   = 1 << 20
)

// PutDelegations implements [delegation.Store.PutDelegations]: it writes
// every record of recs (creating or replacing the record with its ID, and
// moving its index entries), returning once etcd has committed them.
// Records with the same ID are written in order, so the last one stays and
// the others leave no trace.
//
// The records are validated and encoded first; a record that cannot be
// stored (an empty ID, a Result that is not valid JSON) fails the call
// before anything is written. The records are then written in
// transactions of up to 17 records or about 1 MiB: a batch that fits is
// written atomically; a larger one is not (a failure part way leaves the
// earlier transactions committed), but when it returns nil every record
// is committed. Each transaction first assumes its records are new (one
// round trip); when one of them exists it reads their headers and
// replaces them in a transaction that compares their mod revisions,
// retrying when another writer changed one meanwhile.
//
// A record with an Owner never replaces a stored final record: that one
// stays as it is (see [delegation.OwnerStore]), so that the late write of
// an owner declared dead cannot turn an interrupted record back to
// running or completed. Records without an owner replace any.
func (s *Store) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	op := fmt.Sprintf("put %d delegations", len(recs))
	if len(recs) == 1 {
		op = fmt.Sprintf("put delegation %q", recs[0].ID)
	}
	c, err := s.begin(ctx, op, true)
	if err != nil {
		return err
	}
	defer c.end()
	last := make(map[string]int, len(recs)) // id → index of its last record
	for i := range recs {
		last[recs[i].ID] = i
	}
	enc := make([]encodedRecord, 0, len(last))
	for i := range recs {
		if last[recs[i].ID] != i {
			continue
		}
		e, err := encodeRecord(&recs[i])
		if err != nil {
			return fmt.Errorf("etcdstore: put delegation %q: %w", recs[i].ID, err)
		}
		enc = append(enc, e)
	}
	for len(enc) > 0 {
		n, size := 0, 0
		for n < len(enc) && n < putChunkRecords && (n == 0 || size+len(enc[n].data) <= putChunkBytes) {
			size += len(enc[n].data)
			n++
		}
		if err := s.putChunk(c, enc[:n]); err != nil {
			return c.fail(err)
		}
		enc = enc[n:]
	}
	return nil
}

// putChunk writes enc in one transaction: first as new records, then, if
// some exist, over their stored versions.
func (s *Store) putChunk(c *call, enc []encodedRecord) error {
	olds := make([]*header, len(enc))
	mods := make([]int64, len(enc))
	for {
		cmps := make([]clientv3.Cmp, len(enc))
		var ops []clientv3.Op
		for i := range enc {
			key := s.prefix + delegationRecords + enc[i].id
			cmps[i] = clientv3.Compare(clientv3.ModRevision(key), "=", mods[i])
			if enc[i].owned && olds[i] != nil && delegation.Status(olds[i].Status).Final() {
				continue // final is final; the compare still checks it is
			}
			ops = append(ops, s.writeOps(&enc[i], olds[i])...)
		}
		resp, err := s.cli.Txn(c.ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
		if err := s.readHeaders(c, enc, olds, mods); err != nil {
			return err
		}
	}
}

// readHeaders reads the stored versions of the records of enc: their
// headers into olds (nil when missing) and mod revisions into mods (0).
func (s *Store) readHeaders(c *call, enc []encodedRecord, olds []*header, mods []int64) error {
	gets := make([]clientv3.Op, len(enc))
	for i := range enc {
		gets[i] = clientv3.OpGet(s.prefix + delegationRecords + enc[i].id)
	}
	resp, err := s.cli.Txn(c.ctx).Then(gets...).Commit()
	if err != nil {
		return err
	}
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().GetKvs()
		olds[i], mods[i] = nil, 0
		if len(kvs) == 0 {
			continue
		}
		h, err := storedHeader(enc[i].id, kvs[0].Value)
		if err != nil {
			return err
		}
		olds[i], mods[i] = &h, kvs[0].ModRevision
	}
	return nil
}

// UpdateDelegation implements [delegation.Store.UpdateDelegation]: it
// reads the record with the given id, calls fn with a fresh copy of it,
// and commits what fn returns, with its moved index entries, in a
// transaction that compares the record's mod revision with the one read;
// when another writer changed the record meanwhile it reads again and
// calls fn again. A missing record gives an error wrapping
// [delegation.ErrNotFound] without calling fn. If fn returns an error,
// nothing is written and the error is returned unchanged. If fn returns
// nil and no error, nothing is written. fn must return a record with the
// same ID; another ID is an error and nothing is written. Updates of one
// record from one Store are serialised, as in [Store.UpdateAgentRevision];
// fn must not update the same record through the same Store. A panic in
// fn propagates with nothing written.
func (s *Store) UpdateDelegation(ctx context.Context, id string, fn func(cur *delegation.Record) (*delegation.Record, error)) error {
	if fn == nil {
		return fmt.Errorf("etcdstore: update delegation %q: nil function", id)
	}
	c, err := s.begin(ctx, fmt.Sprintf("update delegation %q", id), true)
	if err != nil {
		return err
	}
	defer c.end()
	key := s.prefix + delegationRecords + id
	unlock, err := s.lockKey(c.ctx, key)
	if err != nil {
		return c.fail(err)
	}
	defer unlock()
	for {
		resp, err := s.cli.Get(c.ctx, key)
		if err != nil {
			return c.fail(err)
		}
		if len(resp.Kvs) == 0 || id == "" {
			return fmt.Errorf("etcdstore: delegation %q: %w", id, delegation.ErrNotFound)
		}
		kv := resp.Kvs[0]
		var cur delegation.Record
		if err := decodeRecord(id, kv.Value, &cur); err != nil {
			return err
		}
		old := headerOf(&cur)
		next, err := fn(&cur)
		if err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		if next.ID != id {
			return fmt.Errorf("etcdstore: update delegation %q: the update function changed the id to %q", id, next.ID)
		}
		e, err := encodeRecord(next)
		if err != nil {
			return fmt.Errorf("etcdstore: update delegation %q: %w", id, err)
		}
		tresp, err := s.cli.Txn(c.ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(s.writeOps(&e, &old)...).
			Commit()
		if err != nil {
			return c.fail(err)
		}
		if tresp.Succeeded {
			return nil
		}
	}
}

// GetDelegation implements [delegation.Store.GetDelegation]: it returns the
// record with the given id, SecretHash included, or an error wrapping
// [delegation.ErrNotFound].
func (s *Store) GetDelegation(ctx context.Context, id string) (delegation.Record, error) {
	c, err := s.begin(ctx, fmt.Sprintf("get delegation %q", id), true)
	if err != nil {
		return delegation.Record{}, err
	}
	defer c.end()
	resp, err := s.cli.Get(c.ctx, s.prefix+delegationRecords+id)
	if err != nil {
		return delegation.Record{}, c.fail(err)
	}
	if len(resp.Kvs) == 0 || id == "" {
		return delegation.Record{}, fmt.Errorf("etcdstore: delegation %q: %w", id, delegation.ErrNotFound)
	}
	var rec delegation.Record
	if err := decodeRecord(id, resp.Kvs[0].Value, &rec); err != nil {
		return delegation.Record{}, err
	}
	return rec, nil
}

// ListDelegations implements [delegation.Store.ListDelegations]: records
// newest first (CreatedAt, then ID, descending; IDs byte-wise), filtered
// by f, all read at one revision. Status and Statuses both filter (a
// record must pass both when both are set). A Limit ≤ 0 means
// [delegation.DefaultListLimit]; a Limit over [delegation.MaxListLimit]
// is capped; a negative Offset counts as 0.
//
// It walks an index in pages: by status when the filter names statuses
// (merging them), else by creation time, checking the target in each
// entry's header (and the principal, when one is named). Its cost is the index entries up to the end of the page
// — offset + limit when no target is named, every newer record of other
// targets when one is — plus one read of the records returned, in
// transactions of up to 100 reads. If etcd compacts the revision while a
// listing reads it, the listing starts again at the latest one.
func (s *Store) ListDelegations(ctx context.Context, f delegation.ListFilter) ([]delegation.Record, error) {
	c, err := s.begin(ctx, "list delegations", true)
	if err != nil {
		return nil, err
	}
	defer c.end()
	limit, offset := f.Page()
	statuses, none := f.StatusSet()
	if none {
		return []delegation.Record{}, nil
	}
	for attempt := 0; ; attempt++ {
		out, err := s.listOnce(c, f, statuses, limit, offset)
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 3 {
			continue
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("etcdstore: list delegations: %w", err)
		}
		if err != nil {
			return nil, c.fail(err)
		}
		return out, nil
	}
}

// listOnce is one attempt of ListDelegations.
func (s *Store) listOnce(c *call, f delegation.ListFilter, statuses []delegation.Status, limit, offset int) ([]delegation.Record, error) {
	var rev int64
	var src []*scan
	batch := int64(min(max(offset+limit, 32), 1000))
	if statuses == nil {
		src = []*scan{{prefix: s.prefix + delegationByCreated, batch: batch}}
	} else {
		for _, st := range statuses {
			src = append(src, &scan{prefix: s.prefix + delegationByStatus + url.PathEscape(string(st)) + "/", batch: batch})
		}
	}
	var ids []string
	for len(ids) < limit {
		e, err := s.mergeNext(c.ctx, src, &rev)
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if f.Target != "" || f.Principal != "" {
			var h header
			if err := json.Unmarshal(e.value, &h); err != nil {
				return nil, fmt.Errorf("%w: index entry %q: %w", ErrCorrupt, e.key, err)
			}
			if f.Target != "" && h.Target != f.Target || !f.KeepsPrincipal(&delegation.Record{Principal: h.Principal}) {
				continue
			}
		}
		if offset > 0 {
			offset--
			continue
		}
		id, err := idOfNewestKey(e.suffix)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return s.readRecords(c.ctx, ids, rev)
}

// readRecords reads the records ids at revision rev, in order, in
// transactions of up to 100 reads.
func (s *Store) readRecords(ctx context.Context, ids []string, rev int64) ([]delegation.Record, error) {
	out := make([]delegation.Record, 0, len(ids))
	for chunk := range slices.Chunk(ids, 100) {
		gets := make([]clientv3.Op, len(chunk))
		for i, id := range chunk {
			gets[i] = clientv3.OpGet(s.prefix+delegationRecords+id, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return nil, err
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				return nil, fmt.Errorf("%w: index entry for missing delegation %q", ErrCorrupt, chunk[i])
			}
			var rec delegation.Record
			if err := decodeRecord(chunk[i], kvs[0].Value, &rec); err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// scan reads the keys under one prefix in ascending order, a page at a
// time, at the revision of its first page.
type scan struct {
	prefix string
	batch  int64
	from   string // the next key to read from; "" means the prefix
	buf    []*kvPair
	done   bool
}

// entry is a key read by a scan, with the part after its prefix.
type entry struct {
	*kvPair
	suffix string
}

// peek returns the scan's next key without moving past it, or nil when it
// is done. *rev is the revision of every page: 0 until the first read
// sets it.
func (s *Store) peek(ctx context.Context, sc *scan, rev *int64) (*entry, error) {
	if len(sc.buf) == 0 && !sc.done {
		from := sc.from
		if from == "" {
			from = sc.prefix
		}
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(sc.prefix)), clientv3.WithLimit(sc.batch)}
		if *rev > 0 {
			opts = append(opts, clientv3.WithRev(*rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, err
		}
		if *rev == 0 {
			*rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			sc.buf = append(sc.buf, pairOf(kv))
		}
		sc.done = !resp.More || len(resp.Kvs) == 0
		if len(resp.Kvs) > 0 {
			sc.from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	if len(sc.buf) == 0 {
		return nil, nil
	}
	return &entry{kvPair: sc.buf[0], suffix: sc.buf[0].key[len(sc.prefix):]}, nil
}

// mergeNext returns the least next key of all scans by the part after
// their prefixes, and moves past it; nil when every scan is done.
func (s *Store) mergeNext(ctx context.Context, scans []*scan, rev *int64) (*entry, error) {
	var top *entry
	var from *scan
	for _, sc := range scans {
		e, err := s.peek(ctx, sc, rev)
		if err != nil {
			return nil, err
		}
		if e != nil && (top == nil || e.suffix < top.suffix) {
			top, from = e, sc
		}
	}
	if top != nil {
		from.buf = from.buf[1:]
	}
	return top, nil
}

// pruneChunk is the most records PruneDelegations deletes in one
// transaction: four deletions and one comparison each.
const pruneChunk = maxTxnOps / 4

// PruneDelegations implements [delegation.Store.PruneDelegations]: it
// deletes the final records that finished before olderThan, then, while
// more than keep records remain, the final records that finished first
// (by FinishedAt, or UpdatedAt when FinishedAt is nil; ties by ID). It
// returns how many it deleted. Records that are not final are never
// deleted, so more than keep may remain. keep ≤ 0 means no limit on the
// count; a zero olderThan prunes nothing by age.
//
// It counts the records (a count-only range), then walks the by_finished
// index from its start, so it costs the records it deletes, not the
// records stored. Each record is deleted with its index entries only if
// it did not change since the index was read (several replicas may prune
// at once; a record written meanwhile is left for the next prune). It
// deletes in transactions of up to 30 records, checking ctx between them:
// on an error or a done ctx it returns the number deleted so far with the
// error.
func (s *Store) PruneDelegations(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	c, err := s.begin(ctx, "prune delegations", true)
	if err != nil {
		return 0, err
	}
	defer c.end()
	excess := -1 // how many to delete beyond the old ones; -1 none
	if keep > 0 {
		resp, err := s.cli.Get(c.ctx, s.prefix+delegationRecords, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, c.fail(err)
		}
		excess = int(resp.Count) - keep
	}
	cutoff := timeHex(olderThan)
	sc := &scan{prefix: s.prefix + delegationByFinished, batch: pruneChunk}
	total := 0
	for {
		var rev int64 // each chunk reads the latest revision
		sc.buf, sc.done = nil, false
		var victims []*entry
		for len(victims) < pruneChunk {
			e, err := s.peek(c.ctx, sc, &rev)
			if err != nil {
				return total, c.fail(err)
			}
			if e == nil || len(e.suffix) < 24 || e.suffix[:24] >= cutoff && total+len(victims) >= excess {
				break
			}
			sc.buf = sc.buf[1:]
			victims = append(victims, e)
		}
		if len(victims) == 0 {
			return total, nil
		}
		n, err := s.deleteRecords(c, victims)
		total += n
		if err != nil {
			return total, c.fail(err)
		}
		sc.from = victims[len(victims)-1].key + "\x00"
		if err := c.ctx.Err(); err != nil {
			return total, c.fail(err)
		}
	}
}

// deleteRecords deletes the records of the by_finished entries vs, each
// with its index entries, in one transaction if none changed since read;
// else one by one, skipping those that changed. It returns how many it
// deleted.
func (s *Store) deleteRecords(c *call, vs []*entry) (int, error) {
	all := make([]guarded, 0, len(vs))
	for _, e := range vs {
		id := e.suffix[24:]
		var h header
		if err := json.Unmarshal(e.value, &h); err != nil {
			return 0, fmt.Errorf("%w: index entry %q: %w", ErrCorrupt, e.key, err)
		}
		key := s.prefix + delegationRecords + id
		g := guarded{cmp: clientv3.Compare(clientv3.ModRevision(key), "=", e.mod), ops: []clientv3.Op{clientv3.OpDelete(key)}}
		for _, k := range s.indexKeys(id, &h) {
			g.ops = append(g.ops, clientv3.OpDelete(k))
		}
		all = append(all, g)
	}
	return s.commitGuarded(c.ctx, all, nil)
}
