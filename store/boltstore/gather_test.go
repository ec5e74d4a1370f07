package boltstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// gatherStore is a Store with a queue and no committer, for gather alone.
func gatherStore() *Store {
	return &Store{wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

// queueForTest adds a request to s's queue and wakes gather, as enqueue does.
func (s *Store) queueForTest() {
	s.mu.Lock()
	s.pending = append(s.pending, &request{op: "test"})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// TestGatherWaitsForTheWriters: after a commit of n writes, the committer
// starts the next one as soon as n are queued, without waiting out its
// bound; with fewer, it starts when the bound has passed; Close ends the
// wait.
func TestGatherWaitsForTheWriters(t *testing.T) {
	t.Run("all back", func(t *testing.T) {
		s := gatherStore()
		done := make(chan bool)
		start := time.Now()
		go func() { done <- s.gather(3, time.Minute) }()
		for range 3 {
			time.Sleep(5 * time.Millisecond)
			s.queueForTest()
		}
		select {
		case ok := <-done:
			assert.True(t, ok)
			assert.Less(t, time.Since(start), 30*time.Second, "gather returns once 3 are queued")
		case <-time.After(30 * time.Second):
			t.Fatal("gather did not return with 3 writes queued")
		}
	})
	t.Run("some back", func(t *testing.T) {
		s := gatherStore()
		s.queueForTest()
		start := time.Now()
		assert.True(t, s.gather(3, 50*time.Millisecond))
		assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "with 1 of 3 queued, gather waits out its bound")
	})
	t.Run("already queued", func(t *testing.T) {
		s := gatherStore()
		for range 4 {
			s.queueForTest()
		}
		start := time.Now()
		assert.True(t, s.gather(3, time.Minute))
		assert.Less(t, time.Since(start), 30*time.Second)
	})
	t.Run("close", func(t *testing.T) {
		s := gatherStore()
		done := make(chan bool)
		go func() { done <- s.gather(3, time.Minute) }()
		close(s.quit)
		select {
		case ok := <-done:
			assert.False(t, ok, "gather reports Close")
		case <-time.After(30 * time.Second):
			t.Fatal("gather did not return at Close")
		}
	})
}

func TestGatherWait(t *testing.T) {
	for took, want := range map[time.Duration]time.Duration{
		0:                    0,
		time.Millisecond:     500 * time.Microsecond,
		6 * time.Millisecond: 3 * time.Millisecond,
		time.Second:          maxGather,
	} {
		assert.Equal(t, want, gatherWait(took), "after a commit of %v", took)
	}
}
