package delegation_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// memStore is store/memstore's delegation.Store with fault injection and
// observation for the tests: failing or slow writes, a hook on every
// write, and a log of prune calls.
type memStore struct {
	*memstore.Store

	puts     atomic.Int64 // PutDelegations calls that wrote
	putDelay time.Duration
	putErr   atomic.Pointer[error]
	onPut    func([]delegation.Record)

	mu         sync.Mutex
	pruneCalls []pruneCall
}

type pruneCall struct {
	olderThan time.Time
	keep      int
}

var _ delegation.Store = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{Store: memstore.New()} }

var errStoreDown = errors.New("test store: disk on fire")

// failPuts makes PutDelegations fail with err (nil: succeed again).
func (s *memStore) failPuts(err error) {
	if err == nil {
		s.putErr.Store(nil)
		return
	}
	s.putErr.Store(&err)
}

func (s *memStore) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	if p := s.putErr.Load(); p != nil {
		return *p
	}
	if s.putDelay > 0 {
		time.Sleep(s.putDelay)
	}
	if err := s.Store.PutDelegations(ctx, recs); err != nil {
		return err
	}
	s.puts.Add(1)
	if s.onPut != nil {
		s.onPut(recs)
	}
	return nil
}

func (s *memStore) PruneDelegations(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	s.mu.Lock()
	s.pruneCalls = append(s.pruneCalls, pruneCall{olderThan, keep})
	s.mu.Unlock()
	return s.Store.PruneDelegations(ctx, olderThan, keep)
}

// get returns the stored record with that id, if any.
func (s *memStore) get(id string) (delegation.Record, bool) {
	r, err := s.GetDelegation(context.Background(), id)
	return r, err == nil
}

// len returns the number of stored records.
func (s *memStore) len() int {
	recs, err := s.ListDelegations(context.Background(), delegation.ListFilter{Limit: delegation.MaxListLimit})
	if err != nil {
		panic(err)
	}
	return len(recs)
}
