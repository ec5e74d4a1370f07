package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// FileAgentsReport says what [Registry.ReplaceFileAgents] changed. Every
// list is in name order.
type FileAgentsReport struct {
	// Added are file agents whose name was not registered.
	Added []string `json:"added,omitempty"`
	// Replaced are file agents whose record changed, and file agents that
	// took over the name of an API-registered agent (also in Overridden).
	Replaced []string `json:"replaced,omitempty"`
	// Removed are file agents no longer in the set, now unregistered.
	Removed []string `json:"removed,omitempty"`
	// Unchanged are file agents whose record is the same as before.
	Unchanged []string `json:"unchanged,omitempty"`
	// Overridden are API-registered agents replaced by a file agent of the
	// same name: the file wins.
	Overridden []string `json:"overridden,omitempty"`
	// Demoted is the API-registered agent that was the default agent and
	// no longer is, because the set has its own default agent.
	Demoted string `json:"demoted,omitempty"`
}

// Changed reports whether the registry changed.
func (r FileAgentsReport) Changed() bool {
	return len(r.Added)+len(r.Replaced)+len(r.Removed) > 0 || r.Demoted != ""
}

// applyConcurrency bounds the store writes ReplaceFileAgents runs at once
// (a batching store groups them into few commits).
const applyConcurrency = 16

// ReplaceFileAgents makes the set of agents with Source [SourceFile]
// exactly agents (normally the result of [LoadDir]): new names are
// created, changed records replaced (keeping RegisteredAt), file agents
// missing from agents removed, and unchanged ones left alone. A file agent
// whose name belongs to an API-registered agent replaces it (the file wins;
// a warning is logged and the report lists it). When the set has a default
// agent and an API-registered agent is the default, that agent stops being
// the default and gets [DefaultConfidenceThreshold] (logged and reported).
//
// The change is atomic for readers: every write reaches the store first,
// then the in-memory view switches to the new set under one lock, so Get,
// List and Subscribe see either the old set or the new one, never a mix.
// Events follow in order (removals, then changes, the default agent last);
// a subscriber applying them one by one passes through intermediate states.
// Writes to other agents wait while it runs; concurrent calls are
// serialised.
//
// The agents are normalised and validated with the registry's endpoint
// policy; an invalid agent, a duplicate name or two default agents fail the
// whole call ([ErrInvalid], [ErrDefaultConflict]) before anything is
// written. If a store write fails, the view is unchanged, the writes already
// made are undone (best effort; a failure to undo is logged) and the error
// is returned: calling again with the same agents re-applies them.
func (r *Registry) ReplaceFileAgents(ctx context.Context, agents []Agent) (FileAgentsReport, error) {
	next, newDefault, err := r.prepareFileAgents(agents)
	if err != nil {
		return FileAgentsReport{}, err
	}
	if err := ctx.Err(); err != nil {
		return FileAgentsReport{}, err
	}

	defer r.deliver() // after every lock is released
	unlock := r.lockAllNames()
	defer unlock()
	r.defaultMu.Lock()
	defer r.defaultMu.Unlock()

	// With every name lock held no writer can commit, so the view is
	// stable until this call commits.
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return FileAgentsReport{}, ErrClosed
	}
	view := make(map[string]Agent, len(r.agents))
	for name, a := range r.agents {
		view[name] = *a // records in the view are never mutated in place
	}
	oldDefault := r.defaultName
	r.mu.RUnlock()

	var rep FileAgentsReport
	var removals, puts []change
	now := r.now()
	inSet := make(map[string]bool, len(next))
	for _, a := range next {
		inSet[a.Name] = true
		old, exists := view[a.Name]
		a.RegisteredAt, a.UpdatedAt, a.LastSeen = now, now, now
		c := change{name: a.Name, next: &a}
		switch {
		case !exists:
			rep.Added = append(rep.Added, a.Name)
			c.created = true
		case old.Source != SourceFile:
			rep.Replaced = append(rep.Replaced, a.Name)
			rep.Overridden = append(rep.Overridden, a.Name)
			c.prev = &old
		case sameRecord(old, a):
			rep.Unchanged = append(rep.Unchanged, a.Name)
			continue
		default:
			rep.Replaced = append(rep.Replaced, a.Name)
			a.RegisteredAt = old.RegisteredAt
			c.prev = &old
		}
		puts = append(puts, c)
	}
	for _, name := range slices.Sorted(maps.Keys(view)) {
		if old := view[name]; old.Source == SourceFile && !inSet[name] {
			rep.Removed = append(rep.Removed, name)
			removals = append(removals, change{name: name, prev: &old})
		}
	}
	if old, ok := view[oldDefault]; ok && newDefault != "" && oldDefault != newDefault &&
		old.Source != SourceFile && !inSet[oldDefault] {
		demoted := old.Clone()
		demoted.IsDefault = false
		th := DefaultConfidenceThreshold
		demoted.ConfidenceThreshold = &th
		demoted.UpdatedAt = now
		rep.Demoted = oldDefault
		puts = append(puts, change{name: oldDefault, next: &demoted, prev: &old})
	}
	// The default agent's put goes last, so a subscriber never sees two
	// defaults.
	slices.SortStableFunc(puts, func(a, b change) int {
		switch {
		case a.next.IsDefault == b.next.IsDefault:
			return 0
		case a.next.IsDefault:
			return 1
		}
		return -1
	})
	changes := append(removals, puts...)
	if len(changes) == 0 {
		return rep, nil
	}

	if err := r.writeChanges(ctx, changes); err != nil {
		return FileAgentsReport{}, err
	}
	events := make([]Event, len(changes))
	for i, c := range changes {
		if c.next == nil {
			events[i] = Event{Type: EventDelete, Agent: *c.prev}
		} else {
			events[i] = Event{Type: EventPut, Agent: *c.next, Created: c.created}
		}
	}
	r.commit(events...)
	for _, c := range changes {
		if c.next == nil {
			r.wrote(ctx, Write{Op: OpDelete, Agent: *c.prev, File: true})
		} else {
			r.wrote(ctx, Write{Op: OpRegister, Agent: *c.next, Created: c.created, File: true})
		}
	}
	for _, name := range rep.Overridden {
		r.log.Warn("a file agent replaced the API-registered agent of the same name (the agent directory wins)", "agent", name)
	}
	if rep.Demoted != "" {
		r.log.Warn("the API-registered default agent is no longer the default: the agent directory has its own",
			"agent", rep.Demoted, "default", newDefault)
	}
	return rep, nil
}

