package memstore

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/agentmesh/agentmesh/breaker"
)

var _ breaker.Store = (*Store)(nil)

// LoadBreakers implements [breaker.Store.LoadBreakers]: it returns a new
// map of every stored snapshot by breaker name, which the caller owns.
func (s *Store) LoadBreakers(ctx context.Context) (map[string]breaker.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("memstore: load breakers: %w", ErrClosed)
	}
	out := maps.Clone(s.breakers)
	if out == nil {
		out = map[string]breaker.Snapshot{}
	}
	return out, nil
}

// SaveBreaker implements [breaker.Store.SaveBreaker]: it stores snap under
// name, replacing what was there. An empty name is an error.
func (s *Store) SaveBreaker(ctx context.Context, name string, snap breaker.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return errors.New("memstore: save breaker: empty name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memstore: save breaker %q: %w", name, ErrClosed)
	}
	if s.breakers == nil {
		s.breakers = make(map[string]breaker.Snapshot)
	}
	s.breakers[name] = snap // Snapshot holds no references: a copy
	return nil
}

// DeleteBreaker implements [breaker.Store.DeleteBreaker]: it removes the
// snapshot stored under name, if any.
func (s *Store) DeleteBreaker(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memstore: delete breaker %q: %w", name, ErrClosed)
	}
	delete(s.breakers, name)
	return nil
}
