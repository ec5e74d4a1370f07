package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGCRoles(t *testing.T) {
	if gcTuned() {
		t.Skip("GOGC or GOMEMLIMIT is set: the roles leave the runtime as configured")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	gcForFrontEnd()
	assert.Equal(t, -1, debug.SetGCPercent(-1), "a front-end collects by its memory limit only")
	assert.Equal(t, int64(frontEndHeap), debug.SetMemoryLimit(-1))

	gcForHolder()
	assert.Equal(t, 100, debug.SetGCPercent(100), "a holder collects as the runtime's default")
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
}
