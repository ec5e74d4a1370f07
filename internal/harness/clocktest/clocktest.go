// Package clocktest is a manual clock for tests of code that takes a
// clock as a func() time.Time (Options.Now in the mesh's packages). It is
// safe for concurrent use.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock showing t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (back, for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
