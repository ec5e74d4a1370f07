package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/metrics"
	"github.com/agentmesh/agentmesh/session"
)

func TestSessionCloses(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewSessionCloses(reg)
	require.NoError(t, err)
	for _, st := range []string{"completed", "abandoned", "error", "expired"} {
		assert.Zero(t, value(t, reg, "agentmesh_sessions_closed_total", map[string]string{"status": st}), "%s is there from the start", st)
	}
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, e := range []session.CloseEvent{
		{Status: session.StatusCompleted, CreatedAt: created, ClosedAt: created.Add(40 * time.Second)},
		{Status: session.StatusCompleted, CreatedAt: created, ClosedAt: created.Add(2 * time.Hour)},
		{Status: session.StatusExpired, CreatedAt: created, ClosedAt: created.Add(30 * time.Minute)},
		{Status: "bogus", CreatedAt: created, ClosedAt: created},
	} {
		m.Observe(t.Context(), e)
	}
	assert.Equal(t, 2.0, value(t, reg, "agentmesh_sessions_closed_total", map[string]string{"status": "completed"}))
	assert.Equal(t, 1.0, value(t, reg, "agentmesh_sessions_closed_total", map[string]string{"status": "expired"}))
	assert.Equal(t, 1.0, value(t, reg, "agentmesh_sessions_closed_total", map[string]string{"status": "other"}), "an unknown status does not make a label of its own")
	assert.Equal(t, 2.0, value(t, reg, "agentmesh_session_duration_seconds", map[string]string{"status": "completed"}))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "agentmesh_session_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if s.GetLabel()[0].GetValue() == "completed" {
				assert.Equal(t, 40.0+7200, s.GetHistogram().GetSampleSum(), "durations in seconds")
			}
		}
	}

	_, err = metrics.NewSessionCloses(reg)
	assert.Error(t, err, "registering twice")
	_, err = metrics.NewSessionCloses(nil)
	assert.Error(t, err)
}
