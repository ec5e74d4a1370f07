package clocktest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := clocktest.New(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("after 10 advances Now = %v, want %v", got, want)
	}
}
