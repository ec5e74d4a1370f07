package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/session"
)

// TestSessionStore runs the conformance cases of [session.Store] as
// subtests of t. open must return a fresh, empty store for the subtest it
// is given and arrange its cleanup with t.Cleanup; it is called once per
// case. A nil opts means the zero [Options].
//
// Besides the round trip of every field, the suite checks the store's
// invariants: at most one active session per user under concurrent
// creators, no update lost under concurrent writers, closing and sweeping
// free the user's slot, writes that would break an invariant fail with
// [session.ErrConflict] and write nothing. The store must not look at the
// clock: an active session whose ExpiresAt has passed is still in its
// user's slot until the sweep deletes it. The sweep visits each active
// session it deletes once, after the deletion committed, outside the
// store's locks, and no closed one. A store that implements the
// optional [session.ActiveCounter] must count exactly the occupied slots.
func TestSessionStore(t *testing.T, open func(t *testing.T) session.Store, opts *Options) {
	errClosed := opts.errClosed()
	cases := []suiteCase[session.Store]{
		{"GetMissingIsNotFound", testSessionGetMissing},
		{"EveryFieldRoundTrips", testSessionRoundTrip},
		{"FreeSlotIsNil", testSessionFreeSlot},
		{"ReturningNothingWritesNothing", testSessionNothing},
		{"OneActivePerUserUnderConcurrentCreators", testSessionOneActive},
		{"UsersAreIndependent", testSessionUsersIndependent},
		{"PrincipalsHaveSlotsOfTheirOwn", testSessionPrincipals},
		{"ConcurrentUpdatesLoseNothing", testSessionConcurrentUpdates},
		{"ClosingFreesTheSlot", testSessionCloseFreesSlot},
		{"ReplaceInOneWrite", testSessionReplace},
		{"RefusesWritesBreakingInvariants", testSessionInvariants},
		{"FnErrorWritesNothing", testSessionFnError},
		{"StoreIgnoresTheClock", testSessionNoClock},
		{"SweepDeletesExpired", testSessionSweep},
		{"SweepMany", testSessionSweepMany},
		{"SweepVisitsExpiredActive", testSessionSweepVisits},
		{"SweepVisitsOnceUnderConcurrentSweeps", testSessionSweepVisitsOnce},
		{"ChurnKeepsOneActivePerUser", testSessionChurn},
		{"ReturnsCopies", testSessionCopies},
		{"CountsActiveSessions", testSessionCount},
		{"DoneContextFails", testSessionDoneContext},
		{"CallsAfterCloseFail", func(t *testing.T, s session.Store) { testSessionClose(t, s, errClosed) }},
	}
	runSuite(t, open, cases)
}

// sessionBase is the time the session cases are built around.
var sessionBase = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// sessionIDs numbers the sessions the suite makes, so that every id is
// unique across cases and goroutines.
var sessionIDs atomic.Uint64

func nextSessionID() string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", sessionIDs.Add(1))
}

// activeSession returns a new active session of user, with the fields a
// new session always has, expiring at expires.
func activeSession(user string, expires time.Time) session.Session {
	return session.Session{
		ID:          nextSessionID(),
		UserID:      user,
		Status:      session.StatusActive,
		ActiveAgent: "finance",
		CreatedAt:   sessionBase,
		UpdatedAt:   sessionBase,
		ExpiresAt:   expires,
	}
}

// fullSession returns an active session of user with every field set,
// times with nanoseconds in a non-UTC zone.
func fullSession(user string) session.Session {
	zone := time.FixedZone("IST", 5*3600+1800)
	created := time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone)
	return session.Session{
		ID:          nextSessionID(),
		UserID:      user,
		EmployeeID:  "E-1234 ✓",
		Status:      session.StatusActive,
		ActiveAgent: "finance",
		TurnHistory: []session.Turn{
			{Role: session.RoleUser, Content: "What is my budget?\nunicode: café ✓ <b>&</b>", Timestamp: created, IntentSummary: "budget lookup"},
			{Role: session.RoleAgent, Content: `{"not": "parsed"}`, Timestamp: created.Add(time.Nanosecond), Agent: "finance"},
			{Role: session.RoleUser, Content: "", Timestamp: created.Add(time.Second).In(time.UTC)},
		},
		WorkflowState: workflowState(),
		PendingClarification: &session.Clarification{
			SuggestedAgent: "hr",
			OriginalInput:  "leave policy?",
			Expires:        created.Add(5*time.Minute + 7),
		},
		Metadata:  map[string]any{"entry_point": "slack", "tags": []any{"x", 2.0}},
		CreatedAt: created,
		UpdatedAt: created.Add(1500 * time.Millisecond),
		ExpiresAt: created.Add(30 * time.Minute).In(time.UTC),
	}
}

// normalizeSession returns a deep copy of s in the form the suite
// compares: times in UTC without monotonic reading, empty slices and maps
// as nil.
func normalizeSession(s session.Session) session.Session {
	s = s.Clone()
	s.CreatedAt, s.UpdatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC(), s.ExpiresAt.UTC()
	s.TurnHistory = nilIfEmpty(s.TurnHistory)
	for i := range s.TurnHistory {
		s.TurnHistory[i].Timestamp = s.TurnHistory[i].Timestamp.UTC()
	}
	s.WorkflowState = nilIfEmptyMap(s.WorkflowState)
	s.Metadata = nilIfEmptyMap(s.Metadata)
	if s.PendingClarification != nil {
		s.PendingClarification.Expires = s.PendingClarification.Expires.UTC()
	}
	return s
}

