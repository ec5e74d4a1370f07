package audit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [Options].
const (
	// DefaultQueueSize is how many entries may wait to be written when
	// Options.QueueSize is 0.
	DefaultQueueSize = 8192
	// DefaultMaxEntries is how many entries are kept when
	// Options.MaxEntries is 0.
	DefaultMaxEntries = 100_000
	// DefaultMaxAge is how long entries are kept when Options.MaxAge is 0.
	DefaultMaxAge = 30 * 24 * time.Hour
	// DefaultFlushDelay is Options.FlushDelay when it is 0.
	DefaultFlushDelay = 50 * time.Millisecond
	// DefaultPruneInterval is how often the retention bounds are applied
	// when Options.PruneInterval is 0.
	DefaultPruneInterval = 10 * time.Minute
)

// maxBatch is the most entries one AppendAudit call writes.
const maxBatch = 512

// pruneAfterMax is the most entries the writer appends between two
// prunes: the count bound is applied as the log grows, not only every
// PruneInterval, so the store holds at most MaxEntries plus this many
// (plus one batch). At the default MaxEntries it is 1 % of the bound, and
// each prune is one store transaction of about this many deletions.
const pruneAfterMax = 1000

// Options configures a [Recorder]. A nil *Options, like the zero value of
// every field, means the documented default. NewRecorder copies it.
type Options struct {
	// QueueSize is how many entries may wait for the writer. When the
	// queue is full, Record drops the entry and counts it in
	// [Recorder.Dropped]. ≤ 0 means DefaultQueueSize (8192).
	QueueSize int

	// MaxEntries is the retention bound by count: the oldest entries
	// beyond it are pruned. ≤ 0 means DefaultMaxEntries (100,000). It is
	// applied as entries are written (after every MaxEntries/100 of them,
	// at least 1 and at most 1000), so the store holds at most about 1 %
	// more than MaxEntries, however fast entries arrive.
	MaxEntries int

	// MaxAge is the retention bound by age: older entries are pruned.
	// ≤ 0 means DefaultMaxAge (30 days).
	MaxAge time.Duration

	// PruneInterval is how often the retention bounds are applied on a
	// timer (also once at start), for MaxAge above all: MaxEntries is also
	// applied as entries are written. 0 means DefaultPruneInterval (10
	// minutes); a negative value never prunes, by time or by count.
	PruneInterval time.Duration

	// WriteTimeout bounds each store call of the writer. ≤ 0 means 10 s.
	WriteTimeout time.Duration

	// FlushDelay is how long the writer gathers entries after the first
	// one before writing them in one store call, so a steady trickle of
	// entries costs one durable commit per FlushDelay rather than one per
	// entry (measured: auditing every registration otherwise cut HTTP
	// registrations on bbolt by a quarter at concurrency 1). Flush, List
	// and Close do not wait for it. 0 means DefaultFlushDelay (50 ms); a
	// negative value writes at once.
	FlushDelay time.Duration

	// Now is the clock that stamps entries recorded without a Time. Nil
	// means time.Now.
	Now func() time.Time

	// Logger receives failed writes and prunes (Warn). Nil means discard.
	Logger *slog.Logger
}

