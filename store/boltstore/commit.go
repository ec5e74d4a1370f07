package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/registry"
)

// States of a request. The committer takes a queued request by moving it
// to stateTaken; a waiter whose context is done withdraws it by moving it
// to stateCancelled. Whoever moves it first decides its fate.
const (
	stateQueued int32 = iota
	stateTaken
	stateCancelled
)

// request is one write waiting for the committer: an UpdateAgent,
// PutDelegations, UpdateDelegation, SaveBreaker or DeleteBreaker call.
type request struct {
	// op names the call in errors: `update agent "finance"`.
	op string
	// apply makes the write in tx. It must leave tx unchanged when it
	// returns an error, unless the error is an *abortError, which rolls
	// back the whole transaction.
	apply func(tx *bbolt.Tx) error
	state atomic.Int32

	// Set by the committer before it closes done.
	err  error
	done chan struct{}
}

// abortError is returned by a request's apply when a write failed after
// other writes of the same request were made: the transaction can no
// longer be committed without a partial request in it, so the committer
// rolls it back and fails every request of the batch with err. Validation
// before the first write makes this unreachable short of a damaged file.
type abortError struct{ err error }

func (e *abortError) Error() string { return e.err.Error() }
func (e *abortError) Unwrap() error { return e.err }

// submit queues r for the committer and waits for its outcome. If ctx is
// done before the committer takes r, submit withdraws it and returns ctx's
// error (nothing is written); once taken, it waits for the commit and
// reports what happened.
func (s *Store) submit(ctx context.Context, r *request) error {
	r.done = make(chan struct{})
	if !s.enqueue(r) {
		return fmt.Errorf("boltstore: %s: %w", r.op, ErrClosed)
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(stateQueued, stateCancelled) {
			return ctx.Err()
		}
		<-r.done // the committer has it: report what happened
		return r.err
	}
}

// enqueue queues r for the committer and wakes it. It reports false when
// the store is closed (or is the zero Store).
func (s *Store) enqueue(r *request) bool {
	if s.db == nil {
		return false
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return false
	}
	s.pending = append(s.pending, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // already awake, or about to take pending
	}
	return true
}

// run is the committer goroutine. Each round it takes every queued
// request, applies them in one write transaction and commits it with one
// fsync. Requests that arrive meanwhile queue up for the next round, so
// the batch size adapts to the load: one writer commits alone with no
// added delay, N writers share a commit.
//
// After a commit of n > 1 requests it gathers before the next one: the n
// writers just acknowledged are likely to write again (a client's next
// registration), but over a network each comes back after a round trip,
// and a commit started before they are back would carry only those
// already there, leaving the others a whole commit to wait (measured over
// HTTP at c=8: 3.8 writes a commit). So the next round waits until
// n requests are queued, or for a bounded time (see gatherWait),
// whichever comes first. A lone writer (n = 1) is never delayed.
func (s *Store) run() {
	defer close(s.done)
	// The file is memory-mapped: a fault reading it (a damaged or truncated
	// file) becomes a recoverable panic instead of killing the process.
	debug.SetPanicOnFault(true)
	var (
		batch []*request
		last  int           // requests in the last commit
		took  time.Duration // how long it took
	)
	for {
		// Close wins over queued work: once quit is closed, what is still
		// queued fails with ErrClosed rather than racing Close.
		select {
		case <-s.quit:
			s.failPending()
			return
		default:
		}
		select {
		case <-s.quit:
			s.failPending()
			return
		case <-s.wake:
		}
		if last > 1 && !s.gather(last, gatherWait(took)) {
			s.failPending()
			return
		}
		s.mu.Lock()
		batch, s.pending = s.pending, batch[:0]
		s.mu.Unlock()
		if len(batch) > 0 {
			start := time.Now()
			last = s.commit(batch)
			took = time.Since(start)
			clear(batch) // drop the references before the slice is reused
			// Let the writers just acknowledged queue their next write
			// before the next batch is taken. Without this the writers
			// split into two groups that alternate between committing and
			// waiting, and batches hold half of them (measured: 4.0 vs 7.5
			// writes/commit with 8 writers, 1.0 vs 2.0 with 2). It is a
			// yield, not a timed wait: a lone writer is not delayed.
			runtime.Gosched()
		}
	}
}

