package activity

import (
	"slices"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/breaker"
)

// Defaults of [BreakersOptions].
const (
	// DefaultBreakerTransitions is how many transitions [Breakers] keeps
	// per agent.
	DefaultBreakerTransitions = 32
	// DefaultBreakerAgents is how many agents [Breakers] keeps a history
	// for.
	DefaultBreakerAgents = 1024
)

// BreakersOptions configures [Breakers]. The zero value of every field is
// its documented default.
type BreakersOptions struct {
	// Transitions is how many transitions are kept per agent: the newest,
	// in a ring; older ones are counted in [BreakerHistory.Dropped]. Zero
	// or less means DefaultBreakerTransitions.
	Transitions int

	// Agents bounds the agents with a history. A transition of a new
	// agent beyond it forgets the agent whose last transition is the
	// oldest. Zero or less means DefaultBreakerAgents.
	Agents int

	// Now stamps each transition as it is recorded. Nil means time.Now.
	Now func() time.Time
}

// BreakerTransition is one state change of an agent's circuit breaker.
type BreakerTransition struct {
	// At is when the transition was recorded (the breaker reports it
	// right after it happens).
	At time.Time `json:"at"`
	// From and To are the states before and after.
	From breaker.State `json:"from"`
	To   breaker.State `json:"to"`
}

// BreakerHistory is what [Breakers] keeps of one agent.
type BreakerHistory struct {
	// Transitions are the kept transitions, newest first.
	Transitions []BreakerTransition
	// Dropped is how many older transitions of the agent were recorded
	// but are no longer kept.
	Dropped int
}

// Breakers keeps the recent transitions of each agent's circuit breaker,
// in memory: at most Transitions per agent for at most Agents agents
// (BreakersOptions), so its memory is bounded whatever the mesh does.
// [Breakers.Record] has the signature of breaker.Options.OnStateChange.
//
// It sees only the transitions reported to it: those of this process's
// breakers, not those another replica made. A restart forgets them.
//
// A Breakers is safe for concurrent use. The zero value is ready to use
// with the defaults; a nil *Breakers records nothing and has no history.
type Breakers struct {
	mu     sync.Mutex
	opts   BreakersOptions
	agents map[string]*breakerRing
	seq    uint64 // orders the agents' last transitions, for eviction
}

// breakerRing is the kept transitions of one agent.
type breakerRing struct {
	buf     []BreakerTransition // grows to the per-agent bound, then wraps
	next    int                 // where the next transition goes, once full
	dropped int
	last    uint64 // Breakers.seq at the agent's last transition
}

// NewBreakers returns an empty history configured by opts (nil means the
// defaults); opts is copied.
func NewBreakers(opts *BreakersOptions) *Breakers {
	b := &Breakers{}
	if opts != nil {
		b.opts = *opts
	}
	return b
}

// Record keeps the transition of the breaker of the agent name from one
// state to another, stamped with the clock. A transition with a state
// that is not one of the three (breaker.State.Valid) is ignored.
func (b *Breakers) Record(name string, from, to breaker.State) {
	if b == nil || !from.Valid() || !to.Valid() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	per, maxAgents, now := b.limits()
	r := b.agents[name]
	if r == nil {
		if b.agents == nil {
			b.agents = make(map[string]*breakerRing)
		}
		if len(b.agents) >= maxAgents {
			b.evictOldest()
		}
		r = &breakerRing{}
		b.agents[name] = r
	}
	b.seq++
	r.last = b.seq
	t := BreakerTransition{At: now(), From: from, To: to}
	if len(r.buf) < per {
		r.buf = append(r.buf, t)
		return
	}
	r.buf[r.next] = t
	r.next = (r.next + 1) % len(r.buf)
	r.dropped++
}

// evictOldest forgets the agent whose last transition is the oldest. A
// scan: it runs only when a new agent arrives at the bound.
func (b *Breakers) evictOldest() {
	var (
		oldest string
		seq    uint64
	)
	for name, r := range b.agents {
		if oldest == "" || r.last < seq {
			oldest, seq = name, r.last
		}
	}
	delete(b.agents, oldest)
}

// History returns what is kept of the agent name: its transitions, newest
// first, and how many older ones were dropped. An agent without a
// recorded transition has an empty history.
func (b *Breakers) History(name string) BreakerHistory {
	if b == nil {
		return BreakerHistory{Transitions: []BreakerTransition{}}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.agents[name]
	if r == nil {
		return BreakerHistory{Transitions: []BreakerTransition{}}
	}
	// Oldest first is buf[next:] then buf[:next]; reversed, newest first.
	out := make([]BreakerTransition, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	out = append(out, r.buf[:r.next]...)
	slices.Reverse(out)
	return BreakerHistory{Transitions: out, Dropped: r.dropped}
}

// limits are the options with their defaults applied.
func (b *Breakers) limits() (per, agents int, now func() time.Time) {
	per, agents, now = b.opts.Transitions, b.opts.Agents, b.opts.Now
	if per <= 0 {
		per = DefaultBreakerTransitions
	}
	if agents <= 0 {
		agents = DefaultBreakerAgents
	}
	if now == nil {
		now = time.Now
	}
	return per, agents, now
}
