package delegation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Waits between failed attempts to hold an owner id or to watch the
// owners.
const (
	ownerRetryMin = 100 * time.Millisecond
	ownerRetryMax = 5 * time.Second
)

// owners is a client's part in an [OwnerStore]: the owner id it holds
// (taking a new one when the store says the last one died) and the watch
// that interrupts the running records of dead owners. Each runs on a
// goroutine of its own.
type owners struct {
	c     *Client
	store OwnerStore

	mu sync.RWMutex
	id string // the owner id stamped on new records

	stopHold  context.CancelFunc
	holdDone  chan struct{}
	stopWatch context.CancelFunc // nil until watch starts
	watchDone chan struct{}
}

// holdOwner starts holding an owner id in store and returns once the first
// one is held (or ctx is done, or the store refused it).
func holdOwner(ctx context.Context, c *Client, store OwnerStore) (*owners, error) {
	o := &owners{c: c, store: store, holdDone: make(chan struct{})}
	hctx, cancel := context.WithCancel(context.Background())
	o.stopHold = cancel
	first := make(chan error, 1)
	go o.hold(hctx, first)
	select {
	case err := <-first:
		if err == nil {
			return o, nil
		}
		cancel()
		<-o.holdDone
		return nil, err
	case <-ctx.Done():
		cancel()
		<-o.holdDone
		return nil, fmt.Errorf("delegation: hold an owner id: %w", ctx.Err())
	}
}

// current returns the owner id to stamp on a new record. After the store
// ended an owner's life, it stays the dead one's until a new one is held:
// records created meanwhile are interrupted like the dead owner's others.
func (o *owners) current() string {
	if o == nil {
		return ""
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.id
}

// hold is the goroutine that holds an owner id: a new one each time the
// store ends the last one's life, until ctx is done. It reports the first
// attempt's outcome on first.
func (o *owners) hold(ctx context.Context, first chan<- error) {
	defer close(o.holdDone)
	wait := ownerRetryMin
	for {
		id := uuid.NewString()
		err := o.store.HoldOwner(ctx, id, func() {
			o.mu.Lock()
			o.id = id
			o.mu.Unlock()
			o.c.log.Info("delegation owner held", "owner", id)
			wait = ownerRetryMin
			if first != nil {
				first <- nil
				first = nil
			}
		})
		if ctx.Err() != nil {
			return
		}
		if first != nil {
			first <- fmt.Errorf("delegation: hold an owner id: %w", err)
			return
		}
		o.c.log.Warn("delegation owner lost: its running delegations are interrupted; holding a new one",
			"owner", id, "err", err, "retry_in", wait.String())
		if sleepCtx(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, ownerRetryMax)
	}
}

// watch starts the goroutine that interrupts the running records of dead
// owners.
func (o *owners) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	o.stopWatch, o.watchDone = cancel, make(chan struct{})
	go func() {
		defer close(o.watchDone)
		wait := ownerRetryMin
		for {
			err := o.store.WatchOrphans(ctx, func(owner string, ids []string) {
				o.c.interruptOrphans(ctx, owner, ids)
			})
			if ctx.Err() != nil {
				return
			}
			o.c.log.Warn("watch of delegation owners ended; starting again", "err", err, "retry_in", wait.String())
			if sleepCtx(ctx, wait) != nil {
				return
			}
			wait = min(2*wait, ownerRetryMax)
		}
	}()
}

// endWatch stops the watch and waits for it.
func (o *owners) endWatch() {
	if o == nil || o.stopWatch == nil {
		return
	}
	o.stopWatch()
	<-o.watchDone
}

// release ends the life of the owner held and waits for it. Call it once
// the watch has ended (endWatch) and the client's records are in the
// store: their owner is dead for the others from here on.
func (o *owners) release() {
	if o == nil {
		return
	}
	o.stopHold()
	<-o.holdDone
}

// interruptOrphans marks the running records ids of the dead owner failed
// with code interrupted, each in a compare-and-set of its own, so that of
// the clients racing to do it one does, once.
func (c *Client) interruptOrphans(ctx context.Context, owner string, ids []string) {
	n := 0
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		if c.interruptOrphan(ctx, owner, id) {
			n++
		}
	}
	if n > 0 {
		c.log.Info("interrupted the running delegations of a dead owner", "owner", owner, "records", n)
	}
}

// interruptOrphan interrupts one running record of the dead owner and
// reports whether this client did.
func (c *Client) interruptOrphan(ctx context.Context, owner, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	now := c.now()
	rec, changed, err := c.change(ctx, id, func(cur *Record) (*Record, error) {
		if cur.Status != StatusRunning || cur.Owner != owner {
			return nil, errKeep // finished, accepted, or reported twice
		}
		next := *cur
		finalize(&next, StatusFailed, CodeInterrupted, "the mesh replica running the delegation stopped", now)
		return &next, nil
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return false
	case err != nil:
		if ctx.Err() == nil {
			c.log.Warn("a delegation of a dead owner not interrupted; trying again at the next check",
				"delegation_id", id, "owner", owner, "err", err)
		}
		return false
	}
	// This client may still run the delegation: its owner id died while
	// it was cut off from the store. The record is final there; end the
	// delegation here too (failed, interrupted), so that its caller gets
	// what the store says. Its own end then reports the record.
	local := false
	if rec.Owner == owner && rec.Status.Final() {
		c.liveMu.Lock()
		if f := c.live[id]; f != nil && f.cancel != nil && !f.rec.Status.Final() {
			f.cancel(errShutdown)
			local = true
		}
		c.liveMu.Unlock()
	}
	if changed && !local {
		c.finished(rec)
	}
	return changed
}
