package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/session"
)

var _ session.Store = (*Store)(nil)

// The session buckets. Records are stored once, by id, in a bucket nested
// in sessions; an expiry index beside it lets the sweep find expired
// sessions without decoding any; the top-level sessions_by_user bucket
// holds each user's active slot:
//
//	sessions/records    id               → JSON of session.Session
//	sessions/by_expiry  expires · id     → the user ID when the session is active, else empty
//	sessions_by_user    user ID          → id of the user's active session
//
// expires is a 12-byte order-preserving time (timeKey). Every write of a
// session moves its expiry entry and keeps the slot in step, in the same
// transaction: one write transaction over sessions and sessions_by_user is
// what makes "one active session per user" hold (bbolt has one writer).
var (
	bucketByExpiry = []byte("by_expiry")

	sessionBucketNames = [][]byte{bucketRecords, bucketByExpiry}
)

// sessionBuckets are the session buckets of one transaction.
type sessionBuckets struct {
	records, byExpiry, byUser *bbolt.Bucket
}

// sessionBucketsOf returns the session buckets of tx. Open creates them,
// so a missing one means the file was changed behind the store.
func sessionBucketsOf(tx *bbolt.Tx) (sessionBuckets, error) {
	var b sessionBuckets
	root := tx.Bucket(bucketSessions)
	if root == nil {
		return b, fmt.Errorf("%w: no %q bucket", ErrCorrupt, bucketSessions)
	}
	for i, p := range []**bbolt.Bucket{&b.records, &b.byExpiry} {
		if *p = root.Bucket(sessionBucketNames[i]); *p == nil {
			return b, fmt.Errorf("%w: no %q bucket in %q", ErrCorrupt, sessionBucketNames[i], bucketSessions)
		}
	}
	if b.byUser = tx.Bucket(bucketSessionsByUser); b.byUser == nil {
		return b, fmt.Errorf("%w: no %q bucket", ErrCorrupt, bucketSessionsByUser)
	}
	// Sessions are mostly created and slid forward in time order.
	b.byExpiry.FillPercent = appendFillPercent
	return b, nil
}

// expiryKey is the key of session id in by_expiry.
func expiryKey(expires time.Time, id string) []byte {
	return append(appendTime(make([]byte, 0, timeKeyLen+len(id)), expires), id...)
}

// encodedSession is a session ready to be written.
type encodedSession struct {
	s     *session.Session
	value []byte
}

// encodeSession checks that s can be stored and encodes it.
func encodeSession(s *session.Session) (encodedSession, error) {
	switch {
	case s.ID == "":
		return encodedSession{}, errors.New("empty session id")
	case timeKeyLen+len(s.ID) > bbolt.MaxKeySize:
		return encodedSession{}, fmt.Errorf("session id is %d bytes, more than %d", len(s.ID), bbolt.MaxKeySize-timeKeyLen)
	case len(s.Slot()) > bbolt.MaxKeySize:
		return encodedSession{}, fmt.Errorf("user id and principal are %d bytes, more than %d", len(s.Slot()), bbolt.MaxKeySize)
	case s.Status == session.StatusActive && s.UserID == "":
		return encodedSession{}, errors.New("active session with an empty user id")
	}
	v, err := json.Marshal(s)
	if err != nil {
		return encodedSession{}, fmt.Errorf("encode: %w", err)
	}
	return encodedSession{s: s, value: v}, nil
}

// decodeSession decodes the stored value v of session id.
func decodeSession(id, v []byte, s *session.Session) error {
	if err := json.Unmarshal(v, s); err != nil {
		return fmt.Errorf("%w: record of session %q: %w", ErrCorrupt, id, err)
	}
	return nil
}

// put writes e, replacing the stored version old (nil for a new session):
// the record, its expiry entry and the user's slot. Any error leaves the
// transaction partly written.
func (b sessionBuckets) put(e *encodedSession, old *session.Stored) error {
	s := e.s
	id := []byte(s.ID)
	if old != nil {
		if err := b.byExpiry.Delete(expiryKey(old.ExpiresAt, old.ID)); err != nil {
			return err
		}
	}
	var slotUser []byte
	if s.Status == session.StatusActive {
		slotUser = []byte(s.Slot())
	}
	if err := b.byExpiry.Put(expiryKey(s.ExpiresAt, s.ID), slotUser); err != nil {
		return err
	}
	if err := b.records.Put(id, e.value); err != nil {
		return err
	}
	switch {
	case s.Status == session.StatusActive:
		return b.byUser.Put(slotUser, id)
	case old != nil && old.Status == session.StatusActive && bytes.Equal(b.byUser.Get([]byte(old.Slot())), id):
		return b.byUser.Delete([]byte(old.Slot()))
	}
	return nil
}

