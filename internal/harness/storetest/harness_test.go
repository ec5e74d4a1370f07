package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// openMemstore returns a fresh memstore closed at the end of t.
func openMemstore(t *testing.T) *memstore.Store {
	s := memstore.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// memstoreOptions tells the suites about memstore.
var memstoreOptions = &storetest.Options{ErrClosed: memstore.ErrClosed}

// envBroken names the bug a broken-store child test plants in its store.
const envBroken = "STORETEST_BROKEN_STORE"

// brokenChildBug returns the bug a broken-store child test is to plant,
// skipping t unless it was started as the child of parent.
func brokenChildBug(t *testing.T, parent string) string {
	bug := os.Getenv(envBroken)
	if bug == "" {
		t.Skip("only runs as the child of " + parent)
	}
	return bug
}

// runBrokenChild runs test child of this binary with
// $STORETEST_BROKEN_STORE set to bug, limited to the suite case named by
// only when that is not empty, and returns its output and error.
func runBrokenChild(child, only, bug string) ([]byte, error) {
	run := "-test.run=^" + child + "$"
	if only != "" {
		run += "/^" + only + "$"
	}
	cmd := exec.Command(os.Args[0], run, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envBroken+"="+bug)
	return cmd.CombinedOutput()
}

// checkSuiteCatchesBugs checks a suite itself: for each planted bug of
// bugs (bug → the case that guards the broken rule), it runs the test
// child, which runs the suite against a store with that bug, in a child
// process (the suite is meant to fail there), and expects the guarding
// case to fail; a "control" subtest expects the bug-free store to pass.
// With onlyGuard the child runs only the guarding case, which keeps the
// test quick under -race; else it runs the whole suite.
func checkSuiteCatchesBugs(t *testing.T, child string, bugs map[string]string, onlyGuard bool) {
	for bug, failing := range bugs {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			only := ""
			if onlyGuard {
				only = failing
			}
			out, err := runBrokenChild(child, only, bug)
			require.Error(t, err, "the suite passed a store with bug %q:\n%s", bug, out)
			assert.Contains(t, string(out), "--- FAIL: "+child+"/"+failing+" ",
				"bug %q must fail case %s:\n%s", bug, failing, out)
		})
	}
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		out, err := runBrokenChild(child, "", "none")
		require.NoError(t, err, "the bug-free store must pass:\n%s", out)
	})
}

var errBrokenClosed = errors.New("broken: closed")

// brokenOptions tells the suites about the broken stores.
var brokenOptions = &storetest.Options{ErrClosed: errBrokenClosed}

// brokenBase is what every broken store shares: its bug, its lock and its
// closed flag, with the bugs "close-ignored" and "ignores-context".
type brokenBase struct {
	bug    string
	mu     sync.Mutex
	closed bool
}

// check returns the error a call with ctx must fail with, if any. The
// caller holds mu.
func (s *brokenBase) check(ctx context.Context) error {
	if s.closed && s.bug != "close-ignored" {
		return errBrokenClosed
	}
	if s.bug != "ignores-context" {
		return ctx.Err()
	}
	return nil
}

// notFound is the error of a call on a missing key: sentinel wrapped, or
// with the bug "plain-not-found" an error that is not it.
func (s *brokenBase) notFound(sentinel error) error {
	if s.bug == "plain-not-found" {
		return errors.New("not found")
	}
	return fmt.Errorf("broken: %w", sentinel)
}

// callUnlocked is the bug "lost-updates" of a broken store whose caller
// holds s.mu: it releases s.mu, yields, calls fn, yields again so that
// concurrent updates interleave, and takes s.mu back before it returns
// fn's results.
func callUnlocked[T any](s *brokenBase, fn func() (T, error)) (T, error) {
	s.mu.Unlock()
	runtime.Gosched()
	next, err := fn()
	runtime.Gosched()
	s.mu.Lock()
	return next, err
}

func (s *brokenBase) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
