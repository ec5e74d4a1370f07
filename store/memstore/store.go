package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/registry"
)

// ErrClosed is returned (wrapped) by every method of a [Store] after
// [Store.Close].
var ErrClosed = errors.New("memstore: closed")

var _ registry.Store = (*Store)(nil)

// Store is an in-memory [registry.Store], [delegation.Store] and
// [breaker.Store].
//
// The zero value is an empty, open store ready to use; [New] returns the
// same. A Store is safe for concurrent use by multiple goroutines. It must
// not be copied after first use.
type Store struct {
	mu          sync.RWMutex
	agents      map[string]entry
	delegations map[string]*record // by ID
	order       []*record          // the delegations by CreatedAt, then ID
	breakers    map[string]breaker.Snapshot
	sessions    sessionTable  // session.go
	audit       []audit.Entry // audit.go: by ID
	rev         uint64        // revision of the last write
	closed      bool
}

// entry is a stored record and the revision that wrote it. The revision
// lets UpdateAgent tell whether the record changed while fn ran.
type entry struct {
	agent registry.Agent
	rev   uint64
}

// New returns an empty, open store.
func New() *Store { return &Store{} }

// GetAgent returns a deep copy of the agent stored under name, or an error
// wrapping [registry.ErrNotFound].
func (s *Store) GetAgent(ctx context.Context, name string) (registry.Agent, error) {
	if err := ctx.Err(); err != nil {
		return registry.Agent{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return registry.Agent{}, fmt.Errorf("memstore: get agent %q: %w", name, ErrClosed)
	}
	e, ok := s.agents[name]
	if !ok {
		return registry.Agent{}, fmt.Errorf("memstore: agent %q: %w", name, registry.ErrNotFound)
	}
	return e.agent.Clone(), nil
}

// ListAgents returns deep copies of every stored agent in ascending name
// order (byte-wise, as [strings.Compare]). An empty store gives an empty
// slice and no error.
func (s *Store) ListAgents(ctx context.Context) ([]registry.Agent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("memstore: list agents: %w", ErrClosed)
	}
	names := make([]string, 0, len(s.agents))
	for name := range s.agents {
		names = append(names, name)
	}
	slices.SortFunc(names, cmp.Compare[string])
	out := make([]registry.Agent, len(names))
	for i, name := range names {
		out[i] = s.agents[name].agent.Clone()
	}
	return out, nil
}

// UpdateAgent implements [registry.Store.UpdateAgent]. fn gets a deep copy
// of the current record (nil when there is none) and is called without any
// lock held; if another write to name commits while fn runs, fn is called
// again with the new record. What fn returns is copied before it is
// stored. A panic in fn propagates to the caller with nothing written.
//
// It fails with the context's error if ctx is done before the write, and
// with an error wrapping [ErrClosed] after [Store.Close].
func (s *Store) UpdateAgent(ctx context.Context, name string, fn func(cur *registry.Agent) (*registry.Agent, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur, rev, err := s.read(name)
		if err != nil {
			return err
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		if next != nil {
			c := next.Clone()
			next = &c
		}
		done, err := s.commit(name, rev, next)
		if done || err != nil {
			return err
		}
	}
}

// read returns a copy of the record stored under name (nil when there is
// none) and its revision (0 when there is none).
func (s *Store) read(name string) (*registry.Agent, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, 0, fmt.Errorf("memstore: update agent %q: %w", name, ErrClosed)
	}
	e, ok := s.agents[name]
	if !ok {
		return nil, 0, nil
	}
	a := e.agent.Clone()
	return &a, e.rev, nil
}

// commit stores next under name (deleting it when next is nil) if the
// record still has revision rev, and reports whether it did.
func (s *Store) commit(name string, rev uint64, next *registry.Agent) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, fmt.Errorf("memstore: update agent %q: %w", name, ErrClosed)
	}
	e, ok := s.agents[name]
	if ok && e.rev != rev || !ok && rev != 0 {
		return false, nil // changed since read: call fn again
	}
	switch {
	case next != nil:
		if s.agents == nil {
			s.agents = make(map[string]entry)
		}
		s.rev++
		s.agents[name] = entry{agent: *next, rev: s.rev}
	case ok:
		delete(s.agents, name)
	}
	return true, nil
}

// Close discards every record and makes every later call fail with an
// error wrapping [ErrClosed]. It always returns nil, and is idempotent and
// safe for concurrent use.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.agents, s.delegations, s.order, s.breakers = nil, nil, nil, nil
	s.sessions = sessionTable{}
	s.audit = nil
	return nil
}
