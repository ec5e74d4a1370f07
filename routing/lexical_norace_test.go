//go:build !race

package routing_test

const lexRaceEnabled = false
