//go:build !linux

package main

import "time"

// processCPU is not available on this platform.
func processCPU(int) (time.Duration, bool) { return 0, false }

// processRSS is not available on this platform.
func processRSS(int) (uint64, bool) { return 0, false }

// processFDs is not available on this platform.
func processFDs(int) (int, bool) { return 0, false }