// assertSession checks that got is want, as normalizeSession compares
// them.
func assertSession(t *testing.T, want, got session.Session) bool {
	t.Helper()
	return assert.Equal(t, normalizeSession(want), normalizeSession(got), "session %s", want.ID)
}

// createSession stores sess as its user's active session, failing the test
// if the user already has one or the write fails.
func createSession(t *testing.T, s session.Store, sess session.Session) {
	t.Helper()
	err := s.UpdateActiveSession(t.Context(), sess.Slot(), func(cur *session.Session) (*session.Session, *session.Session, error) {
		if cur != nil {
			return nil, nil, fmt.Errorf("user already has active session %s", cur.ID)
		}
		next := sess.Clone()
		return nil, &next, nil
	})
	require.NoError(t, err)
}

// getSession returns the session id, failing the test on error.
func getSession(t *testing.T, s session.Store, id string) session.Session {
	t.Helper()
	got, err := s.GetSession(t.Context(), id)
	require.NoError(t, err)
	return got
}

// activeID returns the id of user's active session, or "" when the slot is
// free; it fails the test on any other error.
func activeID(t *testing.T, s session.Store, user string) string {
	t.Helper()
	got, err := s.GetActiveSession(t.Context(), user)
	if errors.Is(err, session.ErrNotFound) {
		return ""
	}
	require.NoError(t, err)
	assert.Equal(t, user, got.UserID, "the active session of a user belongs to that user")
	assert.Equal(t, session.StatusActive, got.Status, "the session in a user's slot is active")
	return got.ID
}

// setSession writes fn's change to session id, failing the test on error.
func setSession(t *testing.T, s session.Store, id string, change func(s *session.Session)) {
	t.Helper()
	err := s.UpdateSession(t.Context(), id, func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		change(&next)
		return &next, nil
	})
	require.NoError(t, err)
}

// closeSession closes session id with status.
func closeSession(t *testing.T, s session.Store, id string, status session.Status) {
	t.Helper()
	setSession(t, s, id, func(s *session.Session) { s.Status = status })
}

func testSessionGetMissing(t *testing.T, s session.Store) {
	_, err := s.GetSession(t.Context(), "missing")
	assert.ErrorIs(t, err, session.ErrNotFound, "GetSession")
	_, err = s.GetActiveSession(t.Context(), "nobody")
	assert.ErrorIs(t, err, session.ErrNotFound, "GetActiveSession")
	called := false
	err = s.UpdateSession(t.Context(), "missing", func(cur *session.Session) (*session.Session, error) {
		called = true
		return cur, nil
	})
	assert.ErrorIs(t, err, session.ErrNotFound, "UpdateSession")
	assert.False(t, called, "UpdateSession must not call fn for a missing session")

	sess := activeSession("alice", sessionBase.Add(time.Hour))
	createSession(t, s, sess)
	_, err = s.GetSession(t.Context(), sess.ID[:len(sess.ID)-1])
	assert.ErrorIs(t, err, session.ErrNotFound, "ids are matched exactly, not by prefix")
	_, err = s.GetActiveSession(t.Context(), "Alice")
	assert.ErrorIs(t, err, session.ErrNotFound, "user ids are case-sensitive")
	_, err = s.GetActiveSession(t.Context(), "alic")
	assert.ErrorIs(t, err, session.ErrNotFound, "user ids are matched exactly, not by prefix")
}

func testSessionRoundTrip(t *testing.T, s session.Store) {
	full := fullSession("alice")
	full.UpdatedAt = time.Now() // with a monotonic clock reading
	createSession(t, s, full)
	assertSession(t, full, getSession(t, s, full.ID))
	active, err := s.GetActiveSession(t.Context(), "alice")
	require.NoError(t, err)
	assertSession(t, full, active)
	got := getSession(t, s, full.ID)
	assert.Equal(t, full.CreatedAt.Nanosecond(), got.CreatedAt.Nanosecond(), "nanoseconds must survive")
	assert.Equal(t, "budget lookup", got.TurnHistory[0].IntentSummary)
	assert.Empty(t, got.TurnHistory[1].IntentSummary)
	assert.Equal(t, "finance", got.TurnHistory[1].Agent)

	// The fewest fields: no turns, state, clarification or metadata.
	minimal := activeSession("bob", sessionBase.Add(time.Hour))
	createSession(t, s, minimal)
	got = getSession(t, s, minimal.ID)
	assertSession(t, minimal, got)
	assert.Nil(t, got.PendingClarification)

	// Every closed status round-trips, and so does a user id with
	// characters that need care in keys.
	for _, st := range []session.Status{session.StatusCompleted, session.StatusAbandoned, session.StatusError} {
		user := "user/with spaces/ünïcode/\"" + string(st) + "\""
		sess := fullSession(user)
		createSession(t, s, sess)
		assert.Equal(t, sess.ID, activeID(t, s, user))
		sess.Status = st
		sess.PendingClarification = nil
		sess.UpdatedAt = sess.UpdatedAt.Add(time.Minute)
		sess.ExpiresAt = sess.UpdatedAt.Add(24 * time.Hour)
		setSession(t, s, sess.ID, func(x *session.Session) {
			x.Status = st
			x.PendingClarification = nil
			x.UpdatedAt = sess.UpdatedAt
			x.ExpiresAt = sess.ExpiresAt
		})
		assert.Empty(t, activeID(t, s, user))
		assertSession(t, sess, getSession(t, s, sess.ID))
	}
}

