package main

import (
	"math"
	"os"
	"runtime/debug"
)

// frontEndHeap is the heap a front-end lets garbage grow to before it
// collects. A front-end keeps no state (its live heap is a few MiB), so
// with the default GOGC it would collect every few tool calls: each call
// allocates tens of KiB of JSON. Collecting at 32 MiB instead costs at
// most that much memory and saves a third of its CPU per call
// (docs/BENCHMARKS.md).
const frontEndHeap = 32 << 20

// gcTuned reports whether the operator set GOGC or GOMEMLIMIT, which then
// stay as they are.
func gcTuned() bool { return os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" }

// gcForFrontEnd collects only when the heap reaches frontEndHeap.
func gcForFrontEnd() {
	if gcTuned() {
		return
	}
	debug.SetMemoryLimit(frontEndHeap)
	debug.SetGCPercent(-1)
}

// gcForHolder restores the runtime's defaults: a holder's live heap grows
// with the mesh, and a fixed limit would make it collect without end.
func gcForHolder() {
	if gcTuned() {
		return
	}
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
}
