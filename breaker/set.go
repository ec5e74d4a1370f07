package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Store persists breaker state for a [Set]. Implementations live outside
// this package (store/memstore, store/boltstore, store/etcdstore) and must
// pass the conformance suite in internal/harness/storetest.
//
// Every method must be safe for concurrent use. A Set calls SaveBreaker
// only on state transitions, never on the call path of an ordinary success
// or failure, and calls for one name in transition order. A store shared
// by several replicas implements [WatchableStore] too, so that each
// replica's Set follows the others' transitions ([Set.Follow]).
type Store interface {
	// LoadBreakers returns every stored snapshot by breaker name (an empty
	// or nil map when there is none). The map is the caller's.
	LoadBreakers(ctx context.Context) (map[string]Snapshot, error)

	// SaveBreaker stores s under name, replacing what was there. When it
	// returns nil, a later LoadBreakers returns s (every field; times as the
	// same instant, not necessarily in the same location).
	SaveBreaker(ctx context.Context, name string, s Snapshot) error

	// DeleteBreaker removes the snapshot stored under name. Deleting a name
	// that is not stored is not an error.
	DeleteBreaker(ctx context.Context, name string) error
}

// Set is a set of breakers keyed by name (one per agent), created on
// demand and persisted through an optional [Store].
//
// Every breaker of a Set uses the Set's [Options]; OnStateChange receives
// the breaker's name. With a store, each transition is saved (by the
// goroutine that delivers it, after OnStateChange, outside every lock and
// with Options.StoreTimeout); a save that fails is logged at Warn and does
// not affect the breaker, which keeps working from memory.
//
// Over a [WatchableStore], [Set.Follow] makes the set apply the
// transitions other replicas save.
//
// A Set is safe for concurrent use by multiple goroutines and starts no
// goroutines, except the one [Set.Follow] starts, which its caller stops.
// The zero Set is ready to use: default Options, no store. A nil *Set is
// a pass-through: Get returns a nil *Breaker, which admits every call. A
// Set must not be copied after first use.
type Set struct {
	opts  Options
	store Store

	mu sync.RWMutex
	m  map[string]*entry
}

// entry is a breaker of a Set and what serialises its store writes with
// Remove and with the changes Follow applies.
type entry struct {
	b *Breaker

	mu      sync.Mutex // held around every store call for this breaker
	removed bool       // Remove was called: save nothing more
	rev     int64      // store revision of the latest write saved or applied (WatchableStore)
}

// NewSet returns an empty set whose breakers use opts (nil means the zero
// [Options]; opts is copied) and persist their transitions to store (nil
// means no persistence). Call [Set.Restore] to load the stored state.
func NewSet(store Store, opts *Options) *Set {
	s := &Set{store: store}
	if opts != nil {
		s.opts = *opts
	}
	return s
}

// Lookup returns the breaker called name, or nil if there is none yet (the
// agent was never called). Unlike [Set.Get] it creates nothing, so checks
// on many agents — discovery's availability filter — cost a map read each.
// A nil *Breaker reports the closed state.
func (s *Set) Lookup(name string) *Breaker {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.m[name]; e != nil {
		return e.b
	}
	return nil
}

