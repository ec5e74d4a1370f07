package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/breaker"
)

var (
	_ breaker.Store          = (*Store)(nil)
	_ breaker.WatchableStore = (*Store)(nil)
)

// breakersPrefix is the prefix of the breaker keys: <prefix>breakers/<name>.
func (s *Store) breakersPrefix() string { return s.prefix + "breakers/" }

// LoadBreakers implements [breaker.Store.LoadBreakers]: it returns every
// stored snapshot by breaker name, read at one revision, in a new map the
// caller owns.
func (s *Store) LoadBreakers(ctx context.Context) (map[string]breaker.Snapshot, error) {
	c, err := s.begin(ctx, "load breakers", true)
	if err != nil {
		return nil, err
	}
	defer c.end()
	prefix := s.breakersPrefix()
	out := map[string]breaker.Snapshot{}
	_, err = s.rangeAll(c.ctx, prefix, 0, func(kv *kvPair) error {
		var snap breaker.Snapshot
		if err := json.Unmarshal(kv.value, &snap); err != nil {
			return fmt.Errorf("%w: snapshot of breaker %q: %w", ErrCorrupt, kv.key[len(prefix):], err)
		}
		out[kv.key[len(prefix):]] = snap
		return nil
	})
	if errors.Is(err, ErrCorrupt) {
		return nil, fmt.Errorf("etcdstore: load breakers: %w", err)
	}
	if err != nil {
		return nil, c.fail(err)
	}
	return out, nil
}

// SaveBreaker implements [breaker.Store.SaveBreaker]; see
// [Store.SaveBreakerRevision].
func (s *Store) SaveBreaker(ctx context.Context, name string, snap breaker.Snapshot) error {
	_, err := s.SaveBreakerRevision(ctx, name, snap)
	return err
}

// SaveBreakerRevision implements [breaker.WatchableStore]: it stores snap,
// as JSON, under name with one put and returns the revision of the put.
// An empty name is an error. Breaker state carries no lease: it outlives
// an agent's TTL until [Store.DeleteBreaker] (the breaker set removes it
// with the agent).
func (s *Store) SaveBreakerRevision(ctx context.Context, name string, snap breaker.Snapshot) (int64, error) {
	if name == "" {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return 0, errors.New("etcdstore: save breaker: empty name")
	}
	c, err := s.begin(ctx, fmt.Sprintf("save breaker %q", name), true)
	if err != nil {
		return 0, err
	}
	defer c.end()
	v, err := json.Marshal(snap)
	if err != nil {
		return 0, fmt.Errorf("etcdstore: save breaker %q: encode: %w", name, err)
	}
	resp, err := s.cli.Put(c.ctx, s.breakersPrefix()+name, string(v))
	if err != nil {
		return 0, c.fail(err)
	}
	return resp.Header.Revision, nil
}

// WatchBreakers implements [breaker.WatchableStore] as [Store.WatchAgents]
// does for agents: a snapshot of every stored breaker, then each batch of
// changes etcd sends, and a new snapshot whenever the watch breaks or its
// revision was compacted. Values that do not decode are left out, with a
// warning to the logger.
//
// It returns ctx's error once ctx is done, and an error wrapping
// [ErrClosed] once the store is closed.
func (s *Store) WatchBreakers(ctx context.Context, fn func(breaker.SnapshotChanges)) error {
	prefix := s.breakersPrefix()
	return s.watchPrefix(ctx, "breakers", prefix, func(reset bool, rev int64, kvs []watched) {
		changes := make([]breaker.SnapshotChange, 0, len(kvs))
		for _, kv := range kvs {
			ch := breaker.SnapshotChange{Name: kv.key[len(prefix):], Revision: kv.rev}
			if kv.put {
				ch.Snapshot = new(breaker.Snapshot)
				if err := json.Unmarshal(kv.value, ch.Snapshot); err != nil {
					s.log.Warn("etcdstore: breaker state skipped", "key", kv.key, "err", err)
					continue
				}
			}
			changes = append(changes, ch)
		}
		fn(breaker.SnapshotChanges{Reset: reset, Revision: rev, Changes: changes})
	})
}

// DeleteBreaker implements [breaker.Store.DeleteBreaker]: it removes the
// snapshot stored under name, if any, with one delete.
func (s *Store) DeleteBreaker(ctx context.Context, name string) error {
	c, err := s.begin(ctx, fmt.Sprintf("delete breaker %q", name), true)
	if err != nil {
		return err
	}
	defer c.end()
	if name == "" {
		return nil // not a key the store could hold
	}
	if _, err := s.cli.Delete(c.ctx, s.breakersPrefix()+name); err != nil {
		return c.fail(err)
	}
	return nil
}
