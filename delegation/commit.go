package delegation

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxBatch caps the records of one PutDelegations call.
const maxBatch = 1000

// committer writes the records of synchronous delegations to the store in the
// background, off the delegations' critical path (a sync delegation's record
// is durable within 10 ms of the reply, docs/API.md#delegations). One
// goroutine takes everything queued, writes it with one PutDelegations call
// (one commit) and starts over, so the batch size follows the load: a lone
// record is written commitLinger after it was queued, and records that
// arrive meanwhile or during a commit share the next one. Only the latest
// version of a record is queued.
//
// A running record is held for runningHold before it is written: most
// synchronous delegations finish within it, and then only their final
// record is written, one write instead of two (docs/DESIGN.md#delegation-records).
// A flush writes held records at once.
//
// A write waits commitLinger after the first record queued for it, so
// that at a steady trickle of delegations records share commits (one
// commit, two fdatasyncs on bbolt, per few milliseconds rather than per
// delegation); a flush does not wait.
type committer struct {
	store   Store
	log     *slog.Logger
	durable func([]Record) // called after each successful write

	mu       sync.Mutex
	queue    []Record
	index    map[string]int       // id → position in queue
	held     map[string]time.Time // id → when its queued running version is due
	hold     time.Duration        // runningHold; tests change it
	linger   time.Duration        // commitLinger; tests change it
	since    time.Time            // when the oldest record not held was queued; zero: none
	flushers []chan struct{}

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func newCommitter(store Store, log *slog.Logger, durable func([]Record)) *committer {
	w := &committer{
		store:   store,
		log:     log,
		durable: durable,
		index:   make(map[string]int),
		held:    make(map[string]time.Time),
		hold:    runningHold,
		linger:  commitLinger,
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go w.run()
	return w
}

// runningHold is how long a running record waits in the queue for its
// final version before it is written: a crash within it loses the record
// of a delegation whose caller never got an answer (docs/DESIGN.md#delegation-records).
const runningHold = 10 * time.Millisecond

// commitLinger is how long a write waits for more records after the first
// one queued for it: records stay durable within 10 ms of the reply
// (docs/API.md#delegations) when a commit takes less than the rest.
const commitLinger = 3 * time.Millisecond

// put queues rec, replacing a queued older version of it.
func (w *committer) put(rec Record) {
	w.mu.Lock()
	if rec.Status == StatusRunning {
		if _, ok := w.held[rec.ID]; !ok {
			w.held[rec.ID] = time.Now().Add(w.hold)
		}
	} else {
		delete(w.held, rec.ID)
		if w.since.IsZero() {
			w.since = time.Now()
		}
	}
	if i, ok := w.index[rec.ID]; ok {
		w.queue[i] = rec
	} else {
		w.index[rec.ID] = len(w.queue)
		w.queue = append(w.queue, rec)
	}
	w.mu.Unlock()
	w.kick()
}

func (w *committer) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// flush returns once every record queued before the call is durable.
func (w *committer) flush(ctx context.Context) error {
	ch := make(chan struct{})
	w.mu.Lock()
	w.flushers = append(w.flushers, ch)
	w.mu.Unlock()
	w.kick()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		return ErrClosed
	}
}

// stop writes what is queued and stops the goroutine. It is idempotent.
func (w *committer) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

func (w *committer) run() {
	defer close(w.done)
	backoff := time.Duration(0)
	next := time.Duration(0) // until the earliest held record is due; 0: none held
	for {
		var timer <-chan time.Time
		wake := w.wake
		switch {
		case backoff > 0:
			timer, wake = time.After(backoff), nil
		case next > 0:
			timer = time.After(next)
		}
		select {
		case <-timer:
		case <-wake:
		case <-w.quit:
		}
		select {
		case <-w.quit:
			w.drain()
			return
		default:
		}
		if !w.gather() {
			w.drain()
			return
		}
		var ok bool
		if ok, next = w.round(false); ok {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
		}
	}
}

// round writes what is queued: everything when all is set or a flush
// waits, else all but the running records still held. It reports false
// if a write failed (the records not written are queued again, unless a
// newer version was queued meanwhile), and how long until the earliest
// record it left held is due (0: none).
func (w *committer) round(all bool) (bool, time.Duration) {
	w.mu.Lock()
	batch, flushers := w.queue, w.flushers
	w.queue, w.flushers = nil, nil
	clear(w.index)
	next := w.keepHeld(&batch, all || len(flushers) > 0)
	w.since = time.Time{}
	w.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), maxBatch)
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := w.store.PutDelegations(ctx, batch[:n])
		cancel()
		if err != nil {
			w.log.Warn("delegation records not written; retrying", "records", len(batch), "err", err)
			w.requeue(batch, flushers)
			return false, next
		}
		w.durable(batch[:n])
		batch = batch[n:]
	}
	for _, ch := range flushers {
		close(ch)
	}
	return true, next
}

// gather waits until the oldest record not held has been queued for
// w.linger, or a flush waits; it returns at once when no such record is
// queued. It reports false when the committer is stopped meanwhile.
func (w *committer) gather() bool {
	for {
		w.mu.Lock()
		since, flushing := w.since, len(w.flushers) > 0
		w.mu.Unlock()
		if since.IsZero() || flushing {
			return true
		}
		wait := time.Until(since.Add(w.linger))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			return true
		case <-w.wake: // a record or a flush: look again
			t.Stop()
		case <-w.quit:
			t.Stop()
			return false
		}
	}
}

// keepHeld moves the running records of *batch that are held and not yet
// due back to the (emptied) queue, unless all, and returns how long until
// the earliest of them is due (0: none). The records left in *batch are
// no longer held. w.mu is held.
func (w *committer) keepHeld(batch *[]Record, all bool) time.Duration {
	if len(w.held) == 0 {
		return 0
	}
	now := time.Now()
	var next time.Duration
	take := (*batch)[:0] // filtered in place; w.queue is a new slice
	for _, rec := range *batch {
		due, held := w.held[rec.ID]
		if held && !all && now.Before(due) {
			w.index[rec.ID] = len(w.queue)
			w.queue = append(w.queue, rec)
			if wait := due.Sub(now); next == 0 || wait < next {
				next = wait
			}
			continue
		}
		delete(w.held, rec.ID)
		take = append(take, rec)
	}
	*batch = take
	return next
}

// requeue puts back the records of a failed write, except those a newer
// version of which was queued since, and the flushers waiting for them.
func (w *committer) requeue(batch []Record, flushers []chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() && len(batch) > 0 {
		w.since = time.Now()
	}
	for _, rec := range batch {
		if _, newer := w.index[rec.ID]; !newer {
			w.index[rec.ID] = len(w.queue)
			w.queue = append(w.queue, rec)
		}
	}
	w.flushers = append(flushers, w.flushers...)
}

// drain makes a few last attempts to write what is queued.
func (w *committer) drain() {
	for range 3 {
		if ok, _ := w.round(true); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.mu.Lock()
	lost := len(w.queue)
	w.mu.Unlock()
	w.log.Error("delegation records lost at shutdown: the store refused them", "records", lost)
}
