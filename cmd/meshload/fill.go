package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// fillBatch is how many records (and audit entries) -mode fill writes per
// commit.
const fillBatch = 1000

// runFill runs -mode fill: it writes n finished delegation records and n
// audit entries into the bbolt file -store-file, before a server opens it,
// so that a soak starts with the store at its retention bounds — where a
// server that has run for a while is — instead of spending its first
// minutes filling it. The records are shaped like the soak's (a uuid, the
// -task text, the echo agent's result) and finished in the hour before
// now, so the server prunes them first.
func runFill(ctx context.Context, cfg *config, n int, stderr io.Writer) (int, error) {
	if cfg.storeFile == "" {
		return 2, errors.New("-mode fill needs -store-file, the bbolt file to fill (not open in a server)")
	}
	s, err := boltstore.Open(cfg.storeFile, nil)
	if err != nil {
		return 1, err
	}
	defer s.Close()
	start := time.Now()
	base := start.Add(-time.Hour)
	step := time.Hour / time.Duration(max(n, 1))
	result, err := json.Marshal(map[string]string{"result": "echo: " + cfg.task})
	if err != nil {
		return 1, err
	}
	for done := 0; done < n; {
		k := min(fillBatch, n-done)
		recs := make([]delegation.Record, k)
		entries := make([]audit.Entry, k)
		for i := range recs {
			at := base.Add(time.Duration(done+i) * step)
			finished := at.Add(time.Millisecond)
			recs[i] = delegation.Record{
				ID: uuid.NewString(), TargetAgent: cfg.target, Principal: "default", Task: cfg.task,
				Status: delegation.StatusCompleted, Attempts: 1, LatencyMs: 1, Result: result,
				CreatedAt: at, UpdatedAt: finished, FinishedAt: &finished,
			}
			entries[i] = audit.Entry{
				ID: audit.NewID(finished), Time: finished, Actor: "meshload", Principal: "default",
				Action: audit.ActionDelegation, Target: cfg.target, Outcome: audit.OutcomeSuccess,
				Details: map[string]string{"delegation_id": recs[i].ID},
			}
		}
		if err := s.PutDelegations(ctx, recs); err != nil {
			return 1, err
		}
		if err := s.AppendAudit(ctx, entries); err != nil {
			return 1, err
		}
		done += k
	}
	if err := s.Close(); err != nil {
		return 1, err
	}
	fmt.Fprintf(stderr, "meshload: filled %s with %d delegation records and %d audit entries in %.1fs\n",
		cfg.storeFile, n, n, time.Since(start).Seconds())
	return 0, nil
}
