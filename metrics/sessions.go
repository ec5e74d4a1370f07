package metrics

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh/session"
)

// SessionCloses counts the routing sessions that ended, fed by
// session.Options.OnClose (agentmesh.RoutingOptions.OnSessionClose):
//
//	agentmesh_sessions_closed_total{status}        counter    sessions ended: completed, abandoned, error or expired
//	agentmesh_session_duration_seconds{status}     histogram  creation to close of each
//
// The status label takes those four values only (another is counted as
// "other"), each present from the start. A SessionCloses is safe for
// concurrent use; use [NewSessionCloses], the zero value is not usable.
type SessionCloses struct {
	closed   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// sessionStatuses are the values of the status label.
var sessionStatuses = []session.Status{session.StatusCompleted, session.StatusAbandoned, session.StatusError, session.StatusExpired}

// NewSessionCloses returns the session close metrics registered on reg
// (required). It fails if reg already has collectors of the same names.
func NewSessionCloses(reg prometheus.Registerer) (*SessionCloses, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil Registerer")
	}
	m := &SessionCloses{
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_sessions_closed_total",
			Help: "Routing sessions that ended, by status: completed, abandoned, error, or expired (an active session whose TTL passed).",
		}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentmesh_session_duration_seconds",
			Help:    "Lifetime of the routing sessions that ended, from creation to close (to the end of the TTL for an expired one), by status.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400},
		}, []string{"status"}),
	}
	for _, st := range sessionStatuses {
		m.closed.WithLabelValues(string(st))
		m.duration.WithLabelValues(string(st))
	}
	if err := reg.Register(m.closed); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(m.duration); err != nil {
		reg.Unregister(m.closed)
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

// Observe counts e: it is a session.Options.OnClose.
func (m *SessionCloses) Observe(_ context.Context, e session.CloseEvent) {
	status := "other"
	for _, st := range sessionStatuses {
		if e.Status == st {
			status = string(st)
		}
	}
	m.closed.WithLabelValues(status).Inc()
	m.duration.WithLabelValues(status).Observe(max(e.Duration().Seconds(), 0))
}
