package httpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConnections is the connection cap `agentmesh serve` uses by
// default (--max-connections), when the process may open that many files.
const DefaultMaxConnections = 10000

// DefaultMaxConnectionsPerClient is the per-client connection cap
// `agentmesh serve` uses by default (--max-connections-per-client).
const DefaultMaxConnectionsPerClient = 256

// evictGrace is how long a new or idle connection is spared from eviction
// while a connection serving a request can go instead: a client that has
// just connected gets this long to send its request's headers.
const evictGrace = time.Second

// ConnLimitOptions configures a [ConnLimiter]. The zero value of every
// field means no limit.
type ConnLimitOptions struct {
	// Max caps the connections open at once. A connection accepted at the
	// cap evicts (closes) another, in this order: the one that has waited
	// longest, and at least a second, for a request's headers (a new or
	// keep-alive idle connection: a slowloris, or a client that reconnects
	// transparently); else the one that has served its current request
	// longest (a slow body, a long poll); else the oldest new one. So a
	// client arriving at the cap is served, and what the cap holds is the
	// connections doing the most recent work. Zero means no cap.
	Max int

	// PerClient caps the connections of one client address: the TCP peer
	// (never a forwarding header, which is per request), an IPv6 client
	// by its /64. A connection over it is closed as soon as it is
	// accepted, so it holds no file descriptor. Zero means no cap.
	PerClient int

	// Exempt are the peers PerClient does not apply to: reverse proxies
	// (--trusted-proxies), whose connections carry many clients. They
	// still count toward Max. Empty means none.
	Exempt []netip.Prefix

	// Logger receives a Warn record when connections are refused or
	// evicted (at most one a minute, with the counts). Nil means discard.
	Logger *slog.Logger
}

// ConnLimiter caps the connections of an [http.Server], in total and per
// client address, so that a flood of slow clients cannot exhaust the
// process's file descriptors or keep other clients out. It sees the
// connections through a listener wrapper ([ConnLimiter.Listener]) and
// their state through the server's ConnState hook ([ConnLimiter.ConnState]);
// both must be installed:
//
//	lim, err := httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{Max: 10000, PerClient: 256})
//	hs := &http.Server{Handler: srv, ConnState: lim.ConnState, ReadHeaderTimeout: 10 * time.Second}
//	err = hs.Serve(lim.Listener(ln)) // or hs.ServeTLS(lim.Listener(ln), "", "")
//
// The limiter works below TLS, so a connection still in its handshake
// counts as waiting for headers. Pair it with the server's
// ReadHeaderTimeout and ReadTimeout, which bound how long a slow client
// holds a connection in the first place.
//
// A ConnLimiter is safe for concurrent use and may serve several
// listeners of one server (the caps are shared). It starts no goroutine.
// The zero ConnLimiter limits nothing and only counts.
type ConnLimiter struct {
	max       int
	perClient int
	exempt    []netip.Prefix
	log       *slog.Logger

	mu      sync.Mutex
	open    int
	clients map[netip.Prefix]int
	waiting connList // new or idle: waiting for a request's headers, oldest first
	busy    connList // serving a request (or hijacked), oldest first

	refused  atomic.Uint64
	evicted  atomic.Uint64
	lastWarn atomic.Int64 // unix nanoseconds of the last Warn record
}

// NewConnLimiter returns a limiter configured by opts (nil means no
// limits). A negative cap is an error.
func NewConnLimiter(opts *ConnLimitOptions) (*ConnLimiter, error) {
	var o ConnLimitOptions
	if opts != nil {
		o = *opts
	}
	if o.Max < 0 || o.PerClient < 0 {
		return nil, errors.New("httpserver: connection caps must be 0 (no limit) or more")
	}
	l := &ConnLimiter{max: o.Max, perClient: o.PerClient, exempt: slices.Clone(o.Exempt), log: o.Logger}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

// ConnStats are a [ConnLimiter]'s counts.
type ConnStats struct {
	Open    int    // connections open now
	Waiting int    // of which new or idle (waiting for a request's headers)
	Refused uint64 // connections closed at accept for their client's cap, since the start
	Evicted uint64 // connections closed to make room under Max, since the start
}

// Stats returns the limiter's counts.
func (l *ConnLimiter) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ConnStats{Open: l.open, Waiting: l.waiting.n, Refused: l.refused.Load(), Evicted: l.evicted.Load()}
}

// Listener returns ln with the limiter applied to the connections it
// accepts. A connection over its client's cap is closed before Accept
// returns, and Accept waits for the next one.
func (l *ConnLimiter) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