// GetSession implements [session.Store.GetSession]: it returns the session
// with the given id, or an error wrapping [session.ErrNotFound]. It reads
// in a read-only transaction, concurrently with writers.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	var out session.Session
	found := false
	err := s.view(func(tx *bbolt.Tx) error {
		b, err := sessionBucketsOf(tx)
		if err != nil {
			return err
		}
		v := b.records.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		return decodeSession([]byte(id), v, &out)
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("boltstore: get session %q: %w", id, err)
	}
	if !found {
		return session.Session{}, fmt.Errorf("boltstore: session %q: %w", id, session.ErrNotFound)
	}
	return out, nil
}

// GetActiveSession implements [session.Store.GetActiveSession]: it
// returns the session in userID's active slot, or an error wrapping
// [session.ErrNotFound], from one read-only transaction.
func (s *Store) GetActiveSession(ctx context.Context, userID string) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	var out *session.Session
	err := s.view(func(tx *bbolt.Tx) error {
		b, err := sessionBucketsOf(tx)
		if err != nil {
			return err
		}
		out, err = b.active(userID)
		return err
	})
	if err != nil {
		return session.Session{}, fmt.Errorf("boltstore: get active session: %w", err)
	}
	if out == nil {
		return session.Session{}, fmt.Errorf("boltstore: active session: %w", session.ErrNotFound)
	}
	return *out, nil
}

// active returns the session in user's slot when it is an active session
// of user, else nil.
func (b sessionBuckets) active(user string) (*session.Session, error) {
	if user == "" || len(user) > bbolt.MaxKeySize {
		return nil, nil // no such key
	}
	id := b.byUser.Get([]byte(user))
	if id == nil {
		return nil, nil
	}
	v := b.records.Get(id)
	if v == nil {
		return nil, nil // dangling slot: free
	}
	var cur session.Session
	if err := decodeSession(id, v, &cur); err != nil {
		return nil, err
	}
	if cur.Status != session.StatusActive || cur.Slot() != user {
		return nil, nil
	}
	return &cur, nil
}

// UpdateSession implements [session.Store.UpdateSession]: it reads the
// session with the given id, calls fn with it, and stores what fn returns
// — moving its expiry entry, and freeing the user's slot when it leaves
// active — returning once that is fsync'd.
//
// Like [Store.UpdateAgent], the write goes through the group commit: fn
// runs on the committer goroutine, inside the write transaction, once per
// call, so it must be quick and must not call back into the store's write
// methods. Writes to one session are applied in the order they were
// queued, each fn seeing the result of the one before; that is what
// serialises the turns of a session. A panic in fn is recovered and
// returned as an error, with nothing written.
//
// If ctx is done before the committer takes the write, it returns ctx's
// error and nothing is written. After [Store.Close] it returns an error
// wrapping [ErrClosed].
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(cur *session.Session) (*session.Session, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("boltstore: update session %q: nil function", id)
	}
	op := fmt.Sprintf("update session %q", id)
	return s.submit(ctx, &request{
		op:    op,
		apply: func(tx *bbolt.Tx) error { return applySessionUpdate(tx, op, id, fn) },
	})
}

// applySessionUpdate runs one UpdateSession in tx.
func applySessionUpdate(tx *bbolt.Tx, op, id string, fn func(cur *session.Session) (*session.Session, error)) error {
	b, err := sessionBucketsOf(tx)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	v := b.records.Get([]byte(id))
	if v == nil {
		return fmt.Errorf("boltstore: session %q: %w", id, session.ErrNotFound)
	}
	var cur session.Session
	if err := decodeSession([]byte(id), v, &cur); err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	old := session.StoredOf(&cur)
	next, err := callFn(fn, &cur, "update session", id)
	if err != nil {
		return err // fn's error unchanged
	}
	if next == nil {
		return nil
	}
	if err := session.CheckUpdate(old.Keys(), next); err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	e, err := encodeSession(next)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	if err := b.put(&e, &old); err != nil {
		return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
	}
	return nil
}

