package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/breaker"
)

var _ breaker.Store = (*Store)(nil)

// LoadBreakers implements [breaker.Store.LoadBreakers]: it returns every
// snapshot in the breakers bucket by breaker name, in a new map the caller
// owns, read from one consistent snapshot.
func (s *Store) LoadBreakers(ctx context.Context) (map[string]breaker.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]breaker.Snapshot{}
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketBreakers).ForEach(func(k, v []byte) error {
			var snap breaker.Snapshot
			if err := json.Unmarshal(v, &snap); err != nil {
				return fmt.Errorf("%w: snapshot of breaker %q: %w", ErrCorrupt, k, err)
			}
			out[string(k)] = snap
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: load breakers: %w", err)
	}
	return out, nil
}

// SaveBreaker implements [breaker.Store.SaveBreaker]: it stores snap, as
// JSON, under name in the breakers bucket and returns once that is
// fsync'd. The write goes through the group commit. An empty name, or one
// longer than a bbolt key, is an error.
//
// If ctx is done before the committer takes the write, it returns ctx's
// error and nothing is written. After [Store.Close] it returns an error
// wrapping [ErrClosed].
func (s *Store) SaveBreaker(ctx context.Context, name string, snap breaker.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBreakerName(name); err != nil {
		return fmt.Errorf("boltstore: save breaker: %w", err)
	}
	v, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("boltstore: save breaker %q: encode: %w", name, err)
	}
	return s.submit(ctx, &request{
		op: fmt.Sprintf("save breaker %q", name),
		apply: func(tx *bbolt.Tx) error {
			if err := tx.Bucket(bucketBreakers).Put([]byte(name), v); err != nil {
				return fmt.Errorf("boltstore: save breaker %q: %w", name, err)
			}
			return nil
		},
	})
}

// DeleteBreaker implements [breaker.Store.DeleteBreaker]: it removes the
// snapshot stored under name, if any, and returns once that is fsync'd.
// Like SaveBreaker, it goes through the group commit.
func (s *Store) DeleteBreaker(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if checkBreakerName(name) != nil {
		// Not a key the store could hold: nothing to delete. Still
		// report a closed store.
		if s.db == nil || s.closed.Load() {
			return fmt.Errorf("boltstore: delete breaker %q: %w", name, ErrClosed)
		}
		return nil
	}
	return s.submit(ctx, &request{
		op: fmt.Sprintf("delete breaker %q", name),
		apply: func(tx *bbolt.Tx) error {
			if err := tx.Bucket(bucketBreakers).Delete([]byte(name)); err != nil {
				return fmt.Errorf("boltstore: delete breaker %q: %w", name, err)
			}
			return nil
		},
	})
}

func checkBreakerName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > bbolt.MaxKeySize:
		return fmt.Errorf("name is %d bytes, more than %d", len(name), bbolt.MaxKeySize)
	}
	return nil
}
