package audit_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func Example() {
	ctx := context.Background()
	store := memstore.New() // boltstore in production
	rec, err := audit.NewRecorder(store, nil)
	if err != nil {
		panic(err)
	}
	defer rec.Close()

	// Record never blocks: the entry is written in the background.
	rec.Record(audit.Entry{Actor: "ci", Action: audit.ActionAgentRegister, Target: "billing", Outcome: audit.OutcomeSuccess})
	rec.Record(audit.Entry{Action: audit.ActionAuthFailure, Outcome: audit.OutcomeDenied, Code: "unauthenticated",
		Details: map[string]string{"route": "POST /v1/agents"}})

	entries, err := rec.List(ctx, audit.Query{Limit: 10}) // newest first
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		fmt.Printf("%s %s %s %s\n", e.Action, e.Actor, e.Target, e.Outcome)
	}
	// Output:
	// auth.failure   denied
	// agent.register ci billing success
}
