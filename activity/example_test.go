package activity_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/routing"
)

// A Routing fed by the router's OnDecision hook, which gets the request
// in its context.
func ExampleRouting() {
	decisions := activity.NewRouting(nil)
	// routing.RouterOptions{OnDecision: decisions.Observe, …}; here the
	// hook is called as the router would.
	ctx := routing.WithRequest(context.Background(), routing.Request{Input: "refund invoice 42"})
	decisions.Observe(ctx, routing.Response{RequestID: "r1", AgentID: "billing", Decision: routing.ActionRoute,
		Reason: routing.ReasonConfidence, Confidence: 0.9}, nil)

	for _, d := range decisions.Recent(10, nil) {
		d = d.Redacted() // for anyone but an admin
		fmt.Println(d.Decision, d.Reason, d.Agent, d.Confidence, d.InputLen, d.InputHash, d.Text == "")
	}
	// Output: route confidence billing 0.9 17 aa984d73aeafe636 true
}

// A Timeline fed by the delegation client's OnRecord hook.
func ExampleTimeline() {
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	tl := activity.NewTimeline(func() time.Time { return now })
	// delegation.Options{OnRecord: tl.Observe, …}
	for _, ms := range []int64{12, 15, 480} {
		tl.Observe(delegation.Record{Status: delegation.StatusCompleted, LatencyMs: ms, FinishedAt: &now})
	}
	tl.Observe(delegation.Record{Status: delegation.StatusFailed, LatencyMs: 30, FinishedAt: &now})

	m := tl.Minutes()
	last := m[len(m)-1]
	fmt.Println(len(m), last.Start.Format("15:04"), last.Completed, last.Failed, last.Total, last.P50Ms, last.P99Ms)
	// Output: 60 10:30 3 1 4 15 480
}
