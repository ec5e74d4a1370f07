package storetest_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/storetest"
)

func TestDelegationStoreOnMemstore(t *testing.T) {
	storetest.TestDelegationStore(t, func(t *testing.T) delegation.Store { return openMemstore(t) }, memstoreOptions)
}

// TestDelegationSuiteCatchesBrokenStores checks TestDelegationStore the
// way TestSuiteCatchesBrokenStores checks TestAgentStore: each planted bug
// must fail the case that guards the broken rule. The child runs only
// that case, which keeps the test quick under -race.
func TestDelegationSuiteCatchesBrokenStores(t *testing.T) {
	const child = "TestBrokenDelegationStoreChild"
	bugs := map[string]string{
		"shared-values":      "ReturnsCopies",
		"lost-updates":       "ConcurrentUpdatesLoseNothing",
		"ties-ascending":     "ListNewestFirst",
		"statuses-union":     "ListFilters",
		"target-prefix":      "ListFilters",
		"principal-literal":  "ListFilters",
		"ignores-offset":     "ListPaging",
		"uncapped-limit":     "ListPaging",
		"prunes-open":        "PruneByAge",
		"prunes-at-cutoff":   "PruneByAge",
		"prune-by-created":   "PruneByCount",
		"keep-counts-final":  "PruneByCount",
		"wraps-fn-error":     "UpdateFnErrorWritesNothing",
		"writes-on-error":    "UpdateFnErrorWritesNothing",
		"plain-not-found":    "GetMissingIsNotFound",
		"update-creates":     "UpdateMissingIsNotFound",
		"partial-batch":      "PutRefusesEmptyIDAndWritesNothing",
		"ignores-context":    "DoneContextFails",
		"close-ignored":      "CallsAfterCloseFail",
		"drops-secret-hash":  "EveryFieldRoundTrips",
		"drops-nanoseconds":  "EveryFieldRoundTrips",
		"merges-on-replace":  "PutReplaces",
		"first-dup-wins":     "PutBatch",
		"stale-status-index": "UpdateSeesCurrentAndMovesIndexes",
	}
	checkSuiteCatchesBugs(t, child, bugs, true)
}

// TestBrokenDelegationStoreChild runs the suite against a store with the
// bug named by $STORETEST_BROKEN_STORE. It does nothing unless started by
// TestDelegationSuiteCatchesBrokenStores.
func TestBrokenDelegationStoreChild(t *testing.T) {
	bug := brokenChildBug(t, "TestDelegationSuiteCatchesBrokenStores")
	storetest.TestDelegationStore(t, func(t *testing.T) delegation.Store {
		return &brokenDelegationStore{brokenBase: brokenBase{bug: bug}, recs: map[string]delegation.Record{}}
	}, brokenOptions)
}

// brokenDelegationStore is a simple map store that is correct except for
// the bug it is told to have. It copies records through JSON.
type brokenDelegationStore struct {
	brokenBase
	recs map[string]delegation.Record
}