func testSessionFreeSlot(t *testing.T, s session.Store) {
	calls := 0
	err := s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		calls++
		assert.Nil(t, cur, "a user without sessions has a free slot")
		return nil, nil, nil
	})
	require.NoError(t, err)
	assert.Positive(t, calls)
	// Another user's session does not fill alice's slot.
	createSession(t, s, activeSession("bob", sessionBase.Add(time.Hour)))
	err = s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		assert.Nil(t, cur, "bob's session is not alice's")
		return nil, nil, nil
	})
	require.NoError(t, err)
}

func testSessionNothing(t *testing.T, s session.Store) {
	sess := fullSession("alice")
	createSession(t, s, sess)
	err := s.UpdateSession(t.Context(), sess.ID, func(cur *session.Session) (*session.Session, error) {
		cur.ActiveAgent = "changed in place" // must not be stored: fn returned nil
		return nil, nil
	})
	require.NoError(t, err)
	err = s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		require.NotNil(t, cur)
		assertSession(t, sess, *cur)
		return nil, nil, nil
	})
	require.NoError(t, err)
	assertSession(t, sess, getSession(t, s, sess.ID))
	assert.Equal(t, sess.ID, activeID(t, s, "alice"))
}

// getOrCreate is the get-or-create the Manager runs: it returns the user's
// active session, or stores candidate. created reports whether candidate
// was stored (the last call of fn decides).
func getOrCreate(ctx context.Context, s session.Store, candidate session.Session) (id string, created bool, err error) {
	err = s.UpdateActiveSession(ctx, candidate.UserID, func(cur *session.Session) (*session.Session, *session.Session, error) {
		if cur != nil {
			id, created = cur.ID, false
			return nil, nil, nil
		}
		runtime.Gosched() // widen the window a store must guard
		next := candidate.Clone()
		id, created = next.ID, true
		return nil, &next, nil
	})
	return id, created, err
}

