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
// record is written at once, and records that arrive during a commit share
// the next one. Only the latest version of a record is queued.
type committer struct {
	store   Store
	log     *slog.Logger
	durable func([]Record) // called after each successful write

	mu       sync.Mutex
	queue    []Record
	index    map[string]int // id → position in queue
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
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go w.run()
	return w
}

// put queues rec, replacing a queued older version of it.
func (w *committer) put(rec Record) {
	w.mu.Lock()
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
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-w.quit:
				t.Stop()
			}
		} else {
			select {
			case <-w.wake:
			case <-w.quit:
			}
		}
		select {
		case <-w.quit:
			w.drain()
			return
		default:
		}
		if w.round() {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
		}
	}
}

// round writes everything queued. It reports false if a write failed (the
// records not written are queued again, unless a newer version was queued
// meanwhile).
func (w *committer) round() bool {
	w.mu.Lock()
	batch, flushers := w.queue, w.flushers
	w.queue, w.flushers = nil, nil
	clear(w.index)
	w.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), maxBatch)
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := w.store.PutDelegations(ctx, batch[:n])
		cancel()
		if err != nil {
			w.log.Warn("delegation records not written; retrying", "records", len(batch), "err", err)
			w.requeue(batch, flushers)
			return false
		}
		w.durable(batch[:n])
		batch = batch[n:]
	}
	for _, ch := range flushers {
		close(ch)
	}
	return true
}

// requeue puts back the records of a failed write, except those a newer
// version of which was queued since, and the flushers waiting for them.
func (w *committer) requeue(batch []Record, flushers []chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
		if w.round() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.mu.Lock()
	lost := len(w.queue)
	w.mu.Unlock()
	w.log.Error("delegation records lost at shutdown: the store refused them", "records", lost)
}
