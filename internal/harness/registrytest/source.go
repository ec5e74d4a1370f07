// Package registrytest provides a stand-in for a registry's change feed,
// for tests of the packages that follow one (routing's classifiers): it
// delivers the events a test chooses, when it chooses, including agents a
// real registry would refuse (no endpoint). Tests that can use a real
// *registry.Registry should.
package registrytest

import (
	"sync"

	"github.com/agentmesh/agentmesh/registry"
)

// Source is a registry.Subscriber with one subscriber at a time: Subscribe
// returns the agents it was made with, and Emit delivers an event to the
// current subscriber until its subscription is cancelled. It is safe for
// concurrent use.
type Source struct {
	mu       sync.Mutex
	agents   []registry.Agent
	fn       func(registry.Event) // nil once cancelled
	last     func(registry.Event) // the latest subscriber, even cancelled
	canceled bool
}

// NewSource returns a Source whose snapshot is agents.
func NewSource(agents ...registry.Agent) *Source {
	return &Source{agents: agents}
}

// Subscribe implements registry.Subscriber.
func (s *Source) Subscribe(fn func(registry.Event)) ([]registry.Agent, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn, s.last = fn, fn
	return s.agents, func() {
		s.mu.Lock()
		s.fn, s.canceled = nil, true
		s.mu.Unlock()
	}
}

// Emit delivers ev to the subscriber, if there is one, on the calling
// goroutine.
func (s *Source) Emit(ev registry.Event) {
	s.mu.Lock()
	fn := s.fn
	s.mu.Unlock()
	if fn != nil {
		fn(ev)
	}
}

// EmitLate delivers ev to the latest subscriber even if its subscription
// was cancelled: an event racing with the cancel, which a follower must
// ignore.
func (s *Source) EmitLate(ev registry.Event) {
	s.mu.Lock()
	fn := s.last
	s.mu.Unlock()
	if fn != nil {
		fn(ev)
	}
}

// Subscribed reports whether a subscription is active: made and not
// cancelled.
func (s *Source) Subscribed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fn != nil
}

// Canceled reports whether a subscription was cancelled.
func (s *Source) Canceled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.canceled
}
