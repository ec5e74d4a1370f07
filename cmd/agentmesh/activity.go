package main

import (
	"context"
	"time"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

// dashboardActivity is what the dashboard's Routing page and charts read,
// kept in this process's memory (docs/OPERATIONS.md#dashboard): the recent
// routing decisions, fed by the router's OnDecision and published to the
// event feed as routing.decided (without the message's text), and the
// delegations that ended in each minute of the last hour, fed by the
// delegation client's OnRecord.
type dashboardActivity struct {
	decisions *activity.Routing
	timeline  *activity.Timeline
}

// newDashboardActivity returns empty collections publishing each decision
// to events for its caller's principal (and admins), who alone may read
// it.
func newDashboardActivity(events *httpserver.Events) *dashboardActivity {
	return &dashboardActivity{
		decisions: activity.NewRouting(&activity.RoutingOptions{OnRecord: func(d activity.Decision) {
			_ = events.Publish("routing.decided", d.Redacted(), d.Principal)
		}}),
		timeline: activity.NewTimeline(time.Now),
	}
}

// routed is the router's OnDecision: observed (metrics and audit log),
// then kept for the dashboard.
func (m *mesh) routed(ctx context.Context, resp routing.Response, err error) {
	m.obs.routed(ctx, resp, err)
	m.activity.decisions.Observe(ctx, resp, err)
}

// delegationEnded keeps rec in the delegations-per-minute timeline (only
// records that ended count).
func (a *dashboardActivity) delegationEnded(rec delegation.Record) {
	a.timeline.Observe(rec)
}

// activityOptions is httpserver.Options.Activity: the decisions and the
// active sessions count with routing on, the timeline always.
func (m *mesh) activityOptions() *httpserver.Activity {
	a := &httpserver.Activity{Delegations: m.activity.timeline}
	if m.Router() == nil {
		return a
	}
	a.Decisions = m.activity.decisions
	if c, ok := m.Store().(session.ActiveCounter); ok {
		a.Sessions = c
	}
	return a
}