func testSessionOneActive(t *testing.T, s session.Store) {
	const creators = 32
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		ids     [creators]string
		made    [creators]string
		created atomic.Int32
	)
	for g := range creators {
		wg.Go(func() {
			candidate := activeSession("alice", sessionBase.Add(time.Hour))
			made[g] = candidate.ID
			<-start
			id, ok, err := getOrCreate(t.Context(), s, candidate)
			if !assert.NoError(t, err) {
				return
			}
			ids[g] = id
			if ok {
				created.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	require.Equal(t, int32(1), created.Load(), "exactly one of %d concurrent creators must create the session", creators)
	winner := activeID(t, s, "alice")
	require.NotEmpty(t, winner)
	for g := range creators {
		assert.Equal(t, winner, ids[g], "creator %d must end with the one session", g)
		if made[g] != winner {
			_, err := s.GetSession(t.Context(), made[g])
			assert.ErrorIs(t, err, session.ErrNotFound, "creator %d's candidate must not be stored", g)
		}
	}
}

func testSessionUsersIndependent(t *testing.T, s session.Store) {
	const users, creators = 8, 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // user → ids returned
	for u := range users {
		for range creators {
			wg.Go(func() {
				user := fmt.Sprintf("user-%d", u)
				id, _, err := getOrCreate(t.Context(), s, activeSession(user, sessionBase.Add(time.Hour)))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if seen[user] == nil {
					seen[user] = map[string]bool{}
				}
				seen[user][id] = true
			})
		}
	}
	wg.Wait()
	all := map[string]bool{}
	for u := range users {
		user := fmt.Sprintf("user-%d", u)
		require.Len(t, seen[user], 1, "%s: every creator must see the same session", user)
		for id := range seen[user] {
			assert.Equal(t, id, activeID(t, s, user))
			assert.Equal(t, user, getSession(t, s, id).UserID)
			assert.False(t, all[id], "two users share session %s", id)
			all[id] = true
		}
	}
}

// The same user id of two principals is two users: two slots, each
// taken, freed and looked up on its own; a session's principal never
// changes.
func testSessionPrincipals(t *testing.T, s session.Store) {
	plain := activeSession("alice", sessionBase.Add(time.Hour))
	teamA := activeSession("alice", sessionBase.Add(time.Hour))
	teamA.Principal = "team-a"
	createSession(t, s, plain)
	createSession(t, s, teamA)
	assert.Equal(t, plain.ID, activeID(t, s, "alice"))
	got, err := s.GetActiveSession(t.Context(), session.SlotKey("team-a", "alice"))
	require.NoError(t, err)
	assert.Equal(t, teamA.ID, got.ID)
	assert.Equal(t, "team-a", got.Principal)
	_, err = s.GetActiveSession(t.Context(), session.SlotKey("team-b", "alice"))
	assert.ErrorIs(t, err, session.ErrNotFound, "team-b's alice has no session")

	err = s.UpdateSession(t.Context(), teamA.ID, func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		next.Principal = "team-b"
		return &next, nil
	})
	assert.ErrorIs(t, err, session.ErrConflict, "the principal cannot change")

	setSession(t, s, teamA.ID, func(x *session.Session) { x.Status = session.StatusCompleted })
	_, err = s.GetActiveSession(t.Context(), session.SlotKey("team-a", "alice"))
	assert.ErrorIs(t, err, session.ErrNotFound, "closing team-a's session frees its slot")
	assert.Equal(t, plain.ID, activeID(t, s, "alice"), "and only its slot")
}

func testSessionConcurrentUpdates(t *testing.T, s session.Store) {
	sess := activeSession("alice", sessionBase.Add(time.Hour))
	createSession(t, s, sess)
	// Half the writers go through UpdateSession, half through
	// UpdateActiveSession (an update of the session in the slot): both are
	// read-modify-writes of the same record.
	const writers, each = 16, 10
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				change := func(cur *session.Session) *session.Session {
					next := cur.Clone()
					runtime.Gosched() // widen the window a store must guard
					next.TurnHistory = append(next.TurnHistory, session.Turn{
						Role: session.RoleUser, Content: fmt.Sprintf("%02d-%02d", g, i), Timestamp: sessionBase,
					})
					next.ExpiresAt = next.ExpiresAt.Add(time.Second) // moves the expiry index entry
					return &next
				}
				var err error
				if g%2 == 0 {
					err = s.UpdateSession(t.Context(), sess.ID, func(cur *session.Session) (*session.Session, error) {
						return change(cur), nil
					})
				} else {
					err = s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
						if cur == nil {
							return nil, nil, errors.New("the session left the slot")
						}
						return change(cur), nil, nil
					})
				}
				assert.NoError(t, err)
				if i%3 == 0 {
					_, err := s.GetSession(t.Context(), sess.ID)
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	got := getSession(t, s, sess.ID)
	require.Len(t, got.TurnHistory, writers*each, "every concurrent update must land")
	last := map[int]int{}
	seen := map[string]bool{}
	for _, turn := range got.TurnHistory {
		var g, i int
		_, err := fmt.Sscanf(turn.Content, "%02d-%02d", &g, &i)
		require.NoError(t, err)
		assert.False(t, seen[turn.Content], "turn %s twice", turn.Content)
		seen[turn.Content] = true
		if prev, ok := last[g]; ok {
			assert.Greater(t, i, prev, "writer %d's updates out of order", g)
		}
		last[g] = i
	}
	assert.True(t, sess.ExpiresAt.Add(writers*each*time.Second).Equal(got.ExpiresAt))
	assert.Equal(t, sess.ID, activeID(t, s, "alice"))

	// The expiry entry moved with every write: a sweep just before the
	// final expiry deletes nothing, one at it deletes the session.
	n, err := s.DeleteExpiredSessions(t.Context(), got.ExpiresAt.Add(-time.Nanosecond), nil)
	require.NoError(t, err)
	assert.Zero(t, n, "stale expiry entries must not sweep a session")
	n, err = s.DeleteExpiredSessions(t.Context(), got.ExpiresAt, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func testSessionCloseFreesSlot(t *testing.T, s session.Store) {
	for _, st := range []session.Status{session.StatusCompleted, session.StatusAbandoned, session.StatusError} {
		t.Run(string(st), func(t *testing.T) {
			user := "alice-" + string(st)
			a := activeSession(user, sessionBase.Add(time.Hour))
			createSession(t, s, a)
			closeSession(t, s, a.ID, st)
			assert.Empty(t, activeID(t, s, user), "closing %s must free the slot", st)
			assert.Equal(t, st, getSession(t, s, a.ID).Status, "a closed session stays readable")

			// The slot takes a new session, and the closed one can still
			// be updated (not reactivated) without touching the new one's
			// slot.
			b := activeSession(user, sessionBase.Add(time.Hour))
			id, created, err := getOrCreate(t.Context(), s, b)
			require.NoError(t, err)
			assert.True(t, created, "the freed slot must take a new session")
			assert.Equal(t, b.ID, id)
			setSession(t, s, a.ID, func(x *session.Session) {
				x.Status = session.StatusCompleted
				x.ExpiresAt = sessionBase.Add(2 * time.Hour)
			})
			assert.Equal(t, b.ID, activeID(t, s, user), "updating a closed session must not touch the slot")
		})
	}
}

func testSessionReplace(t *testing.T, s session.Store) {
	a := fullSession("alice")
	createSession(t, s, a)
	b := activeSession("alice", sessionBase.Add(2*time.Hour))
	b.TurnHistory = slices.Clone(a.TurnHistory)
	err := s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		require.NotNil(t, cur)
		upd := cur.Clone()
		upd.Status = session.StatusAbandoned
		upd.PendingClarification = nil
		next := b.Clone()
		return &upd, &next, nil
	})
	require.NoError(t, err)
	assert.Equal(t, b.ID, activeID(t, s, "alice"))
	got := getSession(t, s, a.ID)
	assert.Equal(t, session.StatusAbandoned, got.Status)
	assert.Nil(t, got.PendingClarification)
	assertSession(t, b, getSession(t, s, b.ID))

	// An update that keeps the current session active, with no new one,
	// is a plain update.
	err = s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		upd := cur.Clone()
		upd.ActiveAgent = "hr"
		return &upd, nil, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "hr", getSession(t, s, b.ID).ActiveAgent)
	assert.Equal(t, b.ID, activeID(t, s, "alice"))
}