// UpdateActiveSession implements [session.Store.UpdateActiveSession]: in
// one write transaction it reads userID's slot and the active session in
// it, calls fn, checks what fn returns against the store's invariants and
// writes it — the updated session, the new one, their expiry entries and
// the slot — returning once that is fsync'd. Concurrent calls for one user
// are applied one after the other, each fn seeing the slot the one before
// left, so concurrent get-or-create calls create one session.
//
// It goes through the group commit like [Store.UpdateSession], with the
// same rules for fn. userID must not be empty.
func (s *Store) UpdateActiveSession(ctx context.Context, userID string, fn func(cur *session.Session) (upd, next *session.Session, err error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch {
	case fn == nil:
		return errors.New("boltstore: update active session: nil function")
	case userID == "":
		return errors.New("boltstore: update active session: empty user id")
	case len(userID) > bbolt.MaxKeySize:
		return fmt.Errorf("boltstore: update active session: user id is %d bytes, more than %d", len(userID), bbolt.MaxKeySize)
	}
	const op = "update active session"
	return s.submit(ctx, &request{
		op:    op,
		apply: func(tx *bbolt.Tx) error { return applyActiveUpdate(tx, op, userID, fn) },
	})
}

// applyActiveUpdate runs one UpdateActiveSession in tx.
func applyActiveUpdate(tx *bbolt.Tx, op, user string, fn func(cur *session.Session) (upd, next *session.Session, err error)) error {
	b, err := sessionBucketsOf(tx)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	cur, err := b.active(user)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	var old *session.Stored
	if cur != nil {
		o := session.StoredOf(cur)
		old = &o
	}
	upd, next, err := callActiveFn(fn, cur)
	if err != nil {
		return err // fn's error unchanged
	}
	if upd == nil && next == nil {
		return nil
	}
	var oldKeys *session.Session
	if old != nil {
		oldKeys = old.Keys()
	}
	if err := session.CheckActiveUpdate(user, oldKeys, upd, next); err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	var eu, en encodedSession
	if upd != nil {
		if eu, err = encodeSession(upd); err != nil {
			return fmt.Errorf("boltstore: %s: %w", op, err)
		}
	}
	if next != nil {
		if b.records.Get([]byte(next.ID)) != nil {
			return fmt.Errorf("boltstore: %s: %w: a session with id %q exists", op, session.ErrConflict, next.ID)
		}
		if en, err = encodeSession(next); err != nil {
			return fmt.Errorf("boltstore: %s: %w", op, err)
		}
	}
	if upd != nil {
		if err := b.put(&eu, old); err != nil {
			return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
		}
	}
	if next != nil {
		if err := b.put(&en, nil); err != nil {
			return &abortError{fmt.Errorf("boltstore: %s: %w", op, err)}
		}
	}
	return nil
}

// callActiveFn calls the function of an UpdateActiveSession call, turning
// a panic into an error.
func callActiveFn(fn func(cur *session.Session) (upd, next *session.Session, err error), cur *session.Session) (upd, next *session.Session, err error) {
	defer func() {
		if p := recover(); p != nil {
			upd, next, err = nil, nil, fmt.Errorf("boltstore: update active session: update function panicked: %v", p)
		}
	}()
	return fn(cur)
}

// DeleteExpiredSessions implements [session.Store.DeleteExpiredSessions]:
// it deletes every session whose ExpiresAt is not after now, with its
// expiry entry and, for an active one, the user's slot, and returns how
// many it deleted. With a visit, the records of the active ones are
// decoded in the transaction that deletes them and visited once it has
// committed.
//
// It walks the by_expiry index from its start and decodes nothing else,
// so it costs the sessions it deletes, not the sessions stored. Like
// [Store.PruneDelegations] it runs outside the group commit, in
// transactions of up to 1000 deletions (each fsync'd), checking ctx
// between them: on an error or a done ctx it returns the number deleted so
// far with the error.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, visit func(session.Session)) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cutoff := appendTime(nil, now)
	var active []session.Session // of the last transaction, for visit
	return s.deleteInChunks(ctx, "delete expired sessions", func(tx *bbolt.Tx) (int, error) {
		active = active[:0]
		b, err := sessionBucketsOf(tx)
		if err != nil {
			return 0, err
		}
		type victim struct{ key, id, user []byte }
		var vs []victim
		c := b.byExpiry.Cursor()
		for k, v := c.First(); k != nil && len(vs) < pruneChunk; k, v = c.Next() {
			if len(k) <= timeKeyLen {
				return 0, fmt.Errorf("%w: session expiry entry of %d bytes", ErrCorrupt, len(k))
			}
			if bytes.Compare(k[:timeKeyLen], cutoff) > 0 {
				break
			}
			vs = append(vs, victim{key: slices.Clone(k), id: slices.Clone(k[timeKeyLen:]), user: slices.Clone(v)})
		}
		for _, v := range vs {
			if err := b.byExpiry.Delete(v.key); err != nil {
				return 0, err
			}
			if len(v.user) == 0 || !bytes.Equal(b.byUser.Get(v.user), v.id) {
				if err := b.records.Delete(v.id); err != nil {
					return 0, err
				}
				continue
			}
			if visit != nil {
				// A damaged record is deleted all the same, unvisited:
				// refusing would stop every later sweep.
				var sess session.Session
				if err := decodeSession(v.id, b.records.Get(v.id), &sess); err != nil {
					s.log.Warn("boltstore: sweeping an undecodable session record", "err", err)
				} else if sess.Status == session.StatusActive {
					active = append(active, sess)
				}
			}
			if err := b.records.Delete(v.id); err != nil {
				return 0, err
			}
			if err := b.byUser.Delete(v.user); err != nil {
				return 0, err
			}
		}
		return len(vs), nil
	}, func() {
		for _, sess := range active {
			visit(sess)
		}
	})
}

var _ session.ActiveCounter = (*Store)(nil)

// CountActiveSessions implements [session.ActiveCounter]: the number of
// occupied slots in sessions_by_user, counted from bbolt's page statistics
// (no record is decoded).
func (s *Store) CountActiveSessions(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSessionsByUser)
		if b == nil {
			return fmt.Errorf("%w: no %q bucket", ErrCorrupt, bucketSessionsByUser)
		}
		n = b.Stats().KeyN
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("boltstore: count active sessions: %w", err)
	}
	return n, nil
}
