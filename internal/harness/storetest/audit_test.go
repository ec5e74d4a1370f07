package storetest_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/internal/harness/storetest"
)

func TestAuditStoreOnMemstore(t *testing.T) {
	storetest.TestAuditStore(t, func(t *testing.T) audit.Store { return openMemstore(t) }, memstoreOptions)
}

// TestAuditSuiteCatchesBrokenStores checks TestAuditStore: each planted
// bug must fail the case that guards the broken rule.
func TestAuditSuiteCatchesBrokenStores(t *testing.T) {
	const child = "TestBrokenAuditStoreChild"
	bugs := map[string]string{
		"oldest-first":      "NewestFirst",
		"append-order":      "NewestFirst",
		"duplicates-kept":   "SameIDReplaces",
		"no-limit-cap":      "LimitDefaultsAndCap",
		"before-inclusive":  "BeforePagesVisitEveryEntryOnce",
		"since-exclusive":   "SinceIsInclusive",
		"partial-invalid":   "InvalidEntryWritesNothing",
		"prune-at-cutoff":   "PruneByAge",
		"prune-one-short":   "PruneByCount",
		"drops-details":     "EveryFieldRoundTrips",
		"drops-nanoseconds": "EveryFieldRoundTrips",
		"shared-details":    "ReturnsCopies",
		"ignores-context":   "DoneContextFails",
		"close-ignored":     "CallsAfterCloseFail",
	}
	checkSuiteCatchesBugs(t, child, bugs, true)
}

// TestBrokenAuditStoreChild runs the audit suite against a store with the
// bug named by $STORETEST_BROKEN_STORE. It does nothing unless started by
// TestAuditSuiteCatchesBrokenStores.
func TestBrokenAuditStoreChild(t *testing.T) {
	bug := brokenChildBug(t, "TestAuditSuiteCatchesBrokenStores")
	storetest.TestAuditStore(t, func(t *testing.T) audit.Store {
		return &brokenAuditStore{brokenBase: brokenBase{bug: bug}}
	}, brokenOptions)
}

// brokenAuditStore is a slice store, sorted by ID unless its bug says
// otherwise, correct except for its bug.
type brokenAuditStore struct {
	brokenBase
	es []audit.Entry
}

func (s *brokenAuditStore) copyOut(e audit.Entry) audit.Entry {
	if s.bug == "shared-details" {
		return e
	}
	return e.Clone()
}

func (s *brokenAuditStore) AppendAudit(ctx context.Context, entries []audit.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	for i := range entries {
		if err := audit.CheckEntry(&entries[i]); err != nil {
			if s.bug == "partial-invalid" {
				continue
			}
			return err
		}
	}
	for _, e := range entries {
		if audit.CheckEntry(&e) != nil {
			continue
		}
		if s.bug != "shared-details" {
			e = e.Clone()
		}
		if s.bug == "drops-details" {
			e.Details = nil
		}
		if s.bug == "drops-nanoseconds" {
			e.Time = e.Time.Truncate(time.Second)
		}
		i := slices.IndexFunc(s.es, func(o audit.Entry) bool { return o.ID == e.ID })
		if i >= 0 && s.bug != "duplicates-kept" {
			s.es[i] = e
			continue
		}
		s.es = append(s.es, e)
	}
	if s.bug != "append-order" {
		slices.SortStableFunc(s.es, func(a, b audit.Entry) int { return strings.Compare(a.ID, b.ID) })
	}
	return nil
}

func (s *brokenAuditStore) ListAudit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = audit.DefaultListLimit
	}
	if s.bug != "no-limit-cap" {
		limit = min(limit, audit.MaxListLimit)
	}
	order := slices.Clone(s.es)
	if s.bug != "oldest-first" {
		slices.Reverse(order)
	}
	out := []audit.Entry{}
	for _, e := range order {
		if len(out) == limit {
			break
		}
		switch {
		case q.Before != "" && e.ID > q.Before,
			q.Before != "" && e.ID == q.Before && s.bug != "before-inclusive":
			continue
		case !q.Since.IsZero() && e.ID < audit.MinID(q.Since),
			!q.Since.IsZero() && e.Time.Equal(q.Since) && s.bug == "since-exclusive":
			continue
		}
		out = append(out, s.copyOut(e))
	}
	return out, nil
}

func (s *brokenAuditStore) PruneAudit(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	if !olderThan.IsZero() {
		cut := audit.MinID(olderThan)
		if s.bug == "prune-at-cutoff" {
			cut = audit.MinID(olderThan.Add(time.Nanosecond))
		}
		for n < len(s.es) && s.es[n].ID < cut {
			n++
		}
	}
	if keep > 0 && len(s.es)-n > keep {
		n = len(s.es) - keep
		if s.bug == "prune-one-short" {
			n--
		}
	}
	s.es = slices.Delete(s.es, 0, n)
	return n, nil
}