// copyRecord returns a deep copy of r (unless the bug is shared values).
func (s *brokenDelegationStore) copyRecord(r delegation.Record) delegation.Record {
	if s.bug == "shared-values" {
		return r
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	var c delegation.Record
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return c
}

func (s *brokenDelegationStore) store(r delegation.Record) {
	c := s.copyRecord(r)
	if s.bug == "drops-secret-hash" {
		c.SecretHash = nil
	}
	if s.bug == "drops-nanoseconds" {
		c.CreatedAt = c.CreatedAt.Truncate(time.Second)
	}
	if old, ok := s.recs[r.ID]; ok && s.bug == "merges-on-replace" && len(c.Result) == 0 {
		c.Result = old.Result
	}
	s.recs[r.ID] = c
}

func (s *brokenDelegationStore) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if s.bug != "partial-batch" {
		for _, r := range recs {
			if r.ID == "" {
				return errors.New("broken: empty id")
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.ID == "" {
			return errors.New("broken: empty id")
		}
		if s.bug == "first-dup-wins" && seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		s.store(r)
	}
	return nil
}

func (s *brokenDelegationStore) UpdateDelegation(ctx context.Context, id string, fn func(*delegation.Record) (*delegation.Record, error)) error {
	s.mu.Lock()
	if err := s.check(ctx); err != nil {
		s.mu.Unlock()
		return err
	}
	r, ok := s.recs[id]
	if !ok && s.bug != "update-creates" {
		s.mu.Unlock()
		return fmt.Errorf("broken: %w", delegation.ErrNotFound)
	}
	cur := s.copyRecord(r)
	if !ok {
		cur = delegation.Record{ID: id}
	}
	if s.bug == "lost-updates" {
		next, err := callUnlocked(&s.brokenBase, func() (*delegation.Record, error) { return fn(&cur) })
		defer s.mu.Unlock()
		return s.write(id, next, err)
	}
	defer s.mu.Unlock()
	next, err := fn(&cur)
	return s.write(id, next, err)
}

// write stores fn's result; s.mu is held.
func (s *brokenDelegationStore) write(id string, next *delegation.Record, err error) error {
	switch {
	case err != nil && s.bug == "wraps-fn-error":
		return fmt.Errorf("broken: %w", err)
	case err != nil && s.bug != "writes-on-error":
		return err
	case next == nil:
		return err
	case next.ID != id:
		return errors.New("broken: id changed")
	}
	if s.bug == "stale-status-index" {
		c := *next
		c.Status = s.recs[id].Status
		next = &c
	}
	s.store(*next)
	return err
}

func (s *brokenDelegationStore) GetDelegation(ctx context.Context, id string) (delegation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return delegation.Record{}, err
	}
	r, ok := s.recs[id]
	if !ok {
		return delegation.Record{}, s.notFound(delegation.ErrNotFound)
	}
	return s.copyRecord(r), nil
}

func (s *brokenDelegationStore) ListDelegations(ctx context.Context, f delegation.ListFilter) ([]delegation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	keep := func(r delegation.Record) bool {
		status := (f.Status == "" || r.Status == f.Status) && (len(f.Statuses) == 0 || slices.Contains(f.Statuses, r.Status))
		if s.bug == "statuses-union" && f.Status != "" && len(f.Statuses) > 0 {
			status = r.Status == f.Status || slices.Contains(f.Statuses, r.Status)
		}
		target := f.Target == "" || r.TargetAgent == f.Target
		if s.bug == "target-prefix" {
			target = strings.HasPrefix(r.TargetAgent, f.Target)
		}
		owner := f.KeepsPrincipal(&r)
		if s.bug == "principal-literal" { // "" is not read as the default principal
			owner = f.Principal == "" || r.Principal == f.Principal
		}
		return status && target && owner
	}
	var sel []delegation.Record
	for _, r := range s.recs {
		if keep(r) {
			sel = append(sel, s.copyRecord(r))
		}
	}
	slices.SortFunc(sel, func(a, b delegation.Record) int {
		if s.bug == "ties-ascending" {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID))
		}
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	})
	limit := f.Limit
	if limit <= 0 {
		limit = delegation.DefaultListLimit
	}
	if s.bug != "uncapped-limit" {
		limit = min(limit, delegation.MaxListLimit)
	}
	offset := max(f.Offset, 0)
	if s.bug == "ignores-offset" {
		offset = 0
	}
	offset = min(offset, len(sel))
	return sel[offset:min(offset+limit, len(sel))], nil
}

func (s *brokenDelegationStore) PruneDelegations(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	finish := func(r delegation.Record) time.Time {
		switch {
		case s.bug == "prune-by-created":
			return r.CreatedAt
		case r.FinishedAt != nil:
			return *r.FinishedAt
		}
		return r.UpdatedAt
	}
	var final []delegation.Record
	for _, r := range s.recs {
		if r.Status.Final() || s.bug == "prunes-open" {
			final = append(final, r)
		}
	}
	slices.SortFunc(final, func(a, b delegation.Record) int {
		return cmp.Or(finish(a).Compare(finish(b)), strings.Compare(a.ID, b.ID))
	})
	total := len(s.recs)
	if s.bug == "keep-counts-final" {
		total = len(final)
	}
	excess := total - keep
	if keep <= 0 {
		excess = 0
	}
	n := 0
	for _, r := range final {
		old := finish(r).Before(olderThan)
		if s.bug == "prunes-at-cutoff" {
			old = !finish(r).After(olderThan)
		}
		if !old && n >= excess {
			break
		}
		delete(s.recs, r.ID)
		n++
	}
	return n, nil
}