func testSessionInvariants(t *testing.T, s session.Store) {
	a := fullSession("alice")
	createSession(t, s, a)
	closed := activeSession("carol", sessionBase.Add(time.Hour))
	createSession(t, s, closed)
	closeSession(t, s, closed.ID, session.StatusCompleted)
	closed.Status = session.StatusCompleted

	active := func(mutate func(cur, next *session.Session) (upd, nxt *session.Session)) func(cur *session.Session) (*session.Session, *session.Session, error) {
		return func(cur *session.Session) (*session.Session, *session.Session, error) {
			next := activeSession("alice", sessionBase.Add(time.Hour))
			upd, nxt := mutate(cur, &next)
			return upd, nxt, nil
		}
	}
	withStatus := func(s *session.Session, st session.Status) *session.Session {
		c := s.Clone()
		c.Status = st
		return &c
	}
	refusedActive := []struct {
		name string
		user string
		fn   func(cur *session.Session) (*session.Session, *session.Session, error)
	}{
		{"second active session", "alice", active(func(_, next *session.Session) (*session.Session, *session.Session) {
			return nil, next
		})},
		{"second active session, current kept active", "alice", active(func(cur, next *session.Session) (*session.Session, *session.Session) {
			return withStatus(cur, session.StatusActive), next
		})},
		{"update changes the id", "alice", active(func(cur, _ *session.Session) (*session.Session, *session.Session) {
			c := cur.Clone()
			c.ID = "other-id"
			return &c, nil
		})},
		{"update changes the user", "alice", active(func(cur, _ *session.Session) (*session.Session, *session.Session) {
			c := cur.Clone()
			c.UserID = "mallory"
			return &c, nil
		})},
		{"new session reuses the current id", "alice", active(func(cur, next *session.Session) (*session.Session, *session.Session) {
			next.ID = cur.ID
			return withStatus(cur, session.StatusAbandoned), next
		})},
		{"new session reuses a stored id", "alice", active(func(cur, next *session.Session) (*session.Session, *session.Session) {
			next.ID = closed.ID
			return withStatus(cur, session.StatusAbandoned), next
		})},
		{"new session of another user", "dave", active(func(_, next *session.Session) (*session.Session, *session.Session) {
			return nil, next // next.UserID is alice
		})},
		{"new session not active", "dave", func(*session.Session) (*session.Session, *session.Session, error) {
			next := activeSession("dave", sessionBase.Add(time.Hour))
			next.Status = session.StatusCompleted
			return nil, &next, nil
		}},
		{"update with a free slot", "dave", func(*session.Session) (*session.Session, *session.Session, error) {
			c := closed.Clone()
			c.UserID = "dave"
			return &c, nil, nil
		}},
	}
	for _, c := range refusedActive {
		err := s.UpdateActiveSession(t.Context(), c.user, c.fn)
		assert.ErrorIs(t, err, session.ErrConflict, "UpdateActiveSession: %s", c.name)
	}
	refusedUpdate := []struct {
		name string
		id   string
		fn   func(cur *session.Session)
	}{
		{"changes the id", a.ID, func(cur *session.Session) { cur.ID = "other-id" }},
		{"changes the user", a.ID, func(cur *session.Session) { cur.UserID = "mallory" }},
		{"reactivates a closed session", closed.ID, func(cur *session.Session) { cur.Status = session.StatusActive }},
	}
	for _, c := range refusedUpdate {
		err := s.UpdateSession(t.Context(), c.id, func(cur *session.Session) (*session.Session, error) {
			next := cur.Clone()
			c.fn(&next)
			return &next, nil
		})
		assert.ErrorIs(t, err, session.ErrConflict, "UpdateSession: %s", c.name)
	}

	// Nothing of the refused writes was stored.
	assertSession(t, a, getSession(t, s, a.ID))
	assertSession(t, closed, getSession(t, s, closed.ID))
	assert.Equal(t, a.ID, activeID(t, s, "alice"))
	assert.Empty(t, activeID(t, s, "carol"))
	assert.Empty(t, activeID(t, s, "dave"))
	assert.Empty(t, activeID(t, s, "mallory"))
	_, err := s.GetSession(t.Context(), "other-id")
	assert.ErrorIs(t, err, session.ErrNotFound)
}

func testSessionFnError(t *testing.T, s session.Store) {
	a := fullSession("alice")
	createSession(t, s, a)
	errFn := errors.New("fn refused")
	err := s.UpdateSession(t.Context(), a.ID, func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		next.Status = session.StatusCompleted
		return &next, errFn
	})
	assert.Same(t, errFn, err, "UpdateSession must return fn's error unchanged")
	err = s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		upd := cur.Clone()
		upd.Status = session.StatusAbandoned
		next := activeSession("alice", sessionBase.Add(time.Hour))
		return &upd, &next, errFn
	})
	assert.Same(t, errFn, err, "UpdateActiveSession must return fn's error unchanged")
	err = s.UpdateActiveSession(t.Context(), "bob", func(*session.Session) (*session.Session, *session.Session, error) {
		next := activeSession("bob", sessionBase.Add(time.Hour))
		return nil, &next, errFn
	})
	assert.Same(t, errFn, err)
	assertSession(t, a, getSession(t, s, a.ID))
	assert.Equal(t, a.ID, activeID(t, s, "alice"))
	assert.Empty(t, activeID(t, s, "bob"))
}

func testSessionNoClock(t *testing.T, s session.Store) {
	// Expired long ago, by any clock: the store still holds it in the
	// slot, for the Manager to decide.
	old := activeSession("alice", time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	createSession(t, s, old)
	assert.Equal(t, old.ID, activeID(t, s, "alice"))
	err := s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		if assert.NotNil(t, cur, "an expired active session is still in its slot") {
			assert.Equal(t, old.ID, cur.ID)
		}
		return nil, nil, nil
	})
	require.NoError(t, err)
	// A zero expiry is stored as such.
	zero := activeSession("bob", time.Time{})
	createSession(t, s, zero)
	assert.True(t, getSession(t, s, zero.ID).ExpiresAt.IsZero())
}

