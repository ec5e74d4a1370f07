package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// suiteCase is one conformance case of a suite over stores of type S.
type suiteCase[S any] struct {
	name string
	run  func(t *testing.T, s S)
}

// runSuite runs cases in order as subtests of t, each against a fresh
// store from open.
func runSuite[S any](t *testing.T, open func(t *testing.T) S, cases []suiteCase[S]) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

// errClosed returns o's ErrClosed; a nil o is the zero [Options].
func (o *Options) errClosed() error {
	if o == nil {
		return nil
	}
	return o.ErrClosed
}

// closerOf returns s's Close method, skipping the test when s has none.
func closerOf(t *testing.T, s any) closer {
	t.Helper()
	c, ok := s.(closer)
	if !ok {
		t.Skip("the store has no Close method")
	}
	return c
}

// closeTwice closes c, failing the test on error, and checks that a
// second Close succeeds too.
func closeTwice(t *testing.T, c closer) {
	t.Helper()
	require.NoError(t, c.Close())
	assert.NoError(t, c.Close(), "Close must be idempotent")
}

// afterCloseCheck returns a check that err, what op returned on a closed
// store, is an error, and one wrapping errClosed when that is not nil.
func afterCloseCheck(t *testing.T, errClosed error) func(op string, err error) {
	return func(op string, err error) {
		t.Helper()
		if assert.Error(t, err, "%s after Close", op) && errClosed != nil {
			assert.ErrorIs(t, err, errClosed, "%s after Close", op)
		}
	}
}

// closeWhileWriting closes s while writers call write(w, i), writer w's
// i-th write, in a loop until a call fails. Each call must either succeed
// or fail with the closed error (errClosed when not nil), none may hang,
// and a call that starts after Close returned must fail; what names the
// writes in that failure's message. It skips when s has no Close method.
func closeWhileWriting(t *testing.T, s any, errClosed error, what string, write func(w, i int) error) {
	c := closerOf(t, s)
	const writers = 8
	started := make(chan struct{}, writers)
	var closeReturned atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				afterClose := closeReturned.Load()
				err := write(w, i)
				if i == 0 {
					started <- struct{}{}
				}
				if err == nil && afterClose {
					t.Errorf("%s called after Close returned succeeded", what)
					return
				}
				if err != nil {
					if errClosed != nil {
						assert.ErrorIs(t, err, errClosed)
					}
					return
				}
			}
		})
	}
	for range writers {
		<-started
	}
	require.NoError(t, c.Close())
	closeReturned.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writers still blocked 30 s after Close")
	}
}

// workflowState returns a workflow state that holds every kind of JSON
// value, nested, for round-trip cases: a store must give it back as it
// was, numbers as float64.
func workflowState() map[string]any {
	return map[string]any{
		"step":   "approve",
		"count":  3.0,
		"done":   false,
		"none":   nil,
		"nested": map[string]any{"list": []any{"a", 1.5, nil, map[string]any{"deep": true}}},
	}
}
