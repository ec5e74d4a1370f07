package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/session"
)

var _ session.Store = (*Store)(nil)

// The session keys. Records are stored once, by id; an expiry index beside
// them lets the sweep find expired sessions without decoding any; each
// user's active slot is a key of its own:
//
//	sessions/records/<id>               → JSON of session.Session
//	sessions/by_expiry/<expires><id>    → the user ID when the session is active, else empty
//	sessions/by_user/<user>             → id of the user's active session
//
// <expires> is the expiry in 24 hex digits (timeHex). A session's record
// and expiry entry — and its slot while it is active — carry one etcd
// lease ending [Options.SessionLeaseGrace] after ExpiresAt, so they vanish
// together. Every write of a session puts its record and its expiry entry
// in one transaction, so the entry's mod revision is the record's: the
// sweep deletes a session only if that revision did not move.
//
// One active session per user: a write that creates a session or changes
// a session's status runs in a transaction that compares the mod revisions
// of the slot and of the session in it with those read (and, for a new
// session, that its key does not exist); on a failed comparison it reads
// again and calls the function again.
const (
	sessionRecords  = "sessions/records/"
	sessionByExpiry = "sessions/by_expiry/"
	sessionByUser   = "sessions/by_user/"
)

func (s *Store) sessionKey(id string) string { return s.prefix + sessionRecords + id }
func (s *Store) slotKey(user string) string  { return s.prefix + sessionByUser + user }

func (s *Store) expiryKey(expires time.Time, id string) string {
	return s.prefix + sessionByExpiry + timeHex(expires) + id
}

// encodeSession checks that sess can be stored and encodes it.
func encodeSession(sess *session.Session) ([]byte, error) {
	switch {
	case sess.ID == "":
		return nil, errors.New("empty session id")
	case sess.Status == session.StatusActive && sess.UserID == "":
		return nil, errors.New("active session with an empty user id")
	}
	v, err := json.Marshal(sess)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return v, nil
}

// decodeSession decodes the stored value v of session id.
func decodeSession(id string, v []byte, sess *session.Session) error {
	if err := json.Unmarshal(v, sess); err != nil {
		return fmt.Errorf("%w: record of session %q: %w", ErrCorrupt, id, err)
	}
	return nil
}

// sessionLeaseFor returns the lease sess is written with: none when
// sessions carry no lease; the stored version's lease (kv) when ExpiresAt
// did not move (was); else a new lease ending SessionLeaseGrace after
// ExpiresAt (at least 1 s from now).
func (s *Store) sessionLeaseFor(ls *leases, slot string, kv *kvPair, was time.Time, sess *session.Session) (clientv3.LeaseID, error) {
	if s.sessionGrace < 0 {
		return 0, nil
	}
	if id := leaseOf(kv); id != 0 && sess.ExpiresAt.Equal(was) {
		return id, nil
	}
	return ls.grant(slot, leaseSeconds(max(time.Until(sess.ExpiresAt), 0)+s.sessionGrace))
}

// putSession returns the operations that store sess (encoded as data)
// with lease: its record and its expiry entry, deleting the entry of the
// stored version (oldExpiry, "" for a new session) when it moved.
func (s *Store) putSession(sess *session.Session, data []byte, lease clientv3.LeaseID, oldExpiry string) []clientv3.Op {
	slotUser := ""
	if sess.Status == session.StatusActive {
		slotUser = sess.Slot()
	}
	key := s.expiryKey(sess.ExpiresAt, sess.ID)
	ops := []clientv3.Op{
		clientv3.OpPut(s.sessionKey(sess.ID), string(data), clientv3.WithLease(lease)),
		clientv3.OpPut(key, slotUser, clientv3.WithLease(lease)),
	}
	if oldExpiry != "" && oldExpiry != key {
		ops = append(ops, clientv3.OpDelete(oldExpiry))
	}
	return ops
}

// ifSlotHolds returns an operation that runs then only if user's slot
// holds id.
func (s *Store) ifSlotHolds(user, id string, then clientv3.Op) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(s.slotKey(user)), "=", id)}, []clientv3.Op{then}, nil)
}

