package activity_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
)

var t0 = time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)

// TestBreakersRingKeepsTheNewest: past the per-agent bound, the oldest
// transitions go and are counted; the rest come newest first, with the
// clock's times.
func TestBreakersRingKeepsTheNewest(t *testing.T) {
	clock := clocktest.New(t0)
	b := activity.NewBreakers(&activity.BreakersOptions{Transitions: 3, Now: clock.Now})
	states := []breaker.State{breaker.StateClosed, breaker.StateOpen, breaker.StateHalfOpen}
	for i := range 7 { // closed→open, open→half-open, half-open→closed, …
		b.Record("flaky", states[i%3], states[(i+1)%3])
		clock.Advance(time.Second)
	}
	h := b.History("flaky")
	assert.Equal(t, 4, h.Dropped)
	require.Len(t, h.Transitions, 3)
	// The last three recorded: i = 6, 5, 4.
	for k, i := range []int{6, 5, 4} {
		tr := h.Transitions[k]
		assert.Equal(t, t0.Add(time.Duration(i)*time.Second), tr.At, "transition %d", i)
		assert.Equal(t, states[i%3], tr.From, "transition %d", i)
		assert.Equal(t, states[(i+1)%3], tr.To, "transition %d", i)
	}

	// Below the bound nothing is dropped, and the order is the same.
	b.Record("other", breaker.StateClosed, breaker.StateOpen)
	clock.Advance(time.Second)
	b.Record("other", breaker.StateOpen, breaker.StateHalfOpen)
	o := b.History("other")
	assert.Zero(t, o.Dropped)
	require.Len(t, o.Transitions, 2)
	assert.Equal(t, breaker.StateHalfOpen, o.Transitions[0].To)
	assert.Equal(t, breaker.StateOpen, o.Transitions[1].To)
}

// TestBreakersAgentBound: a new agent past the bound forgets the one
// whose last transition is the oldest, not the first one recorded.
func TestBreakersAgentBound(t *testing.T) {
	b := activity.NewBreakers(&activity.BreakersOptions{Agents: 3})
	b.Record("a", breaker.StateClosed, breaker.StateOpen)
	b.Record("b", breaker.StateClosed, breaker.StateOpen)
	b.Record("c", breaker.StateClosed, breaker.StateOpen)
	b.Record("a", breaker.StateOpen, breaker.StateHalfOpen) // a is now the newest
	b.Record("d", breaker.StateClosed, breaker.StateOpen)   // evicts b

	assert.Empty(t, b.History("b").Transitions, "b had the oldest last transition")
	assert.Len(t, b.History("a").Transitions, 2)
	assert.Len(t, b.History("c").Transitions, 1)
	assert.Len(t, b.History("d").Transitions, 1)

	b.Record("e", breaker.StateClosed, breaker.StateOpen) // evicts c
	assert.Empty(t, b.History("c").Transitions)
	kept := 0
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		if len(b.History(name).Transitions) > 0 {
			kept++
		}
	}
	assert.Equal(t, 3, kept)
}

// TestBreakersDefaults: the zero value and a nil options use the
// defaults; a nil *Breakers records nothing; invalid states are ignored.
func TestBreakersDefaults(t *testing.T) {
	for name, b := range map[string]*activity.Breakers{"zero": {}, "nil options": activity.NewBreakers(nil)} {
		t.Run(name, func(t *testing.T) {
			before := time.Now()
			for range activity.DefaultBreakerTransitions + 5 {
				b.Record("x", breaker.StateClosed, breaker.StateOpen)
			}
			h := b.History("x")
			assert.Len(t, h.Transitions, activity.DefaultBreakerTransitions)
			assert.Equal(t, 5, h.Dropped)
			assert.False(t, h.Transitions[0].At.Before(before), "stamped with time.Now")

			for i := range activity.DefaultBreakerAgents {
				b.Record(fmt.Sprintf("agent-%d", i), breaker.StateClosed, breaker.StateOpen)
			}
			assert.Empty(t, b.History("x").Transitions, "x was the oldest of DefaultBreakerAgents+1")
			assert.Len(t, b.History("agent-0").Transitions, 1)
		})
	}

	var none *activity.Breakers
	none.Record("x", breaker.StateClosed, breaker.StateOpen)
	assert.NotNil(t, none.History("x").Transitions)
	assert.Empty(t, none.History("x").Transitions)

	b := activity.NewBreakers(nil)
	b.Record("x", breaker.State(7), breaker.StateOpen)
	b.Record("x", breaker.StateOpen, breaker.State(-1))
	assert.Empty(t, b.History("x").Transitions)
	assert.NotNil(t, b.History("unknown").Transitions, "an empty list, not null, in JSON")
}

// TestBreakersHistoryIsACopy: what History returns does not change with
// later transitions, and encodes the states as words.
func TestBreakersHistoryIsACopy(t *testing.T) {
	b := activity.NewBreakers(&activity.BreakersOptions{Transitions: 2, Now: clocktest.New(t0).Now})
	b.Record("x", breaker.StateClosed, breaker.StateOpen)
	h := b.History("x")
	b.Record("x", breaker.StateOpen, breaker.StateHalfOpen)
	b.Record("x", breaker.StateHalfOpen, breaker.StateClosed)
	require.Len(t, h.Transitions, 1)
	assert.Equal(t, breaker.StateOpen, h.Transitions[0].To)

	out, err := json.Marshal(h.Transitions)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"at":"2026-12-02T18:00:00Z","from":"closed","to":"open"}]`, string(out))
}

// TestBreakersConcurrent: recording and reading from many goroutines
// (run with -race) keeps every bound.
func TestBreakersConcurrent(t *testing.T) {
	b := activity.NewBreakers(&activity.BreakersOptions{Transitions: 4, Agents: 8})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				name := fmt.Sprintf("agent-%d", (g*7+i)%16)
				b.Record(name, breaker.StateClosed, breaker.StateOpen)
				_ = b.History(name)
			}
		})
	}
	wg.Wait()
	kept := 0
	for i := range 16 {
		h := b.History(fmt.Sprintf("agent-%d", i))
		assert.LessOrEqual(t, len(h.Transitions), 4)
		if len(h.Transitions) > 0 {
			kept++
		}
	}
	assert.LessOrEqual(t, kept, 8)
	assert.Positive(t, kept)
}

// ExampleBreakers: fed by a breaker's OnStateChange, the history of an
// agent's breaker, newest first.
func ExampleBreakers() {
	clock := clocktest.New(t0)
	history := activity.NewBreakers(&activity.BreakersOptions{Now: clock.Now})
	br := breaker.New("billing", &breaker.Options{
		FailureThreshold: 1,
		ResetTimeout:     time.Minute,
		HalfOpenMaxCalls: 1,
		Now:              clock.Now,
		OnStateChange:    history.Record,
	})
	_, _ = breaker.Execute(br, func() (int, error) { return 0, fmt.Errorf("unreachable") })
	clock.Advance(time.Minute)
	_, _ = breaker.Execute(br, func() (int, error) { return 1, nil })

	for _, tr := range history.History("billing").Transitions {
		fmt.Println(tr.At.Format(time.TimeOnly), tr.From, "→", tr.To)
	}
	// Output:
	// 18:01:00 half-open → closed
	// 18:01:00 open → half-open
	// 18:00:00 closed → open
}