func testSessionSweep(t *testing.T, s session.Store) {
	now := sessionBase
	mk := func(user string, expires time.Time) session.Session {
		sess := activeSession(user, expires)
		createSession(t, s, sess)
		return sess
	}
	expiredActive := mk("a", now.Add(-time.Second))
	liveActive := mk("b", now.Add(time.Second))
	expiredClosed := mk("c", now.Add(-time.Hour))
	closeSession(t, s, expiredClosed.ID, session.StatusCompleted)
	atNow := mk("d", now) // ExpiresAt == now: expired
	closeSession(t, s, atNow.ID, session.StatusAbandoned)
	slid := mk("e", now.Add(-time.Minute)) // slid into the future
	setSession(t, s, slid.ID, func(x *session.Session) { x.ExpiresAt = now.Add(time.Minute) })
	shortened := mk("f", now.Add(time.Hour)) // closed, retention already over
	setSession(t, s, shortened.ID, func(x *session.Session) {
		x.Status = session.StatusError
		x.ExpiresAt = now.Add(-time.Nanosecond)
	})
	liveClosed := mk("g", now.Add(-time.Hour)) // closed, kept for a day
	setSession(t, s, liveClosed.ID, func(x *session.Session) {
		x.Status = session.StatusCompleted
		x.ExpiresAt = now.Add(24 * time.Hour)
	})
	zero := mk("h", time.Time{})

	n, err := s.DeleteExpiredSessions(t.Context(), now, nil)
	require.NoError(t, err)
	assert.Equal(t, 5, n, "expired: active a, closed c, d (at now), f (shortened), h (zero expiry)")
	for _, gone := range []session.Session{expiredActive, expiredClosed, atNow, shortened, zero} {
		_, err := s.GetSession(t.Context(), gone.ID)
		assert.ErrorIs(t, err, session.ErrNotFound, "session of %s must be deleted", gone.UserID)
	}
	for _, kept := range []session.Session{liveActive, slid, liveClosed} {
		_, err := s.GetSession(t.Context(), kept.ID)
		assert.NoError(t, err, "session of %s must be kept", kept.UserID)
	}
	assert.Empty(t, activeID(t, s, "a"), "sweeping an active session frees its slot")
	assert.Empty(t, activeID(t, s, "h"))
	assert.Equal(t, liveActive.ID, activeID(t, s, "b"))
	assert.Equal(t, slid.ID, activeID(t, s, "e"))
	id, created, err := getOrCreate(t.Context(), s, activeSession("a", now.Add(time.Hour)))
	require.NoError(t, err)
	assert.True(t, created, "the freed slot takes a new session")
	assert.Equal(t, id, activeID(t, s, "a"))

	n, err = s.DeleteExpiredSessions(t.Context(), now, nil)
	require.NoError(t, err)
	assert.Zero(t, n, "a second sweep at the same time deletes nothing")
	n, err = s.DeleteExpiredSessions(t.Context(), now.Add(48*time.Hour), nil)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "b, e, g and a's new session")
	for _, user := range []string{"a", "b", "e"} {
		assert.Empty(t, activeID(t, s, user))
	}
}

