package registrytest

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentmesh/agentmesh/registry"
)

func TestSource(t *testing.T) {
	s := NewSource(registry.Agent{Name: "a"})
	var got []string
	snap, cancel := s.Subscribe(func(ev registry.Event) { got = append(got, ev.Agent.Name) })
	assert.Equal(t, []registry.Agent{{Name: "a"}}, snap)
	assert.True(t, s.Subscribed())
	s.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "b"}})
	cancel()
	assert.True(t, s.Canceled())
	assert.False(t, s.Subscribed())
	s.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "c"}})
	s.EmitLate(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "late"}})
	assert.Equal(t, []string{"b", "late"}, got, "Emit stops at cancel; EmitLate does not")
}