// GetSession implements [session.Store.GetSession]: it returns the session
// with the given id, or an error wrapping [session.ErrNotFound].
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	c, err := s.begin(ctx, fmt.Sprintf("get session %q", id), true)
	if err != nil {
		return session.Session{}, err
	}
	defer c.end()
	resp, err := s.cli.Get(c.ctx, s.sessionKey(id))
	if err != nil {
		return session.Session{}, c.fail(err)
	}
	if len(resp.Kvs) == 0 || id == "" {
		return session.Session{}, fmt.Errorf("etcdstore: session %q: %w", id, session.ErrNotFound)
	}
	var out session.Session
	if err := decodeSession(id, resp.Kvs[0].Value, &out); err != nil {
		return session.Session{}, err
	}
	return out, nil
}

// GetActiveSession implements [session.Store.GetActiveSession]: it reads
// userID's slot, then the session it names at the slot's revision, and
// returns it, or an error wrapping [session.ErrNotFound] when the slot is
// free (no slot, or one naming a session that is gone or not active).
func (s *Store) GetActiveSession(ctx context.Context, userID string) (session.Session, error) {
	c, err := s.begin(ctx, "get active session", true)
	if err != nil {
		return session.Session{}, err
	}
	defer c.end()
	cur, _, err := s.readActive(c.ctx, userID)
	if err != nil {
		return session.Session{}, c.fail(err)
	}
	if cur == nil {
		return session.Session{}, fmt.Errorf("etcdstore: active session: %w", session.ErrNotFound)
	}
	return cur.s, nil
}

// activeRead is a user's slot as read: the slot key-value (nil when
// missing), the record it names (nil when missing), and the active
// session when the slot holds one (s valid only then).
type activeRead struct {
	slot, rec *kvPair
	s         session.Session
}

// readActive reads user's slot and the session it names. It returns the
// active session in the slot (nil when the slot is free) and what it read.
func (s *Store) readActive(ctx context.Context, user string) (*activeRead, *activeRead, error) {
	read := &activeRead{}
	if user == "" {
		return nil, read, nil
	}
	resp, err := s.cli.Get(ctx, s.slotKey(user))
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, read, nil
	}
	read.slot = pairOf(resp.Kvs[0])
	id := string(read.slot.value)
	rec, err := s.cli.Get(ctx, s.sessionKey(id), clientv3.WithRev(resp.Header.Revision))
	if err != nil {
		return nil, nil, err
	}
	if len(rec.Kvs) == 0 || id == "" {
		return nil, read, nil // dangling slot: free
	}
	read.rec = pairOf(rec.Kvs[0])
	if err := decodeSession(id, read.rec.value, &read.s); err != nil {
		return nil, nil, err
	}
	if read.s.Status != session.StatusActive || read.s.Slot() != user {
		return nil, read, nil
	}
	return read, read, nil
}

// UpdateSession implements [session.Store.UpdateSession]: it reads the
// session with the given id, calls fn with a fresh copy of it, checks the
// result against the store's invariants and commits it — the record, its
// moved expiry entry, and the user's slot (renewed while the session stays
// active, freed when it closes) — in a transaction that compares the
// record's mod revision with the one read; when another writer (another
// replica) changed the session meanwhile, it reads again and calls fn
// again. A write that moves ExpiresAt moves the session to a new lease and
// revokes the old one.
//
// Updates of one session from one Store are serialised (as are
// UpdateActiveSession calls for one user), so they conflict only with
// other replicas; fn must not call back into the store's write methods.
// A panic in fn propagates with nothing written.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(cur *session.Session) (*session.Session, error)) error {
	if fn == nil {
		return fmt.Errorf("etcdstore: update session %q: nil function", id)
	}
	op := fmt.Sprintf("update session %q", id)
	return s.updateLocked(ctx, op, s.sessionKey(id), func(c *call, ls *leases) (bool, error) {
		return s.updateSessionOnce(c, ls, op, id, fn)
	})
}

// updateLocked runs a session write: it holds the Store's lock of key
// (so writers of this Store do not conflict with each other) and calls
// once until it reports done, reading again after a failed comparison or
// a conflict, releasing the leases granted by a failed attempt.
func (s *Store) updateLocked(ctx context.Context, op, key string, once func(c *call, ls *leases) (done bool, err error)) error {
	c, err := s.begin(ctx, op, true)
	if err != nil {
		return err
	}
	defer c.end()
	unlock, err := s.lockKey(c.ctx, key)
	if err != nil {
		return c.fail(err)
	}
	defer unlock()
	ls := &leases{c: c}
	defer ls.release()
	for {
		done, err := once(c, ls)
		switch {
		case done:
			return err
		case err != nil && !conflict(err):
			return c.fail(err)
		case err != nil:
			ls.release()
		}
		if err := c.ctx.Err(); err != nil {
			return c.fail(err)
		}
	}
}