// Get returns the breaker called name, creating a closed one if there is
// none.
func (s *Set) Get(name string) *Breaker {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	e := s.m[name]
	s.mu.RUnlock()
	if e != nil {
		return e.b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getLocked(name).b
}

// getLocked returns the entry for name, creating it if needed. s.mu is held
// for writing.
func (s *Set) getLocked(name string) *entry {
	if e := s.m[name]; e != nil {
		return e
	}
	e := &entry{b: New(name, &s.opts)}
	if s.store != nil {
		e.b.persist = func() { s.save(e) }
		_, e.b.quietHalfOpen = s.store.(WatchableStore)
	}
	if s.m == nil {
		s.m = make(map[string]*entry)
	}
	s.m[name] = e
	return e
}

// States returns a snapshot of every breaker in the set, by name, for
// health reports and metrics.
func (s *Set) States() map[string]Snapshot {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	bs := make([]*Breaker, 0, len(s.m))
	for _, e := range s.m {
		bs = append(bs, e.b)
	}
	s.mu.RUnlock()
	out := make(map[string]Snapshot, len(bs))
	for _, b := range bs {
		out[b.name] = b.Snapshot() // outside s.mu: it may deliver transitions
	}
	return out
}

// Remove forgets the breaker called name (its agent was unregistered) and
// deletes its stored state. A *Breaker obtained earlier keeps working but
// is no longer persisted; a later Get returns a new, closed breaker. The
// breaker is removed from memory even when the store fails; the error is
// the store's.
func (s *Set) Remove(ctx context.Context, name string) error {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	e := s.m[name]
	s.mu.RUnlock()
	var err error
	if e != nil {
		e.mu.Lock()
		e.removed = true
		err = s.delete(ctx, name)
		e.mu.Unlock()
		// Drop the entry only after the store delete, so that a new breaker
		// for name cannot save before the old state is deleted.
		s.mu.Lock()
		if s.m[name] == e {
			delete(s.m, name)
		}
		s.mu.Unlock()
	} else {
		err = s.delete(ctx, name)
	}
	return err
}

// Restore loads every stored snapshot and applies it to the breaker of that
// name, creating breakers as needed: an open breaker stays open until its
// stored OpenUntil (but no longer than one open period from now), a
// half-open one restarts its half-open window with no probes in flight, a
// closed one keeps its failure count. Restored states are reported to
// OnStateChange when they differ from the breaker's current one (so
// metrics follow) but are not saved again. Breakers with no stored
// snapshot are left alone.
//
// Call Restore once at start, before the set is used (and before
// [Set.Follow]). A snapshot that cannot be restored is skipped; the error
// joins one error per such name. With no store, Restore does nothing.
func (s *Set) Restore(ctx context.Context) error {
	if s == nil || s.store == nil {
		return nil
	}
	snaps, err := s.store.LoadBreakers(ctx)
	if err != nil {
		return fmt.Errorf("breaker: load states: %w", err)
	}
	var errs []error
	for name, snap := range snaps {
		if err := snap.validate(); err != nil {
			errs = append(errs, fmt.Errorf("breaker: restore %q: %w", name, err))
			continue
		}
		s.Get(name).restore(snap)
	}
	return errors.Join(errs...)
}

// save writes the state of e's breaker unless e was removed. It is the
// persist hook of e's breaker, called from its delivery loop outside its
// lock. The state is taken under e.mu, so that a change Follow applies is
// either older than this write (and ignored: see applyChange) or comes
// after it.
func (s *Set) save(e *entry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	snap, ok := e.b.takeDirty()
	if !ok || e.removed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.storeTimeout())
	defer cancel()
	var err error
	if ws, ok := s.store.(WatchableStore); ok {
		var rev int64
		if rev, err = ws.SaveBreakerRevision(ctx, e.b.name, snap); err == nil {
			e.rev = max(e.rev, rev)
		}
	} else {
		err = s.store.SaveBreaker(ctx, e.b.name, snap)
	}
	if err != nil && s.opts.Logger != nil {
		s.opts.Logger.Warn("breaker state not persisted",
			"breaker", e.b.name, "state", snap.State.String(), "err", err)
	}
}

// delete removes name's stored state, if there is a store.
func (s *Set) delete(ctx context.Context, name string) error {
	if s.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.storeTimeout())
	defer cancel()
	if err := s.store.DeleteBreaker(ctx, name); err != nil {
		return fmt.Errorf("breaker: delete %q: %w", name, err)
	}
	return nil
}

func (s *Set) storeTimeout() time.Duration {
	if d := s.opts.StoreTimeout; d > 0 {
		return d
	}
	return DefaultStoreTimeout
}