// change is one store write of ReplaceFileAgents: next nil deletes.
type change struct {
	name    string
	next    *Agent
	prev    *Agent // the record before, nil when there was none
	created bool
}

// prepareFileAgents normalises and validates a file set and returns it in
// name order with the name of its default agent.
func (r *Registry) prepareFileAgents(agents []Agent) ([]Agent, string, error) {
	next := make([]Agent, len(agents))
	seen := make(map[string]bool, len(agents))
	def := ""
	var errs []error
	for i, a := range agents {
		a = a.Clone()
		a.Normalize()
		if err := a.Validate(r.policy); err != nil {
			errs = append(errs, fmt.Errorf("file agent %q: %w", a.Name, err))
			continue
		}
		a.Source = SourceFile
		switch {
		case seen[a.Name]:
			errs = append(errs, fmt.Errorf("%w: file agent %q appears twice", ErrInvalid, a.Name))
		case a.IsDefault && def != "":
			errs = append(errs, fmt.Errorf("%w: file agents %q and %q", ErrDefaultConflict, def, a.Name))
		case a.IsDefault:
			def = a.Name
		}
		seen[a.Name] = true
		next[i] = a
	}
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	slices.SortFunc(next, func(a, b Agent) int { return strings.Compare(a.Name, b.Name) })
	return next, def, nil
}

// writeChanges writes every change to the store, concurrently. If any
// write fails it undoes the ones that succeeded and returns the failures.
func (r *Registry) writeChanges(ctx context.Context, changes []change) error {
	errs := make([]error, len(changes))
	r.forEach(len(changes), func(i int) {
		c := changes[i]
		errs[i] = r.update(ctx, c.name, func(*Agent) (*Agent, error) { return cloneOrNil(c.next), nil })
	})
	if err := errors.Join(errs...); err != nil {
		// Undo what was written, so the store matches the view again.
		// The caller's context may be what failed; the undo must run.
		undo := context.WithoutCancel(ctx)
		undoErrs := make([]error, len(changes))
		r.forEach(len(changes), func(i int) {
			if errs[i] == nil {
				c := changes[i]
				undoErrs[i] = r.update(undo, c.name, func(*Agent) (*Agent, error) { return cloneOrNil(c.prev), nil })
			}
		})
		if uerr := errors.Join(undoErrs...); uerr != nil {
			r.log.Error("undoing a partly applied agent directory failed; the next reload re-applies it", "err", uerr)
		}
		return fmt.Errorf("registry: apply the agent directory: %w", err)
	}
	return nil
}

// forEach runs fn(0..n-1) on up to applyConcurrency goroutines and waits.
func (r *Registry) forEach(n int, fn func(i int)) {
	sem := make(chan struct{}, applyConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// lockAllNames takes every name lock, in index order (the only order in
// which more than one is ever held, so it cannot deadlock), and returns
// the function that releases them.
func (r *Registry) lockAllNames() (unlock func()) {
	for i := range r.nameLocks {
		r.nameLocks[i].Lock()
	}
	return func() {
		for i := range r.nameLocks {
			r.nameLocks[i].Unlock()
		}
	}
}

func cloneOrNil(a *Agent) *Agent {
	if a == nil {
		return nil
	}
	c := a.Clone()
	return &c
}

// sameRecord reports whether two records carry the same agent (token
// included), ignoring the fields the registry sets. It compares the stored
// JSON form, so nil and empty lists are equal, as they are after a store
// round trip.
func sameRecord(a, b Agent) bool {
	strip := func(a Agent) []byte {
		a.RegisteredAt, a.UpdatedAt, a.LastSeen = zeroTime, zeroTime, zeroTime
		a.Source, a.Stale = "", false
		data, err := json.Marshal(a)
		if err != nil {
			return nil
		}
		return data
	}
	x, y := strip(a), strip(b)
	return x != nil && string(x) == string(y)
}
