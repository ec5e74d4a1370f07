//go:build race

package routing_test

// lexRaceEnabled: the race detector slows training tenfold.
const lexRaceEnabled = true
