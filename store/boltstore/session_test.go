package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/session"
)

func TestSessionStore(t *testing.T) {
	storetest.TestSessionStore(t, func(t *testing.T) session.Store {
		s := openTemp(t)
		t.Cleanup(func() { // runs before openTemp's Close
			if !s.closed.Load() {
				checkSessionIndexes(t, s)
			}
		})
		return s
	}, &storetest.Options{ErrClosed: ErrClosed})
}

// checkSessionIndexes checks that the expiry index and the active slots
// match the session records exactly.
func checkSessionIndexes(t *testing.T, s *Store) {
	t.Helper()
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		b, err := sessionBucketsOf(tx)
		require.NoError(t, err)
		wantExpiry := map[string]string{}
		wantSlots := map[string]string{}
		require.NoError(t, b.records.ForEach(func(id, v []byte) error {
			var sess session.Session
			require.NoError(t, decodeSession(id, v, &sess))
			assert.Equal(t, string(id), sess.ID, "a session under another id")
			user := ""
			if sess.Status == session.StatusActive {
				user = sess.UserID
				assert.NotContains(t, wantSlots, sess.UserID, "two active sessions for one user")
				wantSlots[sess.UserID] = sess.ID
			}
			wantExpiry[string(expiryKey(sess.ExpiresAt, sess.ID))] = user
			return nil
		}))
		gotExpiry := map[string]string{}
		require.NoError(t, b.byExpiry.ForEach(func(k, v []byte) error {
			gotExpiry[string(k)] = string(v)
			return nil
		}))
		assert.Equal(t, wantExpiry, gotExpiry, "by_expiry does not match the records")
		gotSlots := map[string]string{}
		require.NoError(t, b.byUser.ForEach(func(k, v []byte) error {
			gotSlots[string(k)] = string(v)
			return nil
		}))
		assert.Equal(t, wantSlots, gotSlots, "sessions_by_user does not match the active records")
		return nil
	}))
}

// newSession returns an active session of user expiring at expires.
func newSession(id, user string, expires time.Time) session.Session {
	return session.Session{
		ID: id, UserID: user, Status: session.StatusActive, ActiveAgent: "finance",
		TurnHistory:   []session.Turn{{Role: session.RoleUser, Content: "hello " + id, Timestamp: testBase}},
		WorkflowState: map[string]any{"step": 1.0},
		CreatedAt:     testBase, UpdatedAt: testBase, ExpiresAt: expires,
	}
}

// createSessions stores each session as its user's active session.
func createSessions(t *testing.T, s *Store, sessions ...session.Session) {
	t.Helper()
	for _, sess := range sessions {
		err := s.UpdateActiveSession(t.Context(), sess.UserID, func(cur *session.Session) (*session.Session, *session.Session, error) {
			require.Nil(t, cur)
			return nil, &sess, nil
		})
		require.NoError(t, err)
	}
}

func TestSessionsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.db")
	s, err := Open(path, nil)
	require.NoError(t, err)
	var all []session.Session
	for i := range 50 {
		all = append(all, newSession(fmt.Sprintf("s-%02d", i), fmt.Sprintf("user-%02d", i), testBase.Add(time.Duration(i)*time.Minute)))
	}
	createSessions(t, s, all...)
	require.NoError(t, s.UpdateSession(t.Context(), "s-01", func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		next.Status = session.StatusCompleted
		next.ExpiresAt = testBase.Add(24 * time.Hour)
		return &next, nil
	}))
	n, err := s.DeleteExpiredSessions(t.Context(), testBase.Add(10*time.Minute), nil)
	require.NoError(t, err)
	require.Equal(t, 10, n, "s-00 and s-02 … s-10")
	before := map[string]session.Session{}
	for _, sess := range all {
		if got, err := s.GetSession(t.Context(), sess.ID); err == nil {
			before[sess.ID] = got
		}
	}
	require.Len(t, before, 40)
	require.NoError(t, s.Close())

	s, err = Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	checkSessionIndexes(t, s)
	for id, want := range before {
		got, err := s.GetSession(t.Context(), id)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err = s.GetActiveSession(t.Context(), "user-01")
	assert.ErrorIs(t, err, session.ErrNotFound, "a closed session is not active after a reopen")
	got, err := s.GetActiveSession(t.Context(), "user-30")
	require.NoError(t, err)
	assert.Equal(t, "s-30", got.ID)
	_, err = s.GetActiveSession(t.Context(), "user-05")
	assert.ErrorIs(t, err, session.ErrNotFound, "a swept session's slot stays free after a reopen")

	// The reopened store keeps enforcing one active session per user,
	// and sweeps from its persisted index.
	err = s.UpdateActiveSession(t.Context(), "user-30", func(cur *session.Session) (*session.Session, *session.Session, error) {
		next := newSession("second", "user-30", testBase.Add(time.Hour))
		return nil, &next, nil
	})
	assert.ErrorIs(t, err, session.ErrConflict)
	n, err = s.DeleteExpiredSessions(t.Context(), testBase.Add(time.Hour), nil)
	require.NoError(t, err)
	assert.Equal(t, 39, n, "every session but the completed s-01")
	checkSessionIndexes(t, s)
}

func TestOpenCreatesSessionBuckets(t *testing.T) {
	// A store made before the session buckets existed has an empty
	// sessions bucket; Open adds them without a schema change.
	path := fileWithEmptyBucket(t, 2, bucketSessions)

	s, err := Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	createSessions(t, s, newSession("s", "alice", testBase.Add(time.Hour)))
	got, err := s.GetActiveSession(t.Context(), "alice")
	require.NoError(t, err)
	assert.Equal(t, "s", got.ID)
	checkSessionIndexes(t, s)
}

