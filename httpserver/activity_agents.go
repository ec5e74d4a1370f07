package httpserver

import (
	"net/http"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/breaker"
)

// BreakerHistories reports the recent transitions of the agents' circuit
// breakers, for GET /v1/agents/{name}/breaker: *activity.Breakers
// implements it. History must be safe for concurrent use.
type BreakerHistories interface {
	History(name string) activity.BreakerHistory
}

// BreakerHistoryResponse is the body of GET /v1/agents/{name}/breaker
// (docs/API.md#agent-breaker-history): the agent's breaker now, and its
// recent transitions as this server saw them.
type BreakerHistoryResponse struct {
	// Name is the agent's name.
	Name string `json:"name"`
	// Current is the breaker's state now, as GET /health/deep reports it
	// (closed, with multiplier 1, for an agent no call has reached yet).
	Current breaker.Snapshot `json:"current"`
	// Transitions are the kept transitions, newest first.
	Transitions []activity.BreakerTransition `json:"transitions"`
	// Dropped is how many older transitions were recorded but are no
	// longer kept.
	Dropped int `json:"dropped"`
}

// breakerHistoryRoute serves GET /v1/agents/{name}/breaker (scope read)
// from h: only for an agent the caller can read (404 not_found
// otherwise, as GET /v1/agents/{name}).
func (s *Server) breakerHistoryRoute(h BreakerHistories) {
	s.handle("GET /v1/agents/{name}/breaker", authScope, ScopeRead, func(w *recorder, r *http.Request) {
		name, e := agentName(r)
		if e != nil {
			s.fail(w, e)
			return
		}
		if _, err := s.reg.Get(r.Context(), name); err != nil {
			s.fail(w, agentError(err))
			return
		}
		current := breaker.Snapshot{State: breaker.StateClosed, Multiplier: 1}
		if s.breakers != nil {
			if snap, ok := s.breakers.States()[name]; ok {
				current = snap
			}
		}
		hist := h.History(name)
		if hist.Transitions == nil {
			hist.Transitions = []activity.BreakerTransition{}
		}
		writeJSON(w, http.StatusOK, BreakerHistoryResponse{
			Name:        name,
			Current:     current,
			Transitions: hist.Transitions,
			Dropped:     hist.Dropped,
		})
	})
}
