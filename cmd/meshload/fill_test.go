package main

import (
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// -mode fill writes -n finished records and audit entries, finished in
// the hour before now, into a bbolt file a server can then open.
func TestFill(t *testing.T) {
	path := t.TempDir() + "/mesh.db"
	runOut(t, 0, "-mode", "fill", "-store-file", path, "-n", "1500", "-target", "echo")
	runOut(t, 2, "-mode", "fill") // no -store-file

	s, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	recs, err := s.ListDelegations(ctx, delegation.ListFilter{Limit: delegation.MaxListLimit, Offset: 1000})
	if err != nil || len(recs) != 500 {
		t.Fatalf("%d records beyond the first 1000 (%v), want 500", len(recs), err)
	}
	now := time.Now()
	for _, r := range recs {
		if r.Status != delegation.StatusCompleted || r.TargetAgent != "echo" || r.Task == "" || len(r.Result) == 0 ||
			r.FinishedAt == nil || !r.FinishedAt.Before(now) || r.FinishedAt.Before(now.Add(-time.Hour-time.Minute)) {
			t.Fatalf("record %+v", r)
		}
	}
	n := 0
	q := audit.Query{Limit: audit.MaxListLimit}
	for {
		page, err := s.ListAudit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page)
		if len(page) < q.Limit {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	if n != 1500 {
		t.Errorf("%d audit entries, want 1500", n)
	}
	// The server prunes them first: a prune to 1000 records takes 500.
	if pruned, err := s.PruneDelegations(ctx, now.Add(-delegation.DefaultRetention), 1000); err != nil || pruned != 500 {
		t.Errorf("pruned %d (%v), want 500", pruned, err)
	}
}
