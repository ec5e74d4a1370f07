package logtest_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/internal/harness/logtest"
)

// TestBufferConcurrentWrites writes from several goroutines while reading:
// under -race, a Buffer must be safe for that, and must lose no write.
func TestBufferConcurrentWrites(t *testing.T) {
	var b logtest.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "x\n"); got != 800 {
		t.Fatalf("got %d lines, want 800", got)
	}
}
