//go:build !linux

package main

import "time"

// processCPU is not available on this platform.
func processCPU(int) (time.Duration, bool) { return 0, false }