// Recorder records audit entries into a [Store] without ever blocking or
// failing its caller: [Recorder.Record] stamps the entry and puts it on a
// bounded queue; one writer goroutine appends queued entries to the store
// in batches and applies the retention bounds. When the queue is full the
// entry is dropped and counted ([Recorder.Dropped]); a batch the store
// refuses is logged and counted ([Recorder.Failed]).
//
// A Recorder is safe for concurrent use. [Recorder.Close] writes what is
// queued and stops the writer; it does not close the store. A nil
// *Recorder records nothing, so callers need not check for one.
type Recorder struct {
	store      Store
	queue      chan item
	maxEntries int
	maxAge     time.Duration
	pruneEvery time.Duration
	pruneAfter int // entries written between two prunes by count
	timeout    time.Duration
	delay      time.Duration
	now        func() time.Time
	log        *slog.Logger

	last    atomic.Int64 // UnixNano of the last stamped entry
	dropped atomic.Uint64
	failed  atomic.Uint64

	lifeMu sync.RWMutex // held for reading while sending on queue
	closed bool

	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// item is an entry to write, or a flush marker (flushed not nil) closed
// once every entry queued before it is written.
type item struct {
	e       Entry
	flushed chan struct{}
}

// NewRecorder returns a recorder writing to store (required), configured
// by opts, and starts its writer goroutine.
func NewRecorder(store Store, opts *Options) (*Recorder, error) {
	if store == nil {
		return nil, errors.New("audit: nil Store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	r := &Recorder{
		store:      store,
		queue:      make(chan item, positive(o.QueueSize, DefaultQueueSize)),
		maxEntries: positive(o.MaxEntries, DefaultMaxEntries),
		maxAge:     positive(o.MaxAge, DefaultMaxAge),
		pruneEvery: o.PruneInterval,
		timeout:    positive(o.WriteTimeout, 10*time.Second),
		delay:      o.FlushDelay,
		now:        o.Now,
		log:        o.Logger,
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if r.pruneEvery == 0 {
		r.pruneEvery = DefaultPruneInterval
	}
	r.pruneAfter = min(max(r.maxEntries/100, 1), pruneAfterMax)
	if r.delay == 0 {
		r.delay = DefaultFlushDelay
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	go r.run()
	return r, nil
}

func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Record queues e for writing and returns at once. An entry without a Time
// is stamped with the recorder's clock (strictly after the entry stamped
// before it, so entries of one recorder keep their order), one without an
// ID gets [NewID]. Record takes ownership of e.Details. When the queue is
// full, or after Close, the entry is dropped: counted in Dropped, not
// written.
func (r *Recorder) Record(e Entry) {
	if r == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = r.stamp()
	}
	if e.ID == "" {
		e.ID = NewID(e.Time)
	}
	r.lifeMu.RLock()
	defer r.lifeMu.RUnlock()
	if r.closed {
		r.dropped.Add(1)
		return
	}
	select {
	case r.queue <- item{e: e}:
	default:
		r.dropped.Add(1)
	}
}

// stamp returns the time of a new entry: now, or 1 ns after the previous
// stamp when the clock has not moved past it.
func (r *Recorder) stamp() time.Time {
	t := r.now()
	n := t.UnixNano()
	for {
		last := r.last.Load()
		if n <= last {
			n = last + 1
		}
		if r.last.CompareAndSwap(last, n) {
			break
		}
	}
	if n != t.UnixNano() {
		return time.Unix(0, n).UTC()
	}
	return t
}

// Dropped returns how many entries were dropped because the queue was full
// (or the recorder closed): the agentmesh_audit_dropped_total metric.
func (r *Recorder) Dropped() uint64 {
	if r == nil {
		return 0
	}
	return r.dropped.Load()
}

// Failed returns how many entries were lost because the store refused
// their batch.
func (r *Recorder) Failed() uint64 {
	if r == nil {
		return 0
	}
	return r.failed.Load()
}

// Flush waits until every entry recorded before the call is written (or
// failed), or ctx is done. After Close it returns nil at once.
func (r *Recorder) Flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	ch := make(chan struct{})
	r.lifeMu.RLock()
	if r.closed {
		r.lifeMu.RUnlock()
		return nil
	}
	select {
	case r.queue <- item{flushed: ch}:
		r.lifeMu.RUnlock()
	case <-ctx.Done():
		r.lifeMu.RUnlock()
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// List returns stored entries newest first, filtered and paged by q, after
// waiting for the entries already recorded (read-your-writes).
func (r *Recorder) List(ctx context.Context, q Query) ([]Entry, error) {
	if err := r.Flush(ctx); err != nil {
		return nil, err
	}
	q.Limit = q.PageLimit()
	return r.store.ListAudit(ctx, q)
}

// Close writes the queued entries, stops the writer and waits for it. It
// is idempotent, safe for concurrent use, and returns nil. Entries
// recorded after Close are dropped. It does not close the store.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.closeOnce.Do(func() {
		r.lifeMu.Lock()
		r.closed = true
		r.lifeMu.Unlock()
		close(r.quit)
		<-r.done
	})
	return nil
}

// run is the writer goroutine.
func (r *Recorder) run() {
	defer close(r.done)
	var tick <-chan time.Time
	if r.pruneEvery > 0 {
		r.prune()
		t := time.NewTicker(r.pruneEvery)
		defer t.Stop()
		tick = t.C
	}
	batch := make([]item, 0, maxBatch)
	written := 0 // entries appended since the last prune
	for {
		select {
		case it := <-r.queue:
			batch = r.gather(append(batch[:0], it))
			written += r.write(batch)
			if r.pruneEvery > 0 && written >= r.pruneAfter {
				r.prune()
				written = 0
			}
		case <-tick:
			r.prune()
			written = 0
		case <-r.quit:
			// Close holds no sender now: drain what is queued and stop.
			for {
				batch = r.fill(batch[:0])
				if len(batch) == 0 {
					return
				}
				r.write(batch)
			}
		}
	}
}

// gather appends to batch the items queued within r.delay of its first,
// up to maxBatch. A flush marker or Close ends the wait at once.
func (r *Recorder) gather(batch []item) []item {
	if r.delay <= 0 || batch[0].flushed != nil {
		return r.fill(batch)
	}
	timer := time.NewTimer(r.delay)
	defer timer.Stop()
	for len(batch) < maxBatch {
		select {
		case it := <-r.queue:
			batch = append(batch, it)
			if it.flushed != nil {
				return r.fill(batch)
			}
		case <-timer.C:
			return r.fill(batch)
		case <-r.quit:
			return batch // run drains the rest
		}
	}
	return batch
}

// fill appends queued items to batch without waiting, up to maxBatch.
func (r *Recorder) fill(batch []item) []item {
	for len(batch) < maxBatch {
		select {
		case it := <-r.queue:
			batch = append(batch, it)
		default:
			return batch
		}
	}
	return batch
}

// write appends the entries of batch to the store, then releases its
// flush markers. It returns how many entries it appended.
func (r *Recorder) write(batch []item) int {
	entries := make([]Entry, 0, len(batch))
	for _, it := range batch {
		if it.flushed == nil {
			entries = append(entries, it.e)
		}
	}
	if len(entries) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		err := r.store.AppendAudit(ctx, entries)
		cancel()
		if err != nil {
			r.failed.Add(uint64(len(entries)))
			r.log.Warn("audit: writing entries failed; they are lost", "entries", len(entries), "err", err)
			entries = entries[:0]
		}
	}
	for i := range batch {
		if batch[i].flushed != nil {
			close(batch[i].flushed)
		}
		batch[i] = item{}
	}
	return len(entries)
}

// prune applies the retention bounds.
func (r *Recorder) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*r.timeout)
	defer cancel()
	n, err := r.store.PruneAudit(ctx, r.now().Add(-r.maxAge), r.maxEntries)
	if err != nil {
		r.log.Warn("audit: pruning old entries failed", "pruned", n, "err", err)
		return
	}
	if n > 0 {
		r.log.Debug("audit: pruned old entries", "pruned", n)
	}
}