// ConnState is the http.Server ConnState hook that tells the limiter
// which connections wait for a request and which serve one. A server
// with its own hook calls this one from it.
func (l *ConnLimiter) ConnState(c net.Conn, state http.ConnState) {
	lc := unwrapConn(c)
	if lc == nil || lc.l != l {
		return
	}
	switch state {
	case http.StateActive, http.StateHijacked:
		l.move(lc, &l.busy)
	case http.StateIdle:
		l.move(lc, &l.waiting)
	case http.StateClosed:
		l.release(lc)
	}
}

// unwrapConn finds the limiter's connection under c (a *tls.Conn, say).
func unwrapConn(c net.Conn) *limitedConn {
	for range 4 {
		switch v := c.(type) {
		case *limitedConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

type limitedListener struct {
	net.Listener
	l *ConnLimiter
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, victim := ln.l.admit(c)
		if victim != nil {
			_ = victim.Conn.Close()
		}
		if lc == nil {
			_ = c.Close()
			continue
		}
		return lc, nil
	}
}

// admit accounts for the new connection c and returns it wrapped, with
// the connection to close to make room for it, if any; nil when c is over
// its client's cap.
func (l *ConnLimiter) admit(c net.Conn) (lc, victim *limitedConn) {
	key, capped := l.clientKey(c.RemoteAddr())
	l.mu.Lock()
	if capped && l.clients[key] >= l.perClient {
		l.mu.Unlock()
		l.refused.Add(1)
		l.warn()
		return nil, nil
	}
	if l.max > 0 && l.open >= l.max {
		victim = l.victim(time.Now())
		if victim != nil {
			l.releaseLocked(victim)
		}
	}
	lc = &limitedConn{Conn: c, l: l, key: key, capped: capped, since: time.Now()}
	l.open++
	if capped {
		if l.clients == nil {
			l.clients = make(map[netip.Prefix]int)
		}
		l.clients[key]++
	}
	l.waiting.pushBack(lc)
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		l.warn()
	}
	return lc, victim
}

// victim chooses the connection to evict at the cap (ConnLimitOptions.Max).
func (l *ConnLimiter) victim(now time.Time) *limitedConn {
	if w := l.waiting.head; w != nil && now.Sub(w.since) >= evictGrace {
		return w
	}
	if b := l.busy.head; b != nil {
		return b
	}
	return l.waiting.head
}

// clientKey returns the per-client key of addr (an IPv6 address by its
// /64) and whether the per-client cap applies to it.
func (l *ConnLimiter) clientKey(addr net.Addr) (netip.Prefix, bool) {
	if l.perClient == 0 {
		return netip.Prefix{}, false
	}
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	for _, p := range l.exempt {
		if p.Contains(a) {
			return netip.Prefix{}, false
		}
	}
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p, true
}

// move puts lc at the back of list q, unless it is released.
func (l *ConnLimiter) move(lc *limitedConn, q *connList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.released {
		return
	}
	lc.list.remove(lc)
	lc.since = time.Now()
	q.pushBack(lc)
}

// release stops counting lc; it is idempotent.
func (l *ConnLimiter) release(lc *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(lc)
}

func (l *ConnLimiter) releaseLocked(lc *limitedConn) {
	if lc.released {
		return
	}
	lc.released = true
	lc.list.remove(lc)
	l.open--
	if lc.capped {
		if l.clients[lc.key]--; l.clients[lc.key] <= 0 {
			delete(l.clients, lc.key)
		}
	}
}

// warn logs the refusals and evictions, at most once a minute.
func (l *ConnLimiter) warn() {
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(time.Minute) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	if !l.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn,
		"connection limits reached: connections over a client's cap are closed at accept, and at the global cap the longest-waiting ones are evicted",
		slog.Int("max", l.max), slog.Int("per_client", l.perClient),
		slog.Uint64("refused_total", l.refused.Load()), slog.Uint64("evicted_total", l.evicted.Load()))
}

// limitedConn is a connection counted by a ConnLimiter: its Close stops
// the counting.
type limitedConn struct {
	net.Conn
	l      *ConnLimiter
	key    netip.Prefix
	capped bool // counted against key's cap

	// Guarded by l.mu.
	since      time.Time // when it entered its list
	released   bool
	list       *connList
	prev, next *limitedConn
}

func (c *limitedConn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}

// connList is a doubly linked list of connections, oldest first.
type connList struct {
	head, tail *limitedConn
	n          int
}

func (q *connList) pushBack(c *limitedConn) {
	c.list, c.prev, c.next = q, q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
	q.n++
}

// remove takes c out of q; a nil q does nothing.
func (q *connList) remove(c *limitedConn) {
	if q == nil {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.list, c.prev, c.next = nil, nil, nil
	q.n--
}
