package httpserver

import (
	"strconv"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/audit"
)

// authAuditWindow is the period over which repeated failed
// authentications are counted into one audit entry.
const authAuditWindow = time.Minute

// maxAuthAuditKeys bounds the distinct failures (client, token, route,
// code, reason) tracked in one window; the failures of any further ones
// are counted together under the client address OtherClients.
const maxAuthAuditKeys = 256

// OtherClients is the client_ip of the audit entry that counts, for one
// window, the failed authentications of the clients beyond those tracked
// one by one.
const OtherClients = "other"

// authKey is what makes two failed authentications the same one.
type authKey struct {
	actor, principal, client, code, reason, route string
}

// authCount counts the failures of one key after the first, which was
// recorded at once.
type authCount struct {
	n           int
	first, last time.Time
}

// authAuditor aggregates the audit entries of failed authentications:
// the first failure of a key in a window (a minute of the server's clock)
// is recorded at once; the further ones are counted and recorded as one
// entry, with their count, when the window ends (at the next failure after
// it, when a timer fires, or at Server.Close). Its memory is bounded by
// maxAuthAuditKeys keys plus one per code and reason for the others.
type authAuditor struct {
	now    func() time.Time
	record func(audit.Entry)

	mu     sync.Mutex
	window time.Time // start of the current window
	keys   map[authKey]*authCount
	others map[authKey]*authCount // client OtherClients, no actor or route
	timer  *time.Timer
}

func newAuthAuditor(now func() time.Time, record func(audit.Entry)) *authAuditor {
	return &authAuditor{now: now, record: record, keys: map[authKey]*authCount{}, others: map[authKey]*authCount{}}
}

// failure counts a failed authentication of key; requestID is the
// request's, recorded with a key's first failure in the window.
func (a *authAuditor) failure(k authKey, requestID string) {
	now := a.now()
	a.mu.Lock()
	var out []audit.Entry
	if w := now.Truncate(authAuditWindow); !w.Equal(a.window) {
		out = a.flushLocked()
		a.window = w
	}
	if c, ok := a.keys[k]; ok {
		c.add(now)
		a.armLocked(now)
	} else if len(a.keys) < maxAuthAuditKeys {
		a.keys[k] = &authCount{}
		e := authEntry(k, time.Time{}, 1) // stamped by the audit log, as any other entry
		e.Details["request_id"] = requestID
		out = append(out, e)
	} else {
		ok := authKey{client: OtherClients, code: k.code, reason: k.reason}
		c := a.others[ok]
		if c == nil {
			c = &authCount{}
			a.others[ok] = c
		}
		c.add(now)
		a.armLocked(now)
	}
	a.mu.Unlock()
	for _, e := range out {
		a.record(e)
	}
}

func (c *authCount) add(t time.Time) {
	if c.n == 0 {
		c.first = t
	}
	c.n++
	c.last = t
}

// armLocked starts the timer that flushes the window once it ends.
func (a *authAuditor) armLocked(now time.Time) {
	if a.timer == nil {
		a.timer = time.AfterFunc(a.window.Add(authAuditWindow).Sub(now), a.tick)
	}
}

// tick flushes the window if it has ended by the server's clock, else
// waits for its end again.
func (a *authAuditor) tick() {
	now := a.now()
	a.mu.Lock()
	a.timer = nil
	var out []audit.Entry
	if end := a.window.Add(authAuditWindow); now.Before(end) {
		a.timer = time.AfterFunc(max(end.Sub(now), time.Second), a.tick)
	} else {
		out = a.flushLocked()
	}
	a.mu.Unlock()
	for _, e := range out {
		a.record(e)
	}
}

// close stops the timer and records what the window counted.
func (a *authAuditor) close() {
	a.mu.Lock()
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	out := a.flushLocked()
	a.mu.Unlock()
	for _, e := range out {
		a.record(e)
	}
}

// flushLocked returns the entries of the counted failures of the window
// and starts an empty one.
func (a *authAuditor) flushLocked() []audit.Entry {
	var out []audit.Entry
	for _, m := range []map[authKey]*authCount{a.keys, a.others} {
		for k, c := range m {
			if c.n > 0 {
				e := authEntry(k, c.last, c.n)
				e.Details["first"] = c.first.UTC().Format(time.RFC3339Nano)
				out = append(out, e)
			}
		}
	}
	if len(a.keys) > 0 || len(a.others) > 0 {
		a.keys, a.others = map[authKey]*authCount{}, map[authKey]*authCount{}
	}
	return out
}

// authEntry is the audit entry of n failures of k, the last at t.
func authEntry(k authKey, t time.Time, n int) audit.Entry {
	d := map[string]string{
		"reason":    k.reason,
		"client_ip": k.client,
		"count":     strconv.Itoa(n),
	}
	if k.route != "" {
		d["route"] = k.route
	}
	return audit.Entry{
		Time:      t,
		Actor:     k.actor,
		Principal: k.principal,
		Action:    audit.ActionAuthFailure,
		Outcome:   audit.OutcomeDenied,
		Code:      k.code,
		Details:   d,
	}
}

// Close records the audit entries the server holds back: the counts of
// repeated failed authentications of the current minute. A host calls it
// once its http.Server has shut down, before closing the audit log. It is
// idempotent; a server used after Close keeps working (and a later Close
// flushes again).
func (s *Server) Close() error {
	s.authAudit.close()
	return nil
}