func testSessionSweepMany(t *testing.T, s session.Store) {
	// More than one chunk of a store that deletes in chunks (boltstore:
	// 1000), created by concurrent writers (sharing commits).
	const expired, live, writers = 1500, 100, 16
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := g; i < expired+live; i += writers {
				expires := sessionBase.Add(-time.Duration(i+1) * time.Millisecond)
				if i >= expired {
					expires = sessionBase.Add(time.Hour)
				}
				_, _, err := getOrCreate(t.Context(), s, activeSession(fmt.Sprintf("user-%04d", i), expires))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	n, err := s.DeleteExpiredSessions(t.Context(), sessionBase, nil)
	require.NoError(t, err)
	assert.Equal(t, expired, n)
	assert.Empty(t, activeID(t, s, "user-0000"))
	assert.Empty(t, activeID(t, s, fmt.Sprintf("user-%04d", expired-1)))
	for i := expired; i < expired+live; i++ {
		assert.NotEmpty(t, activeID(t, s, fmt.Sprintf("user-%04d", i)))
	}
}

func testSessionSweepVisits(t *testing.T, s session.Store) {
	now := sessionBase
	full := fullSession("a") // expired: it expires in March
	createSession(t, s, full)
	plain := activeSession("b", now.Add(-time.Second))
	createSession(t, s, plain)
	zero := activeSession("h", time.Time{})
	createSession(t, s, zero)
	closed := activeSession("c", now.Add(-time.Hour))
	createSession(t, s, closed)
	closeSession(t, s, closed.ID, session.StatusCompleted)
	live := activeSession("d", now.Add(time.Second))
	createSession(t, s, live)

	var visited []session.Session
	wrote := false
	n, err := s.DeleteExpiredSessions(t.Context(), now, func(v session.Session) {
		visited = append(visited, v)
		if wrote {
			return
		}
		wrote = true
		// The deletion has committed and the store is free: from another
		// goroutine, the session is gone and a write goes through. A
		// store visiting inside its transaction or lock fails this, by
		// the deleted session still showing or by the write timing out.
		done := make(chan error, 1)
		go func() {
			if _, err := s.GetSession(t.Context(), v.ID); !errors.Is(err, session.ErrNotFound) {
				done <- fmt.Errorf("the visited session %s is still stored (err %v): visited before its deletion committed", v.ID, err)
				return
			}
			err := s.UpdateActiveSession(t.Context(), "in-visit", func(*session.Session) (*session.Session, *session.Session, error) {
				next := activeSession("in-visit", now.Add(time.Hour))
				return nil, &next, nil
			})
			done <- err
		}()
		select {
		case err := <-done:
			assert.NoError(t, err, "calling the store from visit")
		case <-time.After(5 * time.Second):
			t.Error("a write from visit's goroutine blocked: visit runs inside the store's transaction or lock")
		}
	})
	require.NoError(t, err)
	assert.Equal(t, 4, n, "expired: a, b, h (zero expiry), closed c")
	byID := map[string]session.Session{}
	for _, v := range visited {
		_, dup := byID[v.ID]
		assert.False(t, dup, "session %s visited twice", v.ID)
		byID[v.ID] = v
	}
	assert.Len(t, byID, 3, "visited: the active a, b and h, not the closed c nor the live d")
	for _, want := range []session.Session{full, plain, zero} {
		if got, ok := byID[want.ID]; assert.True(t, ok, "session of %s not visited", want.UserID) {
			assertSession(t, want, got)
		}
	}
	assert.True(t, wrote, "visit was called")
	assert.NotEmpty(t, activeID(t, s, "in-visit"), "the write made from visit is stored")

	n, err = s.DeleteExpiredSessions(t.Context(), now, func(v session.Session) {
		t.Errorf("a second sweep visited %s", v.ID)
	})
	require.NoError(t, err)
	assert.Zero(t, n)
}

func testSessionSweepVisitsOnce(t *testing.T, s session.Store) {
	// Concurrent sweeps (replicas, in a shared store) delete and visit
	// each active session exactly once between them.
	const active, closed, sweepers = 150, 50, 6
	want := map[string]bool{}
	for i := range active + closed {
		sess := activeSession(fmt.Sprintf("user-%03d", i), sessionBase.Add(-time.Duration(i+1)*time.Millisecond))
		createSession(t, s, sess)
		if i >= active {
			closeSession(t, s, sess.ID, session.StatusAbandoned)
			continue
		}
		want[sess.ID] = true
	}
	var (
		mu      sync.Mutex
		visited = map[string]int{}
		deleted atomic.Int64
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for range sweepers {
		wg.Go(func() {
			<-start
			n, err := s.DeleteExpiredSessions(t.Context(), sessionBase, func(v session.Session) {
				mu.Lock()
				defer mu.Unlock()
				visited[v.ID]++
			})
			assert.NoError(t, err)
			deleted.Add(int64(n))
		})
	}
	close(start)
	wg.Wait()
	assert.EqualValues(t, active+closed, deleted.Load(), "the sweeps deleted each session once between them")
	for id, n := range visited {
		assert.True(t, want[id], "visited %s, which was not active", id)
		assert.Equal(t, 1, n, "session %s visited %d times", id, n)
	}
	assert.Len(t, visited, active, "every active session visited")
}

func testSessionChurn(t *testing.T, s session.Store) {
	// Users' workers get-or-create, append, close and sweep concurrently;
	// afterwards each user has at most one active session, and it is the
	// one in the slot.
	const users, workers, rounds = 6, 4, 15
	var (
		mu      sync.Mutex
		created = map[string][]string{} // user → ids created
		visited = map[string]int{}      // id → times the sweep visited it
		clock   atomic.Int64            // seconds after sessionBase
	)
	var wg sync.WaitGroup
	for u := range users {
		user := fmt.Sprintf("user-%d", u)
		for w := range workers {
			wg.Go(func() {
				for r := range rounds {
					expires := sessionBase.Add(time.Duration(clock.Add(1)+5) * time.Second)
					id, made, err := getOrCreate(t.Context(), s, activeSession(user, expires))
					if !assert.NoError(t, err) {
						return
					}
					if made {
						mu.Lock()
						created[user] = append(created[user], id)
						mu.Unlock()
					}
					err = s.UpdateSession(t.Context(), id, func(cur *session.Session) (*session.Session, error) {
						if cur.Status != session.StatusActive {
							return nil, nil
						}
						next := cur.Clone()
						next.TurnHistory = append(next.TurnHistory, session.Turn{Role: session.RoleUser, Content: "hi"})
						if (w+r)%4 == 0 {
							next.Status = session.StatusCompleted
						}
						return &next, nil
					})
					if err != nil && !errors.Is(err, session.ErrNotFound) { // swept meanwhile
						assert.NoError(t, err)
					}
				}
			})
		}
	}
	wg.Go(func() {
		for range 20 {
			_, err := s.DeleteExpiredSessions(t.Context(), sessionBase.Add(time.Duration(clock.Load())*time.Second), func(v session.Session) {
				assert.Equal(t, session.StatusActive, v.Status, "visited a closed session %s", v.ID)
				mu.Lock()
				visited[v.ID]++
				mu.Unlock()
			})
			assert.NoError(t, err)
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	for id, n := range visited {
		assert.Equal(t, 1, n, "session %s visited %d times", id, n)
	}
	for u := range users {
		user := fmt.Sprintf("user-%d", u)
		var active []string
		for _, id := range created[user] {
			got, err := s.GetSession(t.Context(), id)
			if errors.Is(err, session.ErrNotFound) {
				continue
			}
			require.NoError(t, err)
			if got.Status == session.StatusActive {
				active = append(active, id)
			}
		}
		require.LessOrEqual(t, len(active), 1, "%s has several active sessions: %v", user, active)
		slot := activeID(t, s, user)
		if len(active) == 1 {
			assert.Equal(t, active[0], slot, "%s: the active session must be in the slot", user)
		} else {
			assert.Empty(t, slot, "%s: the slot must be free when no session is active", user)
		}
	}
}

func testSessionCopies(t *testing.T, s session.Store) {
	a := fullSession("alice")
	in := a.Clone()
	err := s.UpdateActiveSession(t.Context(), "alice", func(*session.Session) (*session.Session, *session.Session, error) {
		return nil, &in, nil
	})
	require.NoError(t, err)
	// Changing what fn returned, after the call, changes nothing stored.
	in.TurnHistory[0].Content = "changed"
	in.WorkflowState["nested"].(map[string]any)["list"].([]any)[0] = "changed"
	in.Metadata["entry_point"] = "changed"
	in.PendingClarification.SuggestedAgent = "changed"
	assertSession(t, a, getSession(t, s, a.ID))

	// Changing what a read returned changes nothing stored.
	for _, read := range []func() session.Session{
		func() session.Session { return getSession(t, s, a.ID) },
		func() session.Session {
			got, err := s.GetActiveSession(t.Context(), "alice")
			require.NoError(t, err)
			return got
		},
	} {
		got := read()
		got.TurnHistory[0].Content = "changed"
		got.TurnHistory = append(got.TurnHistory[:1], session.Turn{Content: "appended"})
		got.WorkflowState["nested"].(map[string]any)["list"].([]any)[0] = "changed"
		got.WorkflowState["new"] = true
		got.Metadata["tags"].([]any)[0] = "changed"
		got.PendingClarification.OriginalInput = "changed"
		assertSession(t, a, getSession(t, s, a.ID))
	}

	// The same for an update.
	var kept *session.Session
	err = s.UpdateSession(t.Context(), a.ID, func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		next.ActiveAgent = "hr"
		kept = &next
		return &next, nil
	})
	require.NoError(t, err)
	kept.TurnHistory[0].Content = "changed"
	kept.WorkflowState["step"] = "changed"
	a.ActiveAgent = "hr"
	assertSession(t, a, getSession(t, s, a.ID))
}

func testSessionDoneContext(t *testing.T, s session.Store) {
	a := fullSession("alice")
	createSession(t, s, a)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := s.GetSession(ctx, a.ID)
	assert.ErrorIs(t, err, context.Canceled, "GetSession")
	_, err = s.GetActiveSession(ctx, "alice")
	assert.ErrorIs(t, err, context.Canceled, "GetActiveSession")
	called := false
	err = s.UpdateSession(ctx, a.ID, func(cur *session.Session) (*session.Session, error) {
		called = true
		next := cur.Clone()
		next.Status = session.StatusCompleted
		return &next, nil
	})
	assert.ErrorIs(t, err, context.Canceled, "UpdateSession")
	err = s.UpdateActiveSession(ctx, "bob", func(*session.Session) (*session.Session, *session.Session, error) {
		called = true
		next := activeSession("bob", sessionBase.Add(time.Hour))
		return nil, &next, nil
	})
	assert.ErrorIs(t, err, context.Canceled, "UpdateActiveSession")
	_, err = s.DeleteExpiredSessions(ctx, sessionBase.Add(24*time.Hour), nil)
	assert.ErrorIs(t, err, context.Canceled, "DeleteExpiredSessions")

	assert.False(t, called, "a done context must not call fn")
	assertSession(t, a, getSession(t, s, a.ID))
	assert.Equal(t, a.ID, activeID(t, s, "alice"))
	assert.Empty(t, activeID(t, s, "bob"))

	ctx, cancel = context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = s.GetSession(ctx, a.ID)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "GetSession past its deadline")
}

func testSessionClose(t *testing.T, s session.Store, errClosed error) {
	c := closerOf(t, s)
	a := activeSession("alice", sessionBase.Add(time.Hour))
	createSession(t, s, a)
	closeTwice(t, c)

	check := afterCloseCheck(t, errClosed)
	_, err := s.GetSession(t.Context(), a.ID)
	check("GetSession", err)
	_, err = s.GetActiveSession(t.Context(), "alice")
	check("GetActiveSession", err)
	check("UpdateSession", s.UpdateSession(t.Context(), a.ID, func(cur *session.Session) (*session.Session, error) {
		return cur, nil
	}))
	check("UpdateActiveSession", s.UpdateActiveSession(t.Context(), "bob", func(*session.Session) (*session.Session, *session.Session, error) {
		next := activeSession("bob", sessionBase.Add(time.Hour))
		return nil, &next, nil
	}))
	_, err = s.DeleteExpiredSessions(t.Context(), sessionBase, nil)
	check("DeleteExpiredSessions", err)
}

func testSessionCount(t *testing.T, s session.Store) {
	c, ok := s.(session.ActiveCounter)
	if !ok {
		t.Skip("the store does not implement session.ActiveCounter")
	}
	count := func() int {
		t.Helper()
		n, err := c.CountActiveSessions(t.Context())
		require.NoError(t, err)
		return n
	}
	assert.Zero(t, count(), "an empty store")
	a := activeSession("u1", sessionBase.Add(time.Hour))
	b := activeSession("u2", sessionBase.Add(-time.Hour)) // expired, not yet swept
	d := activeSession("u3", sessionBase.Add(time.Hour))
	for _, sess := range []session.Session{a, b, d} {
		createSession(t, s, sess)
	}
	assert.Equal(t, 3, count(), "an expired active session counts until the sweep")
	closeSession(t, s, d.ID, session.StatusCompleted)
	assert.Equal(t, 2, count(), "a closed session does not count")
	_, err := s.DeleteExpiredSessions(t.Context(), sessionBase, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, count(), "a swept session does not count")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.CountActiveSessions(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}
