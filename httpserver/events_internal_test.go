package httpserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client that takes nothing from its queue holds at most ClientQueue
// events, and is dropped by the first event that does not fit.
func TestEventsQueueBounded(t *testing.T) {
	e := NewEvents(&EventsOptions{ClientQueue: 3, History: 8})
	c, backlog, reset, err := e.subscribe(Identity{Principal: "p"}, "")
	require.Nil(t, err)
	assert.Empty(t, backlog)
	assert.Nil(t, reset)
	for i := range 3 {
		require.NoError(t, e.Publish("agent.updated", i, ""))
	}
	assert.Equal(t, 1, e.Clients())
	select {
	case <-c.done:
		t.Fatal("dropped with a queue not yet full")
	default:
	}
	for i := range 100 {
		require.NoError(t, e.Publish("agent.updated", i, ""))
	}
	<-c.done
	assert.Equal(t, 0, e.Clients())
	assert.Len(t, c.ch, 3)
	assert.Len(t, e.ring, 8) // the history is bounded too
	e.unsubscribe(c)         // after a drop: nothing to do
}