// maxGather bounds the wait of gather.
const maxGather = 10 * time.Millisecond

// gatherWait is how long the committer waits for the writers of the last
// commit, which took took: half a commit, at most maxGather. A writer
// that misses a commit waits for the whole next one, so waiting up to
// half of one for it costs the others less than leaving it behind costs
// it, and at most a third more per commit.
func gatherWait(took time.Duration) time.Duration {
	return min(took/2, maxGather)
}

// gather waits until n requests are queued or wait has passed. It reports
// false when Close is called meanwhile.
func (s *Store) gather(n int, wait time.Duration) bool {
	var timer *time.Timer
	for {
		s.mu.Lock()
		queued := len(s.pending)
		s.mu.Unlock()
		if queued >= n {
			break
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-s.quit:
			return false
		case <-timer.C:
			return true
		case <-s.wake:
		}
	}
	return true
}

// commit applies batch in one write transaction. Each request runs
// against the transaction in queue order; one whose apply fails writes
// nothing and keeps its own error, the others commit together. If the
// commit itself fails, or a request aborts the transaction (an
// *abortError), every request that had not already failed gets that error.
// It returns the number of requests it committed or failed (those not
// withdrawn by their callers).
func (s *Store) commit(batch []*request) int {
	taken := batch[:0] // filtered in place
	for _, r := range batch {
		if r.state.CompareAndSwap(stateQueued, stateTaken) {
			taken = append(taken, r)
		}
	}
	if len(taken) == 0 {
		return 0
	}
	err := s.update(func(tx *bbolt.Tx) error {
		for _, r := range taken {
			r.err = r.apply(tx)
			var abort *abortError
			if errors.As(r.err, &abort) {
				r.err = nil // reported below, like every other request's
				return abort.err
			}
		}
		return nil
	})
	s.commits.Add(1)
	s.writes.Add(uint64(len(taken)))
	for _, r := range taken {
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("boltstore: %s: %w", r.op, err)
		}
		close(r.done)
	}
	return len(taken)
}

// applyAgent is the apply of an UpdateAgent call: it runs fn against the
// agents bucket of tx. It returns fn's error unchanged, or an error of its
// own; on error nothing is written.
func applyAgent(tx *bbolt.Tx, name string, fn func(cur *registry.Agent) (*registry.Agent, error)) error {
	b := tx.Bucket(bucketAgents)
	key := []byte(name)
	var cur *registry.Agent
	if v := b.Get(key); v != nil {
		var a registry.Agent
		if err := decodeAgent(name, v, &a); err != nil {
			return fmt.Errorf("boltstore: update agent %q: %w", name, err)
		}
		cur = &a
	}
	next, err := callFn(fn, cur, "update agent", name)
	if err != nil {
		return err // fn's error unchanged
	}
	if next == nil {
		if cur == nil {
			return nil
		}
		return wrapWrite(name, b.Delete(key))
	}
	v, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("boltstore: update agent %q: encode: %w", name, err)
	}
	return wrapWrite(name, b.Put(key, v))
}

// callFn calls the update function fn of an UpdateAgent or
// UpdateDelegation call, turning a panic into an error. op and key name
// the call in that error.
func callFn[T any](fn func(cur *T) (*T, error), cur *T, op, key string) (next *T, err error) {
	defer func() {
		if p := recover(); p != nil {
			next, err = nil, fmt.Errorf("boltstore: %s %q: update function panicked: %v", op, key, p)
		}
	}()
	return fn(cur)
}

func wrapWrite(name string, err error) error {
	if err != nil {
		return fmt.Errorf("boltstore: update agent %q: %w", name, err)
	}
	return nil
}

// update runs fn in a write transaction and commits it. A panic inside
// bbolt (a damaged file) rolls the transaction back and becomes an error
// wrapping ErrCorrupt.
func (s *Store) update(fn func(tx *bbolt.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: write failed: %v", ErrCorrupt, p)
		}
	}()
	return s.db.Update(fn)
}

// failPending fails every request still queued with ErrClosed. It runs
// after Close has set closed, so no request can join the queue later.
func (s *Store) failPending() {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, r := range batch {
		if r.state.CompareAndSwap(stateQueued, stateTaken) {
			r.err = fmt.Errorf("boltstore: %s: %w", r.op, ErrClosed)
			close(r.done)
		}
	}
}
