package httpserver

import (
	"context"
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/principal"
	"github.com/agentmesh/agentmesh/session"
)

// Page sizes of GET /v1/routing/decisions.
const (
	DefaultDecisionsLimit = 100
	MaxDecisionsLimit     = activity.DefaultDecisions
)

// Activity is what this process saw recently, for the dashboard's Routing
// page and charts (docs/API.md#dashboard-activity). Each nil field leaves
// its route out (404).
type Activity struct {
	// Decisions serves GET /v1/routing/decisions (scope read): the recent
	// routing decisions, newest first, each caller seeing its own
	// principal's (an admin every one); the message's text only for the
	// admin scope. It is fed by the router's OnDecision hook
	// ([activity.Routing.Observe]), which sees every routed message, from
	// POST /v1/request and from the MCP and A2A front-ends alike.
	Decisions *activity.Routing

	// Delegations serves GET /v1/stats/delegations (scope read): the
	// delegations that ended in each minute of the last hour, by status,
	// with their p50 and p99 latencies. The counts are the whole mesh's
	// (they carry no id or agent, so no principal's records).
	Delegations *activity.Timeline

	// Sessions serves GET /v1/stats/sessions (scope read): the number of
	// active routing sessions, counted by the store (the store of
	// agentmesh_sessions_active). One session's turns are GET
	// /v1/sessions/{id}, for its owner and admins.
	Sessions session.ActiveCounter
}

// SessionStats is the reply of GET /v1/stats/sessions.
type SessionStats struct {
	// Active is the number of active sessions (occupied user slots).
	Active int `json:"active"`
}

// DelegationStats is the reply of GET /v1/stats/delegations.
type DelegationStats struct {
	// BucketSeconds is the width of a bucket: 60.
	BucketSeconds int `json:"bucket_seconds"`
	// Minutes are the last 60 minutes, oldest first, the current one
	// (partial) last.
	Minutes []activity.Minute `json:"minutes"`
}

// sessionCountTimeout bounds the store's count of GET /v1/stats/sessions.
const sessionCountTimeout = 2 * time.Second

// activityRoutes registers the routes of a (nil registers none).
func (s *Server) activityRoutes(a *Activity) {
	if a == nil {
		return
	}
	if d := a.Decisions; d != nil {
		s.handle("GET /v1/routing/decisions", authScope, ScopeRead, func(w *recorder, r *http.Request) { s.listDecisions(w, r, d) })
	}
	if tl := a.Delegations; tl != nil {
		s.handle("GET /v1/stats/delegations", authScope, ScopeRead, func(w *recorder, r *http.Request) {
			if _, e := parseQuery(r.URL.RawQuery); e != nil {
				s.fail(w, e)
				return
			}
			writeJSON(w, http.StatusOK, DelegationStats{BucketSeconds: 60, Minutes: tl.Minutes()})
		})
	}
	if c := a.Sessions; c != nil {
		s.handle("GET /v1/stats/sessions", authScope, ScopeRead, func(w *recorder, r *http.Request) { s.sessionStats(w, r, c) })
	}
}

// listDecisions is GET /v1/routing/decisions?limit=.
func (s *Server) listDecisions(w *recorder, r *http.Request, d *activity.Routing) {
	q, e := parseQuery(r.URL.RawQuery, "limit")
	if e != nil {
		s.fail(w, e)
		return
	}
	limit, e := q.limit(DefaultDecisionsLimit, MaxDecisionsLimit)
	if e != nil {
		s.fail(w, e)
		return
	}
	var keep func(activity.Decision) bool
	if p := principal.Filter(r.Context()); p != "" {
		keep = func(dec activity.Decision) bool { return dec.Principal == p }
	}
	out := d.Recent(limit, keep)
	if !w.identity.Has(ScopeAdmin) {
		for i := range out {
			out[i] = out[i].Redacted()
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionStats is GET /v1/stats/sessions.
func (s *Server) sessionStats(w *recorder, r *http.Request, c session.ActiveCounter) {
	if _, e := parseQuery(r.URL.RawQuery); e != nil {
		s.fail(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), sessionCountTimeout)
	defer cancel()
	n, err := c.CountActiveSessions(ctx)
	if err != nil {
		e := errorf(http.StatusServiceUnavailable, CodeUnavailable, "the sessions could not be counted")
		e.cause = err
		w.Header().Set("Retry-After", "5")
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, SessionStats{Active: n})
}
