//go:build !unix

package routing_test

import "time"

func lexProcessCPUTime() (time.Duration, bool) { return 0, false }
