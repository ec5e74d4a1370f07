package delegation

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maintainer is the client's second goroutine: it moves accepted records
// whose deadline passed to timeout (one timer, on the earliest deadline),
// rescans the store for accepted records of other replicas, and prunes old
// records.
type maintainer struct {
	c *Client

	mu    sync.Mutex
	dl    deadlines
	known map[string]time.Time // id → deadline queued in dl

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func newMaintainer(c *Client, accepted []Record) *maintainer {
	m := &maintainer{
		c:     c,
		known: make(map[string]time.Time),
		kick:  make(chan struct{}, 1),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	for _, r := range accepted {
		m.addLocked(r.ID, r.Deadline)
	}
	go m.run()
	return m
}

// add schedules the timeout of an accepted record.
func (m *maintainer) add(id string, deadline time.Time) {
	m.mu.Lock()
	first := m.addLocked(id, &deadline)
	m.mu.Unlock()
	if first {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// addLocked queues id's deadline and reports whether it is now the
// earliest. A record without a deadline gets DefaultAsyncTimeout from now.
func (m *maintainer) addLocked(id string, deadline *time.Time) bool {
	d := time.Now().Add(DefaultAsyncTimeout)
	if deadline != nil {
		d = *deadline
	}
	if old, ok := m.known[id]; ok && old.Equal(d) {
		return false
	}
	m.known[id] = d
	heap.Push(&m.dl, entry{id: id, at: d})
	return m.dl[0].id == id
}

func (m *maintainer) stop() {
	m.once.Do(func() { close(m.quit) })
	<-m.done
}

func (m *maintainer) run() {
	defer close(m.done)
	c := m.c
	now := time.Now()
	nextPrune := now // prune once at start
	nextRescan := now.Add(c.rescanEvery)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now = time.Now()
		m.expireDue(now)
		if c.pruneEvery > 0 && !now.Before(nextPrune) {
			c.prune()
			nextPrune = time.Now().Add(c.pruneEvery)
		}
		if c.rescanEvery > 0 && !now.Before(nextRescan) {
			m.rescan()
			nextRescan = time.Now().Add(c.rescanEvery)
		}
		wait := time.Hour
		if c.pruneEvery > 0 {
			wait = min(wait, time.Until(nextPrune))
		}
		if c.rescanEvery > 0 {
			wait = min(wait, time.Until(nextRescan))
		}
		m.mu.Lock()
		if len(m.dl) > 0 {
			wait = min(wait, time.Until(m.dl[0].at))
		}
		m.mu.Unlock()
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-timer.C:
		case <-m.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-m.quit:
			return
		}
	}
}

// expireDue times out the accepted records whose deadline is past.
func (m *maintainer) expireDue(now time.Time) {
	var due []entry
	m.mu.Lock()
	for len(m.dl) > 0 && !m.dl[0].at.After(now) {
		e := heap.Pop(&m.dl).(entry)
		if d, ok := m.known[e.id]; ok && d.Equal(e.at) {
			delete(m.known, e.id)
			due = append(due, e)
		}
	}
	m.mu.Unlock()
	for _, e := range due {
		select {
		case <-m.quit:
			return
		default:
		}
		if retry := m.c.expire(e.id); retry {
			m.add(e.id, time.Now().Add(5*time.Second))
		}
	}
}

// rescan queues the deadlines of every accepted record in the store.
func (m *maintainer) rescan() {
	recs, err := m.c.listAll(StatusAccepted)
	if err != nil {
		m.c.log.Warn("rescan of accepted delegations failed", "err", err)
	}
	m.mu.Lock()
	for _, r := range recs {
		m.addLocked(r.ID, r.Deadline)
	}
	m.mu.Unlock()
}

// expire moves an accepted record whose deadline passed to timeout. It
// reports whether to try again later (the store failed).
func (c *Client) expire(id string) (retry bool) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	now := c.now()
	var later *time.Time
	rec, changed, err := c.change(ctx, id, func(cur *Record) (*Record, error) {
		later = nil
		if cur.Status != StatusAccepted {
			return nil, errKeep
		}
		if cur.Deadline != nil && now.Before(*cur.Deadline) {
			later = cur.Deadline
			return nil, errKeep
		}
		next := *cur
		finalize(&next, StatusTimeout, CodeTimeout, "no callback before the deadline", now)
		return &next, nil
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return false
	case err != nil:
		c.log.Warn("delegation timeout not recorded; retrying", "delegation_id", id, "err", err)
		return true
	case later != nil:
		c.maint.add(id, *later)
		return false
	case !changed:
		return false // finished otherwise meanwhile
	}
	c.liveMu.Lock()
	if f := c.bg[id]; f != nil && f.cancel != nil {
		f.cancel(errDeadline)
	}
	c.liveMu.Unlock()
	c.finished(rec)
	return false
}

// prune deletes records beyond the retention age and count.
func (c *Client) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	n, err := c.store.PruneDelegations(ctx, c.now().Add(-c.retention), c.maxRecords)
	switch {
	case err != nil:
		c.log.Warn("pruning delegation records failed", "err", err)
	case n > 0:
		// Debug: at the bound a prune runs every PruneInterval (5 s).
		c.log.Debug("pruned delegation records", "records", n)
	}
}

// listAll returns every record with status s, page by page.
func (c *Client) listAll(s Status) ([]Record, error) {
	var all []Record
	for offset := 0; ; offset += MaxListLimit {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		recs, err := c.store.ListDelegations(ctx, ListFilter{Status: s, Limit: MaxListLimit, Offset: offset})
		cancel()
		if err != nil {
			return all, err
		}
		all = append(all, recs...)
		if len(recs) < MaxListLimit {
			return all, nil
		}
	}
}

// recover runs at start: it marks the records left running by a previous
// process failed with code interrupted (when interrupt is set) and returns
// the accepted ones, whose deadlines the maintainer then enforces.
func (c *Client) recover(ctx context.Context, interrupt bool) ([]Record, error) {
	if interrupt {
		now := c.now()
		for {
			recs, err := c.store.ListDelegations(ctx, ListFilter{Status: StatusRunning, Limit: MaxListLimit})
			if err != nil {
				return nil, fmt.Errorf("delegation: recover running records: %w", err)
			}
			moved := 0
			for _, r := range recs {
				_, err := c.update(ctx, r.ID, func(cur *Record) (*Record, error) {
					if cur.Status != StatusRunning {
						return nil, errKeep
					}
					next := *cur
					finalize(&next, StatusFailed, CodeInterrupted, "the mesh stopped while the delegation was running", now)
					return &next, nil
				})
				switch {
				case err == nil:
					moved++
				case !errors.Is(err, ErrNotFound):
					return nil, fmt.Errorf("delegation: recover record %s: %w", r.ID, err)
				}
			}
			if len(recs) < MaxListLimit || moved == 0 {
				break
			}
		}
	}
	var accepted []Record
	for offset := 0; ; offset += MaxListLimit {
		recs, err := c.store.ListDelegations(ctx, ListFilter{Status: StatusAccepted, Limit: MaxListLimit, Offset: offset})
		if err != nil {
			return nil, fmt.Errorf("delegation: load accepted records: %w", err)
		}
		accepted = append(accepted, recs...)
		if len(recs) < MaxListLimit {
			return accepted, nil
		}
	}
}

// entry is a deadline in the maintainer's heap.
type entry struct {
	id string
	at time.Time
}

// deadlines is a min-heap of entries by time.
type deadlines []entry

func (h deadlines) Len() int           { return len(h) }
func (h deadlines) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlines) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlines) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *deadlines) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
