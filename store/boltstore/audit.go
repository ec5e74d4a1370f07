package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/audit"
)

var _ audit.Store = (*Store)(nil)

// The audit log lives in the audit bucket: entries by ID in a nested
// bucket, and the number of entries beside it, for pruning by count:
//
//	audit/entries  id  → JSON of audit.Entry
//	audit/count        → uint64, big-endian
//
// IDs made by audit.NewID start with the entry's time, so the entries
// bucket is in time order and a listing or a prune walks it from one end.
// The audit bucket exists since schema version 1 (empty until this
// feature); Open creates the nested bucket in older files, whose empty
// audit bucket then reads as an empty log.
var (
	bucketAuditEntries = []byte("entries")
	keyAuditCount      = []byte("count")

	auditBucketNames = [][]byte{bucketAuditEntries}
)

// auditBuckets returns the audit bucket of tx and its entries bucket.
func auditBuckets(tx *bbolt.Tx) (root, entries *bbolt.Bucket, err error) {
	if root = tx.Bucket(bucketAudit); root == nil {
		return nil, nil, fmt.Errorf("%w: no %q bucket", ErrCorrupt, bucketAudit)
	}
	if entries = root.Bucket(bucketAuditEntries); entries == nil {
		return nil, nil, fmt.Errorf("%w: no %q bucket in %q", ErrCorrupt, bucketAuditEntries, bucketAudit)
	}
	entries.FillPercent = appendFillPercent
	return root, entries, nil
}

func auditCount(root *bbolt.Bucket) (uint64, error) {
	v := root.Get(keyAuditCount)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("%w: audit count is %d bytes", ErrCorrupt, len(v))
}

func putAuditCount(root *bbolt.Bucket, n uint64) error {
	return root.Put(keyAuditCount, binary.BigEndian.AppendUint64(nil, n))
}

// AppendAudit implements [audit.Store.AppendAudit]: it stores the entries
// as JSON under their IDs through the group commit and returns once they
// are fsync'd. An entry with an empty or oversized ID fails the call
// (wrapping [audit.ErrInvalid]) with nothing written.
func (s *Store) AppendAudit(ctx context.Context, entries []audit.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	type encoded struct{ id, value []byte }
	enc := make([]encoded, len(entries))
	for i := range entries {
		if err := audit.CheckEntry(&entries[i]); err != nil {
			return fmt.Errorf("boltstore: append audit: %w", err)
		}
		v, err := json.Marshal(&entries[i])
		if err != nil {
			return fmt.Errorf("boltstore: append audit %q: encode: %w", entries[i].ID, err)
		}
		enc[i] = encoded{[]byte(entries[i].ID), v}
	}
	op := fmt.Sprintf("append %d audit entries", len(entries))
	if len(entries) == 0 {
		if s.db == nil || s.closed.Load() {
			return fmt.Errorf("boltstore: %s: %w", op, ErrClosed)
		}
		return nil
	}
	return s.submit(ctx, &request{
		op: op,
		apply: func(tx *bbolt.Tx) error {
			root, b, err := auditBuckets(tx)
			if err != nil {
				return fmt.Errorf("boltstore: %s: %w", op, err)
			}
			n, err := auditCount(root)
			if err != nil {
				return fmt.Errorf("boltstore: %s: %w", op, err)
			}
			// Nothing is written before this point; a failed write below
			// leaves the transaction half done.
			for _, e := range enc {
				if b.Get(e.id) == nil {
					n++
				}
				if err := b.Put(e.id, e.value); err != nil {
					return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
				}
			}
			if err := putAuditCount(root, n); err != nil {
				return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
			}
			return nil
		},
	})
}

// ListAudit implements [audit.Store.ListAudit]: it walks the entries
// backwards from q.Before (or the newest) down to q.Since, decoding only
// the entries it returns, in one read-only transaction.
func (s *Store) ListAudit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := q.PageLimit()
	var floor []byte
	if !q.Since.IsZero() {
		floor = []byte(audit.MinID(q.Since))
	}
	out := []audit.Entry{}
	err := s.view(func(tx *bbolt.Tx) error {
		_, b, err := auditBuckets(tx)
		if err != nil {
			return err
		}
		c := b.Cursor()
		var k, v []byte
		if q.Before != "" {
			// Seek lands on the first key ≥ Before; the page starts
			// before it.
			if k, _ = c.Seek([]byte(q.Before)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for ; k != nil && len(out) < limit; k, v = c.Prev() {
			if floor != nil && bytes.Compare(k, floor) < 0 {
				break
			}
			var e audit.Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("%w: audit entry %q: %w", ErrCorrupt, k, err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list audit: %w", err)
	}
	return out, nil
}

// PruneAudit implements [audit.Store.PruneAudit]. It walks the entries
// from the oldest, so it costs the entries it deletes, in transactions of
// up to 1000 deletions (each fsync'd) outside the group commit, checking
// ctx between them; on an error it returns the number deleted so far.
func (s *Store) PruneAudit(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var cutoff []byte
	if !olderThan.IsZero() {
		cutoff = []byte(audit.MinID(olderThan))
	}
	// victims returns the ids of the next chunk to delete, and the count
	// of entries.
	victims := func(tx *bbolt.Tx) (root, b *bbolt.Bucket, ids [][]byte, count uint64, err error) {
		if root, b, err = auditBuckets(tx); err != nil {
			return nil, nil, nil, 0, err
		}
		if count, err = auditCount(root); err != nil {
			return nil, nil, nil, 0, err
		}
		excess := -1 // how many to delete beyond the old ones; -1 none
		if keep > 0 {
			excess = int(min(count, 1<<62)) - keep
		}
		c := b.Cursor()
		for k, _ := c.First(); k != nil && len(ids) < pruneChunk; k, _ = c.Next() {
			if (cutoff == nil || bytes.Compare(k, cutoff) >= 0) && len(ids) >= excess {
				break
			}
			ids = append(ids, slices.Clone(k))
		}
		return root, b, ids, count, nil
	}
	// The recorder prunes after every few hundred entries it writes, and
	// below the bounds there is nothing to delete: a read transaction
	// finds that out without the fsyncs of an empty write's commit.
	idle := false
	err := s.view(func(tx *bbolt.Tx) error {
		_, _, ids, _, err := victims(tx)
		idle = len(ids) == 0
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("boltstore: prune audit: %w", err)
	}
	if idle {
		return 0, nil
	}
	return s.deleteInChunks(ctx, "prune audit", func(tx *bbolt.Tx) (int, error) {
		root, b, ids, count, err := victims(tx)
		if err != nil {
			return 0, err
		}
		for _, id := range ids {
			if err := b.Delete(id); err != nil {
				return 0, err
			}
		}
		if len(ids) == 0 {
			return 0, nil
		}
		return len(ids), putAuditCount(root, count-min(count, uint64(len(ids))))
	}, nil)
}
