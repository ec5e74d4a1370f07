package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/audit"
)

var _ audit.Store = (*Store)(nil)

// The audit log: one key per entry, its order key descending by ID (so an
// ascending, limited range lists newest first, as etcd serves cheaply):
//
//	audit/<descending id>   → JSON of audit.Entry
//
// IDs made by audit.NewID start with their time, so key order is newest
// first, and a time bound (audit.MinID) is a key bound.
const auditEntries = "audit/"

// auditKey returns the key of the entry with the given ID.
func (s *Store) auditKey(id string) string { return s.prefix + auditEntries + descKey([]byte(id)) }

// auditChunk is the most entries AppendAudit puts in one transaction.
const auditChunk = maxTxnOps

// AppendAudit implements [audit.Store.AppendAudit]: it stores entries, an
// entry with a stored ID replacing it, in transactions of up to 120
// entries (the recorder's batches of up to 512 take a few; when it returns
// nil, every entry is committed). An entry with an empty or oversized ID
// fails the call (wrapping [audit.ErrInvalid]) with nothing written. Audit
// entries carry no lease: [Store.PruneAudit] applies the retention.
func (s *Store) AppendAudit(ctx context.Context, entries []audit.Entry) error {
	c, err := s.begin(ctx, "append audit", true)
	if err != nil {
		return err
	}
	defer c.end()
	ops := make([]clientv3.Op, 0, len(entries))
	for i := range entries {
		if err := audit.CheckEntry(&entries[i]); err != nil {
			return fmt.Errorf("etcdstore: append audit: %w", err)
		}
		data, err := json.Marshal(&entries[i])
		if err != nil {
			return fmt.Errorf("etcdstore: append audit %q: encode: %w", entries[i].ID, err)
		}
		ops = append(ops, clientv3.OpPut(s.auditKey(entries[i].ID), string(data)))
	}
	seen := make(map[string]int, len(ops)) // a key twice in a txn is refused: the last one wins
	for i := range entries {
		seen[entries[i].ID] = i
	}
	var chunk []clientv3.Op
	for i, op := range ops {
		if seen[entries[i].ID] != i {
			continue
		}
		if chunk = append(chunk, op); len(chunk) == auditChunk {
			if _, err := s.cli.Txn(c.ctx).Then(chunk...).Commit(); err != nil {
				return c.fail(err)
			}
			chunk = chunk[:0]
		}
	}
	if len(chunk) > 0 {
		if _, err := s.cli.Txn(c.ctx).Then(chunk...).Commit(); err != nil {
			return c.fail(err)
		}
	}
	return nil
}

// ListAudit implements [audit.Store.ListAudit]: entries newest first (ID
// descending), filtered and paged by q, with one limited range request.
func (s *Store) ListAudit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	c, err := s.begin(ctx, "list audit", true)
	if err != nil {
		return nil, err
	}
	defer c.end()
	limit := q.PageLimit()
	prefix := s.prefix + auditEntries
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	if q.Before != "" { // IDs below Before: keys above its key
		from = s.auditKey(q.Before) + "\x00"
	}
	if !q.Since.IsZero() { // IDs at or above MinID(Since): keys at or below its key
		end = s.auditKey(audit.MinID(q.Since)) + "\x00"
	}
	out := []audit.Entry{}
	if from >= end {
		return out, nil
	}
	resp, err := s.cli.Get(c.ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, c.fail(err)
	}
	for _, kv := range resp.Kvs {
		var e audit.Entry
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			return nil, fmt.Errorf("etcdstore: list audit: %w: entry %q: %w", ErrCorrupt, kv.Key, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// PruneAudit implements [audit.Store.PruneAudit]: it deletes the entries
// older than olderThan (one range deletion), then, when more than keep
// remain, the oldest beyond keep (a count, a keys-only read of the keep
// newest keys to find the boundary, and one range deletion), and returns
// how many it deleted. A zero olderThan deletes none by age; keep ≤ 0
// means no limit on the count.
func (s *Store) PruneAudit(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	c, err := s.begin(ctx, "prune audit", true)
	if err != nil {
		return 0, err
	}
	defer c.end()
	prefix := s.prefix + auditEntries
	end := clientv3.GetPrefixRangeEnd(prefix)
	n := 0
	if !olderThan.IsZero() {
		resp, err := s.cli.Delete(c.ctx, s.auditKey(audit.MinID(olderThan))+"\x00", clientv3.WithRange(end))
		if err != nil {
			return 0, c.fail(err)
		}
		n += int(resp.Deleted)
	}
	if keep <= 0 {
		return n, nil
	}
	count, err := s.cli.Get(c.ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return n, c.fail(err)
	}
	if count.Count <= int64(keep) {
		return n, nil
	}
	kept, err := s.cli.Get(c.ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(keep)),
		clientv3.WithRev(count.Header.Revision))
	if err != nil {
		return n, c.fail(err)
	}
	if len(kept.Kvs) == 0 {
		return n, nil
	}
	last := string(kept.Kvs[len(kept.Kvs)-1].Key)
	resp, err := s.cli.Delete(c.ctx, last+"\x00", clientv3.WithRange(end))
	if err != nil {
		return n, c.fail(err)
	}
	return n + int(resp.Deleted), nil
}