func TestSessionWritesShareCommits(t *testing.T) {
	s := openTemp(t)
	createSessions(t, s, newSession("existing", "alice", testBase.Add(time.Hour)))
	errBoom := errors.New("boom")
	appendTurn := func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		next.TurnHistory = append(next.TurnHistory, session.Turn{Role: session.RoleAgent, Content: "reply"})
		return &next, nil
	}
	calls := []func() error{
		func() error { return s.UpdateSession(t.Context(), "existing", appendTurn) },
		func() error {
			return s.UpdateActiveSession(t.Context(), "bob", func(cur *session.Session) (*session.Session, *session.Session, error) {
				next := newSession("bob-1", "bob", testBase.Add(time.Hour))
				return nil, &next, nil
			})
		},
		func() error { // sees bob-1, queued before it in the same batch
			return s.UpdateActiveSession(t.Context(), "bob", func(cur *session.Session) (*session.Session, *session.Session, error) {
				if cur != nil {
					return nil, nil, nil
				}
				next := newSession("bob-2", "bob", testBase.Add(time.Hour))
				return nil, &next, nil
			})
		},
		func() error {
			return s.UpdateSession(t.Context(), "existing", func(*session.Session) (*session.Session, error) {
				panic("kaboom")
			})
		},
		func() error {
			return s.UpdateSession(t.Context(), "existing", func(cur *session.Session) (*session.Session, error) {
				next := cur.Clone()
				next.Status = session.StatusError
				return &next, errBoom
			})
		},
		func() error { return s.UpdateSession(t.Context(), "existing", appendTurn) },
		func() error { return storeAgent(t.Context(), s, testAgent("agent")) },
	}
	errs := commitAsOneBatch(t, s, calls)
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.NoError(t, errs[2])
	assert.ErrorContains(t, errs[3], "kaboom")
	assert.Same(t, errBoom, errs[4])
	assert.NoError(t, errs[5])
	assert.NoError(t, errs[6])

	got, err := s.GetSession(t.Context(), "existing")
	require.NoError(t, err)
	assert.Equal(t, session.StatusActive, got.Status, "a failed update in a batch writes nothing")
	assert.Len(t, got.TurnHistory, 3, "both appends of the batch land, in order")
	active, err := s.GetActiveSession(t.Context(), "bob")
	require.NoError(t, err)
	assert.Equal(t, "bob-1", active.ID)
	_, err = s.GetSession(t.Context(), "bob-2")
	assert.ErrorIs(t, err, session.ErrNotFound)
	checkSessionIndexes(t, s)
}

func TestDamagedSessionIsCorrupt(t *testing.T) {
	s := openTemp(t)
	createSessions(t, s, newSession("json", "alice", testBase.Add(time.Hour)))
	require.NoError(t, s.db.Update(func(tx *bbolt.Tx) error {
		b, err := sessionBucketsOf(tx)
		require.NoError(t, err)
		v := bytes.Clone(b.records.Get([]byte("json")))
		return b.records.Put([]byte("json"), v[:len(v)-3])
	}))
	_, err := s.GetSession(t.Context(), "json")
	assert.ErrorIs(t, err, ErrCorrupt)
	_, err = s.GetActiveSession(t.Context(), "alice")
	assert.ErrorIs(t, err, ErrCorrupt)
	err = s.UpdateSession(t.Context(), "json", func(cur *session.Session) (*session.Session, error) { return cur, nil })
	assert.ErrorIs(t, err, ErrCorrupt)
	err = s.UpdateActiveSession(t.Context(), "alice", func(cur *session.Session) (*session.Session, *session.Session, error) {
		return nil, nil, nil
	})
	assert.ErrorIs(t, err, ErrCorrupt)
	// The sweep decodes nothing, so it still deletes the damaged record.
	n, err := s.DeleteExpiredSessions(t.Context(), testBase.Add(time.Hour), nil)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	checkSessionIndexes(t, s)
}

func TestSessionRejectsBadRecords(t *testing.T) {
	s := openTemp(t)
	long := strings.Repeat("x", bbolt.MaxKeySize)
	bad := []session.Session{
		newSession(long, "alice", testBase),
		newSession("", "alice", testBase),
	}
	for _, sess := range bad {
		err := s.UpdateActiveSession(t.Context(), "alice", func(*session.Session) (*session.Session, *session.Session, error) {
			return nil, &sess, nil
		})
		assert.Error(t, err)
	}
	assert.Error(t, s.UpdateActiveSession(t.Context(), "", func(*session.Session) (*session.Session, *session.Session, error) {
		return nil, nil, nil
	}), "empty user id")
	assert.Error(t, s.UpdateActiveSession(t.Context(), long+"x", func(*session.Session) (*session.Session, *session.Session, error) {
		return nil, nil, nil
	}), "user id longer than a key")
	assert.Error(t, s.UpdateActiveSession(t.Context(), "alice", nil))
	assert.Error(t, s.UpdateSession(t.Context(), "x", nil))
	_, err := s.GetActiveSession(t.Context(), long+"x")
	assert.ErrorIs(t, err, session.ErrNotFound)
	_, err = s.GetSession(t.Context(), long+"x")
	assert.ErrorIs(t, err, session.ErrNotFound)
	checkSessionIndexes(t, s)
}
