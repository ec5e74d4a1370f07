package httpserver

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
)

// TestAuthAuditorTimer: counted failures arm a timer; when it fires
// after the window ended by the server's clock, the count is recorded,
// and before, it waits again.
func TestAuthAuditorTimer(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC))
	var mu sync.Mutex
	var got []audit.Entry
	a := newAuthAuditor(clock.Now, func(e audit.Entry) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	})
	defer a.close()
	k := authKey{client: "192.0.2.1", code: "unauthenticated", reason: "invalid credentials", route: "GET /v1/agents"}
	a.failure(k, "r1")
	a.mu.Lock()
	assert.Nil(t, a.timer, "a single failure needs no timer")
	a.mu.Unlock()
	a.failure(k, "r2")
	a.failure(k, "r3")
	a.mu.Lock()
	require.NotNil(t, a.timer, "a count waiting for the end of the minute")
	a.mu.Unlock()

	a.tick() // early: the window has not ended
	mu.Lock()
	assert.Len(t, got, 1)
	mu.Unlock()
	a.mu.Lock()
	require.NotNil(t, a.timer, "re-armed")
	a.mu.Unlock()

	clock.Advance(30 * time.Second)
	a.tick()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2)
	assert.Equal(t, "2", got[1].Details["count"])
	assert.Equal(t, "2026-03-01T12:00:30Z", got[1].Details["first"])
	assert.Equal(t, clock.Now().Add(-30*time.Second), got[1].Time, "the time of the last failure counted")
}
