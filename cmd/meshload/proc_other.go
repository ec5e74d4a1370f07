//go:build !linux

package main

import "time"

// processCPU is not available on this platform.
func processCPU(int) (time.Duration, bool) { return 0, false }

// processRSS is not available on this platform.
func processRSS(int) (rss, anon uint64, ok bool) { return 0, 0, false }

// processFDs is not available on this platform.
func processFDs(int) (int, bool) { return 0, false }
