package breaker

import (
	"strconv"
	"testing"
)

// BenchmarkAllowDone is the cost the breaker adds to a call in the closed
// state: Allow plus done(nil), with the real clock.
func BenchmarkAllowDone(b *testing.B) {
	br := New("bench", nil)
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}

// BenchmarkAllowDoneParallel is BenchmarkAllowDone with every goroutine on
// the same breaker (one agent under load: the worst contention).
func BenchmarkAllowDoneParallel(b *testing.B) {
	br := New("bench", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := br.Allow()
			if err != nil {
				b.Error(err)
				return
			}
			done(nil)
		}
	})
}

// BenchmarkExecute is the closed-state cost of Execute.
func BenchmarkExecute(b *testing.B) {
	br := New("bench", nil)
	fn := func() (int, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Execute(br, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecuteParallel is BenchmarkExecute from every goroutine.
func BenchmarkExecuteParallel(b *testing.B) {
	br := New("bench", nil)
	fn := func() (int, error) { return 1, nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := Execute(br, fn); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAllowOpen is the cost of a refusal by an open breaker.
func BenchmarkAllowOpen(b *testing.B) {
	br := New("bench", &Options{FailureThreshold: 1})
	done, _ := br.Allow()
	done(errBoom)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkSetGetAllowDoneParallel is the per-call path of a delegation:
// look up the agent's breaker in a Set of 100, then Allow and done.
func BenchmarkSetGetAllowDoneParallel(b *testing.B) {
	s := NewSet(nil, nil)
	names := make([]string, 100)
	for i := range names {
		names[i] = "agent-" + strconv.Itoa(i)
		s.Get(names[i])
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			done, err := s.Get(names[i%len(names)]).Allow()
			if err != nil {
				b.Error(err)
				return
			}
			done(nil)
			i++
		}
	})
}