// updateSessionOnce is one attempt of UpdateSession. done reports that
// the call is over (with err); otherwise err is a round trip's error, nil
// when the comparison failed and the call should read again.
func (s *Store) updateSessionOnce(c *call, ls *leases, op, id string, fn func(cur *session.Session) (*session.Session, error)) (done bool, err error) {
	resp, err := s.cli.Get(c.ctx, s.sessionKey(id))
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 0 || id == "" {
		return true, fmt.Errorf("etcdstore: session %q: %w", id, session.ErrNotFound)
	}
	kv := pairOf(resp.Kvs[0])
	var cur session.Session
	if err := decodeSession(id, kv.value, &cur); err != nil {
		return true, err
	}
	old := session.StoredOf(&cur)
	next, err := fn(&cur)
	if err != nil || next == nil {
		return true, err // fn's error unchanged
	}
	if err := session.CheckUpdate(old.Keys(), next); err != nil {
		return true, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	data, err := encodeSession(next)
	if err != nil {
		return true, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	lease, err := s.sessionLeaseFor(ls, "upd", kv, old.ExpiresAt, next)
	if err != nil {
		return false, err
	}
	ops := s.putSession(next, data, lease, s.expiryKey(old.ExpiresAt, id))
	switch {
	case next.Status == session.StatusActive: // and so was cur
		ops = append(ops, s.ifSlotHolds(old.Slot(), id, clientv3.OpPut(s.slotKey(old.Slot()), id, clientv3.WithLease(lease))))
	case old.Status == session.StatusActive:
		ops = append(ops, s.ifSlotHolds(old.Slot(), id, clientv3.OpDelete(s.slotKey(old.Slot()))))
	}
	tresp, err := s.cli.Txn(c.ctx).If(unchanged(s.sessionKey(id), kv)).Then(ops...).Commit()
	if err != nil || !tresp.Succeeded {
		return false, err
	}
	ls.committed([]clientv3.LeaseID{lease}, leaseOf(kv))
	return true, nil
}

// UpdateActiveSession implements [session.Store.UpdateActiveSession]: it
// reads userID's slot and the active session in it, calls fn with a fresh
// copy of that session (nil when the slot is free), checks what fn returns
// against the store's invariants and commits it — the updated session,
// the new one, their expiry entries and the slot — in one transaction that
// compares the mod revisions of the slot and of the session it named with
// those read, and that the new session's key does not exist. When another
// writer changed the slot or that session meanwhile, it reads again and
// calls fn again: that is what makes concurrent get-or-create calls for
// one user, on any replica, end in one session. A new session whose ID is
// taken fails with [session.ErrConflict].
//
// userID must not be empty. fn is subject to the same rules as
// UpdateSession's.
func (s *Store) UpdateActiveSession(ctx context.Context, userID string, fn func(cur *session.Session) (upd, next *session.Session, err error)) error {
	switch {
	case fn == nil:
		return errors.New("etcdstore: update active session: nil function")
	case userID == "":
		return errors.New("etcdstore: update active session: empty user id")
	}
	return s.updateLocked(ctx, "update active session", s.slotKey(userID), func(c *call, ls *leases) (bool, error) {
		return s.updateActiveOnce(c, ls, userID, fn)
	})
}

// updateActiveOnce is one attempt of UpdateActiveSession, with the results
// of updateSessionOnce.
func (s *Store) updateActiveOnce(c *call, ls *leases, user string, fn func(cur *session.Session) (upd, next *session.Session, err error)) (done bool, err error) {
	const op = "update active session"
	active, read, err := s.readActive(c.ctx, user)
	if err != nil {
		return false, err
	}
	var cur *session.Session
	var old *session.Stored
	if active != nil {
		c := active.s
		cur = &c
		o := session.StoredOf(cur)
		old = &o
	}
	upd, next, err := fn(cur)
	if err != nil {
		return true, err // fn's error unchanged
	}
	if upd == nil && next == nil {
		return true, nil
	}
	var oldKeys *session.Session
	if old != nil {
		oldKeys = old.Keys()
	}
	if err := session.CheckActiveUpdate(user, oldKeys, upd, next); err != nil {
		return true, fmt.Errorf("etcdstore: %s: %w", op, err)
	}

	slot := s.slotKey(user)
	cmps := []clientv3.Cmp{unchanged(slot, read.slot)}
	if read.slot != nil {
		cmps = append(cmps, unchanged(s.sessionKey(string(read.slot.value)), read.rec))
	}
	var ops, orElse []clientv3.Op
	var used []clientv3.LeaseID
	var replaced []clientv3.LeaseID
	slotOp := clientv3.OpDelete(slot) // upd closes cur with no successor
	if upd != nil {
		data, err := encodeSession(upd)
		if err != nil {
			return true, fmt.Errorf("etcdstore: %s: %w", op, err)
		}
		lease, err := s.sessionLeaseFor(ls, "upd", read.rec, old.ExpiresAt, upd)
		if err != nil {
			return false, err
		}
		ops = append(ops, s.putSession(upd, data, lease, s.expiryKey(old.ExpiresAt, old.ID))...)
		used, replaced = append(used, lease), append(replaced, leaseOf(read.rec))
		if upd.Status == session.StatusActive {
			slotOp = clientv3.OpPut(slot, upd.ID, clientv3.WithLease(lease))
		}
	}
	if next != nil {
		data, err := encodeSession(next)
		if err != nil {
			return true, fmt.Errorf("etcdstore: %s: %w", op, err)
		}
		lease, err := s.sessionLeaseFor(ls, "next", nil, time.Time{}, next)
		if err != nil {
			return false, err
		}
		key := s.sessionKey(next.ID)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		orElse = append(orElse, clientv3.OpGet(key, clientv3.WithKeysOnly()))
		ops = append(ops, s.putSession(next, data, lease, "")...)
		used = append(used, lease)
		slotOp = clientv3.OpPut(slot, next.ID, clientv3.WithLease(lease))
	}
	ops = append(ops, slotOp)
	tresp, err := s.cli.Txn(c.ctx).If(cmps...).Then(ops...).Else(orElse...).Commit()
	if err != nil {
		return false, err
	}
	if !tresp.Succeeded {
		if next != nil && len(tresp.Responses[len(tresp.Responses)-1].GetResponseRange().GetKvs()) > 0 {
			return true, fmt.Errorf("etcdstore: %s: %w: a session with id %q exists", op, session.ErrConflict, next.ID)
		}
		return false, nil
	}
	ls.committed(used, replaced...)
	return true, nil
}

// sweepChunk is the most sessions DeleteExpiredSessions deletes in one
// transaction: three operations and one comparison each.
const sweepChunk = maxTxnOps / 3

// DeleteExpiredSessions implements [session.Store.DeleteExpiredSessions]:
// it deletes every session whose ExpiresAt is not after now, with its
// expiry entry and, for an active one, the user's slot when it still names
// the session, and returns how many it deleted.
//
// It walks the by_expiry index from its start up to now and decodes
// nothing else, so it costs the sessions it deletes, not the sessions
// stored. It deletes in transactions of up to 40 sessions, each a call of
// its own (the request timeout bounds each), each session deleted only if
// its expiry entry did not move since read (another replica may be
// sweeping or writing; a session written meanwhile is left for the next
// sweep), and checks ctx between them: on an error or a done ctx it
// returns the number deleted so far with the error.
//
// With a visit, the delete of an active session's record (one whose
// expiry entry names its user) returns the record, which is decoded and
// visited once the call is over. Only the transaction that deleted a
// session returns it, so of replicas sweeping at once, one visits each.
// A session whose lease ran out before any sweep is gone unvisited.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, visit func(session.Session)) (int, error) {
	prefix := s.prefix + sessionByExpiry
	end := prefix + timeHex(now.Add(time.Nanosecond)) // expires ≤ now
	from := prefix
	total := 0
	for {
		var active []session.Session
		var collect func(session.Session)
		if visit != nil {
			collect = func(sess session.Session) { active = append(active, sess) }
		}
		n, next, err := s.sweepChunk(ctx, prefix, from, end, collect)
		total += n
		// Visited outside the store's call: its time is not the
		// request timeout's, and the deletions are committed.
		for _, sess := range active {
			visit(sess)
		}
		if err != nil || next == "" {
			return total, err
		}
		from = next
	}
}

// sweepChunk is one call of DeleteExpiredSessions: it deletes the
// sessions of up to sweepChunk expiry entries in [from, end) and returns
// how many it deleted and the key to go on from, "" when it reached end.
func (s *Store) sweepChunk(ctx context.Context, prefix, from, end string, visit func(session.Session)) (n int, next string, err error) {
	c, err := s.begin(ctx, "delete expired sessions", true)
	if err != nil {
		return 0, "", err
	}
	defer c.end()
	resp, err := s.cli.Get(c.ctx, from, clientv3.WithRange(end), clientv3.WithLimit(sweepChunk))
	if err != nil {
		return 0, "", c.fail(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, "", nil
	}
	n, err = s.deleteSessions(c, prefix, resp.Kvs, visit)
	if err != nil {
		return n, "", c.fail(err)
	}
	if !resp.More {
		return n, "", nil
	}
	return n, string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00", nil
}

// deleteSessions deletes the sessions of the expiry entries kvs (under
// prefix), in one transaction if no entry moved since read, else one by
// one, skipping those that moved. It returns how many it deleted; visit,
// if not nil, gets the active ones once their transaction committed.
func (s *Store) deleteSessions(c *call, prefix string, kvs []*mvccpb.KeyValue, visit func(session.Session)) (int, error) {
	type victim struct {
		id string
		// report: the entry names a user, so the session was active; its
		// record's delete (ops[1]) then returns the record for visit.
		report bool
	}
	vs := make([]victim, 0, len(kvs))
	gs := make([]guarded, 0, len(kvs)) // gs[i] deletes vs[i]
	for _, kv := range kvs {
		key := string(kv.Key)
		if len(key) < len(prefix)+24 {
			return 0, fmt.Errorf("%w: session expiry entry %q", ErrCorrupt, key)
		}
		id, user := key[len(prefix)+24:], string(kv.Value)
		v := victim{id: id, report: user != "" && visit != nil}
		var recOpts []clientv3.OpOption
		if v.report {
			recOpts = append(recOpts, clientv3.WithPrevKV())
		}
		g := guarded{cmp: clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)}
		g.ops = []clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(s.sessionKey(id), recOpts...)}
		if user != "" {
			g.ops = append(g.ops, s.ifSlotHolds(user, id, clientv3.OpDelete(s.slotKey(user))))
		}
		vs = append(vs, v)
		gs = append(gs, g)
	}
	// visited visits vs[i]'s record, from rs[1], the response of its
	// record's delete.
	visited := func(i int, rs []*etcdserverpb.ResponseOp) {
		v := vs[i]
		if !v.report {
			return
		}
		prev := rs[1].GetResponseDeleteRange().GetPrevKvs()
		if len(prev) == 0 {
			return // the record had vanished (its lease), the entry not yet
		}
		var sess session.Session
		if err := decodeSession(v.id, prev[0].Value, &sess); err != nil {
			s.log.Warn("etcdstore: swept an undecodable session record", "err", err)
			return
		}
		if sess.Status == session.StatusActive {
			visit(sess)
		}
	}
	return s.commitGuarded(c.ctx, gs, visited)
}

var _ session.ActiveCounter = (*Store)(nil)

// CountActiveSessions implements [session.ActiveCounter]: the number of
// occupied user slots, with one count-only range over the slot keys (no
// record is read). Every write that closes a session, and the sweep,
// delete its slot in the same transaction, and a slot expires with its
// session's lease, so a slot is occupied exactly while its session is
// active; an active session whose ExpiresAt has passed counts until it is
// swept (or its lease ends).
func (s *Store) CountActiveSessions(ctx context.Context) (int, error) {
	c, err := s.begin(ctx, "count active sessions", true)
	if err != nil {
		return 0, err
	}
	defer c.end()
	resp, err := s.cli.Get(c.ctx, s.prefix+sessionByUser, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, c.fail(err)
	}
	return int(resp.Count), nil
}
