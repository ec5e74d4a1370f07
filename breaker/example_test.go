package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/breaker"
)

// Wrap each call to an agent with Execute. After FailureThreshold
// consecutive failures the breaker opens and refuses calls, without making
// them, until it half-opens; then successful probes close it.
func Example() {
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	b := breaker.New("finance", &breaker.Options{
		FailureThreshold: 3,
		HalfOpenMaxCalls: 1,
		Now:              func() time.Time { return now }, // a fake clock
		OnStateChange: func(name string, from, to breaker.State) {
			fmt.Printf("  [%s: %s → %s]\n", name, from, to)
		},
	})
	agentDown := func() (string, error) { return "", errors.New("connection refused") }
	agentUp := func() (string, error) { return "budget: 1.2M", nil }

	for i := 1; i <= 4; i++ {
		_, err := breaker.Execute(b, agentDown)
		fmt.Printf("call %d: %v\n", i, err)
	}

	_, err := breaker.Execute(b, agentUp)
	var open *breaker.OpenError
	if errors.As(err, &open) {
		fmt.Println("agent unavailable, retry at", open.Until.Format(time.TimeOnly))
	}

	now = now.Add(30 * time.Second) // the open period is over
	reply, err := breaker.Execute(b, agentUp)
	fmt.Println(reply, err, b.State())
	// Output:
	// call 1: connection refused
	// call 2: connection refused
	//   [finance: closed → open]
	// call 3: connection refused
	// call 4: breaker: "finance" is open until 2025-03-14T12:00:30Z
	// agent unavailable, retry at 12:00:30
	//   [finance: open → half-open]
	//   [finance: half-open → closed]
	// budget: 1.2M <nil> closed
}

// Use Allow when the call cannot be wrapped in a closure, for example when
// its outcome is only known after a streamed reply ends. done must be
// called exactly once for every admitted call.
func ExampleBreaker_Allow() {
	b := breaker.New("search", nil)

	done, err := b.Allow()
	if err != nil {
		fmt.Println("refused:", err) // an *OpenError or ErrTooManyRequests
		return
	}
	streamErr := error(nil) // ... read the stream, keep its error ...
	done(streamErr)

	fmt.Println(b.State())
	// Output:
	// closed
}

// A Set holds one breaker per agent. With a Store (nil here) it persists
// every transition and Restore reloads them at start.
func ExampleSet() {
	set := breaker.NewSet(nil, &breaker.Options{FailureThreshold: 1})

	_, _ = breaker.Execute(set.Get("hr"), func() (int, error) { return 0, errors.New("503") })
	_, _ = breaker.Execute(set.Get("finance"), func() (int, error) { return 42, nil })

	states := set.States()
	fmt.Println("hr:", states["hr"].State, "finance:", states["finance"].State)

	_, err := breaker.Execute(set.Get("hr"), func() (int, error) { return 0, nil })
	fmt.Println(errors.Is(err, breaker.ErrOpen))
	// Output:
	// hr: open finance: closed
	// true
}
