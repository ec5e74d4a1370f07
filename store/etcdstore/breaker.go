package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/breaker"
)

var _ breaker.Store = (*Store)(nil)

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

// SaveBreaker implements [breaker.Store.SaveBreaker]: it stores snap, as
// JSON, under name with one put. An empty name is an error. Breaker state
// carries no lease: it outlives an agent's TTL until [Store.DeleteBreaker]
// (the breaker set removes it with the agent).
func (s *Store) SaveBreaker(ctx context.Context, name string, snap breaker.Snapshot) error {
	if name == "" {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errors.New("etcdstore: save breaker: empty name")
	}
	c, err := s.begin(ctx, fmt.Sprintf("save breaker %q", name), true)
	if err != nil {
		return err
	}
	defer c.end()
	v, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("etcdstore: save breaker %q: encode: %w", name, err)
	}
	if _, err := s.cli.Put(c.ctx, s.breakersPrefix()+name, string(v)); err != nil {
		return c.fail(err)
	}
	return nil
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
