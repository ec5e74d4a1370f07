package session

import "testing"

// idleStore is a Store no test call reaches: a sweeper at the default
// interval does not run within the test.
type idleStore struct{ Store }

// The zero SweepInterval means the default, as in every package of the
// mesh; only a negative one leaves sweeping to the host.
func TestSweepIntervalZeroValue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    *Options
		sweeper bool
	}{
		{"nil options", nil, true},
		{"zero", &Options{}, true},
		{"negative", &Options{SweepInterval: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManager(idleStore{}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.done != nil; got != tc.sweeper {
				t.Errorf("sweeper goroutine started: %v, want %v", got, tc.sweeper)
			}
		})
	}
}
