package registry

import "sync"

// Subscriber is a source of agents and their changes: *Registry is one.
// Subscribe must return the current agents and register fn atomically,
// call fn for every later change in commit order and never concurrently,
// and stop calling it once cancel returns.
type Subscriber interface {
	Subscribe(fn func(Event)) (snapshot []Agent, cancel func())
}

// Follow keeps a follower — a search index, a classifier — current with
// src: load receives src's current agents, then apply receives every later
// change, in commit order and never concurrently. Changes that arrive while
// load runs are queued and applied after it, so none is lost or applied
// out of order, however long load takes.
//
// If load fails, Follow cancels the subscription and returns load's error.
// Otherwise stop cancels it: stop is idempotent and safe for concurrent
// use, and once it returns apply is not called again.
func Follow(src Subscriber, load func(snapshot []Agent) error, apply func(Event)) (stop func(), err error) {
	f := &follower{apply: apply}
	snapshot, cancel := src.Subscribe(f.event)
	if err := load(snapshot); err != nil {
		cancel()
		return func() {}, err
	}
	f.mu.Lock()
	for _, ev := range f.pending {
		apply(ev)
	}
	f.pending, f.loaded = nil, true
	f.mu.Unlock()

	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			f.mu.Lock()
			f.stopped = true
			f.mu.Unlock()
		})
	}, nil
}

// follower queues the changes that arrive before Follow has loaded the
// snapshot.
type follower struct {
	apply   func(Event)
	mu      sync.Mutex
	loaded  bool
	stopped bool
	pending []Event
}

func (f *follower) event(ev Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.stopped:
	case !f.loaded:
		f.pending = append(f.pending, ev)
	default:
		f.apply(ev)
	}
}
