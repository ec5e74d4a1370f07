package registry

import (
	"context"
	"reflect"
	"time"
)

// This file is how a Registry follows a WatchableStore: the changes other
// replicas commit, and the records the store expires by itself, reach the
// view and the subscribers through the store's watch.
//
// Every change carries the store revision that made it, and the registry
// knows the revision of every record in its view (revs) and of every
// deletion the watch may still report an older version of (tombs). A
// watched change is applied only if it is newer than what the view holds
// for that name, so:
//
//   - the echo of the registry's own write (applied to the view at once,
//     with the revision UpdateAgentRevision returned) is dropped;
//   - a change committed before the registry's own write, but watched
//     after it, does not overwrite it;
//   - a snapshot (after a reconnect or compaction) deletes only the agents
//     the registry knew at or before the snapshot's revision.
//
// Watched changes are applied under the agent's name lock, like the
// registry's own writes, so the two are serialised per agent and events
// are queued in revision order.

// Waits between attempts to follow the store, when WatchAgents fails.
const (
	watchRetryMin = time.Second
	watchRetryMax = 30 * time.Second
)

// follow starts the goroutine that follows ws. New calls it before the
// registry is shared.
func (r *Registry) follow(ws WatchableStore) {
	ctx, cancel := context.WithCancel(context.Background())
	r.watched, r.stopWatch, r.watchDone = ws, cancel, make(chan struct{})
	r.revs, r.tombs = make(map[string]int64, len(r.agents)), make(map[string]int64)
	go r.watchLoop(ctx)
}

// watchLoop runs the store's watch until Close, restarting it when it
// fails.
func (r *Registry) watchLoop(ctx context.Context) {
	defer close(r.watchDone)
	wait := watchRetryMin
	for {
		err := r.watched.WatchAgents(ctx, r.applyChanges)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("registry: following the store stopped; retrying", "err", err, "retry_in", wait.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, watchRetryMax)
	}
}

// updateWatched is update's store write over a WatchableStore: it records
// the revision of the write, under the agent's name lock that the caller
// holds, before the caller commits it to the view.
func (r *Registry) updateWatched(ctx context.Context, name string, fn func(cur *Agent) (*Agent, error)) error {
	deleted := false
	rev, err := r.watched.UpdateAgentRevision(ctx, name, func(cur *Agent) (*Agent, error) {
		next, err := fn(cur)
		deleted = next == nil
		return next, err
	})
	if err != nil || rev <= 0 {
		return err
	}
	r.mu.Lock()
	if deleted {
		delete(r.revs, name)
		r.tombs[name] = max(rev, r.tombs[name])
	} else {
		r.revs[name] = max(rev, r.revs[name])
		delete(r.tombs, name)
	}
	r.mu.Unlock()
	return nil
}

// applyChanges applies one report of the store's watch and delivers the
// events it queued.
func (r *Registry) applyChanges(b AgentChanges) {
	defer r.deliver()
	var present map[string]bool
	if b.Reset {
		present = make(map[string]bool, len(b.Changes))
	}
	for _, c := range b.Changes {
		if present != nil && c.Agent != nil {
			present[c.Name] = true
		}
		r.applyChange(c)
	}
	if b.Reset {
		r.mu.RLock()
		var gone []string
		for name := range r.agents {
			if !present[name] {
				gone = append(gone, name)
			}
		}
		r.mu.RUnlock()
		for _, name := range gone {
			r.applyChange(AgentChange{Name: name, Revision: b.Revision})
		}
	}
	r.mu.Lock()
	for name, rev := range r.tombs {
		if rev <= b.Revision { // the watch is past it: nothing older can come
			delete(r.tombs, name)
		}
	}
	r.mu.Unlock()
}

// applyChange applies c to the view, if it is newer than what the view
// holds for its name, and queues its event.
func (r *Registry) applyChange(c AgentChange) {
	var lapsed *Agent // removed by the store after its TTL: reported once the locks are released
	defer func() {
		if lapsed != nil {
			r.wrote(context.Background(), Write{Op: OpExpire, Agent: *lapsed})
		}
	}()
	unlock := r.lockName(c.Name)
	defer unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || c.Revision <= max(r.revs[c.Name], r.tombs[c.Name]) {
		return
	}
	old, existed := r.agents[c.Name]
	if c.Agent == nil {
		delete(r.revs, c.Name)
		r.tombs[c.Name] = c.Revision
		if existed {
			removed := old.Clone()
			expired := removed.StaleAt(r.now())
			if expired {
				r.log.Info("agent removed by the store after its TTL",
					"agent", c.Name, "ttl_seconds", removed.TTLSeconds, "last_seen", removed.LastSeen)
			}
			r.commitLocked(Event{Type: EventDelete, Agent: removed, Expired: expired})
			if expired {
				lapsed = &removed
			}
		}
		return
	}
	r.revs[c.Name] = c.Revision
	delete(r.tombs, c.Name)
	a := c.Agent.Clone()
	a.Stale = false
	switch {
	case !existed:
		r.commitLocked(Event{Type: EventPut, Agent: a, Created: true})
	case sameStored(old, &a, false):
		// What the view holds already (the first snapshot after New).
	case sameStored(old, &a, true):
		r.commitLocked(Event{Type: EventHeartbeat, Agent: a})
	default:
		r.commitLocked(Event{Type: EventPut, Agent: a})
	}
}

// sameStored reports whether a and b are the same record — ignoring
// LastSeen when ignoreSeen — comparing times as instants and empty slices
// and maps as nil: a record decoded from a store differs from the one
// written in those only.
func sameStored(a, b *Agent, ignoreSeen bool) bool {
	x, y := canonical(a), canonical(b)
	if ignoreSeen {
		x.LastSeen, y.LastSeen = zeroTime, zeroTime
	}
	return reflect.DeepEqual(x, y)
}

// canonical returns the form of a that sameStored compares.
func canonical(a *Agent) Agent {
	c := a.Clone()
	c.Stale = false
	for _, t := range []*time.Time{&c.RegisteredAt, &c.UpdatedAt, &c.LastSeen} {
		*t = t.Round(0).UTC()
	}
	if len(c.Capabilities) == 0 {
		c.Capabilities = nil
	}
	if len(c.Examples) == 0 {
		c.Examples = nil
	}
	if len(c.Resources) == 0 {
		c.Resources = nil
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c
}
