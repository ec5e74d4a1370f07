// Package storetest is the conformance suite for the store interfaces that
// the core packages declare, modelled on testing/slogtest. Every backend
// (store/memstore, store/boltstore, and any later one) runs it from its own
// tests:
//
//	func TestStore(t *testing.T) {
//		storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
//			s := memstore.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		}, &storetest.Options{ErrClosed: memstore.ErrClosed})
//	}
//
// There is one file and one Test… function per interface:
// [TestAgentStore] for [registry.Store], [TestDelegationStore] for
// [delegation.Store], [TestBreakerStore] for [breaker.Store],
// [TestSessionStore] for [session.Store] (and its optional
// [session.ActiveCounter]) and [TestAuditStore] for [audit.Store]. Each case runs as a subtest named
// after the rule it checks, against a fresh store from the factory, so a
// failure names the broken rule. The suite's own tests run it against
// stores with planted bugs and check that the guarding case fails.
//
// # What the suite allows
//
// The suite checks the contract a consumer relies on, not one backend's
// representation. A store may encode records (as JSON, say), so:
//
//   - time values are compared with [time.Time.Equal] after dropping the
//     location and monotonic clock reading: the instant, to the
//     nanosecond, must survive, the zone need not;
//   - a nil slice or map and an empty one are treated as equal;
//   - a delegation record's Result is compared as JSON (a store may
//     compact it or escape HTML characters).
//
// # Concurrency
//
// Every Test… function must be called from the test goroutine. Cases that
// check concurrency start their own goroutines and wait for them.
//
// # Errors
//
// The suite expects missing records to be reported with errors wrapping
// the interface's not-found sentinel ([registry.ErrNotFound],
// [delegation.ErrNotFound]), a done context to fail a call with the
// context's error, and — when the store has a Close() error method — every
// call after Close to fail, with an error wrapping [Options.ErrClosed]
// when that is set.
package storetest
