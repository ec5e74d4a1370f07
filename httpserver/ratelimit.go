package httpserver

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RateLimit is a token-bucket budget: Requests requests per Per, with
// bursts of up to Requests. "100/15m" means a bucket of 100 that refills at
// 100 per 15 minutes. The zero RateLimit means no limit.
type RateLimit struct {
	Requests int
	Per      time.Duration
}

// The budgets of failed authentication attempts when
// Options.AuthFailureLimit and Options.AuthFailureGlobalLimit are zero:
// DefaultAuthFailures per client address, and DefaultAuthFailuresGlobal
// across all clients, per DefaultAuthFailurePeriod.
const (
	DefaultAuthFailures       = 20
	DefaultAuthFailuresGlobal = 1000
	DefaultAuthFailurePeriod  = time.Minute
)

// The most keys the server's rate limiters hold: token names, and client
// addresses of the failed-authentication throttle.
const (
	maxTokenBuckets  = 10_000
	maxClientBuckets = 100_000
)

// IsZero reports whether l is the zero RateLimit (no limit).
func (l RateLimit) IsZero() bool { return l.Requests <= 0 || l.Per <= 0 }

// String formats l as ParseRateLimit reads it ("100/15m", "off").
func (l RateLimit) String() string {
	if l.IsZero() {
		return "off"
	}
	return strconv.Itoa(l.Requests) + "/" + formatPeriod(l.Per)
}

func formatPeriod(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}

// ParseRateLimit reads a rate limit in the `--rate-limit` form
// "<requests>/<period>": the period is a Go duration ("15m", "1h30m",
// "10s"), a number of days ("1d"), or a bare unit meaning one of it ("s",
// "m", "h", "d", "sec", "second", "min", "minute", "hour", "day").
// "off", "none" and "0" mean no limit (the zero RateLimit).
func ParseRateLimit(s string) (RateLimit, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "off", "none", "0", "unlimited":
		return RateLimit{}, nil
	case "":
		return RateLimit{}, errors.New(`httpserver: empty rate limit (want e.g. "100/15m", or "off")`)
	}
	ns, ds, ok := strings.Cut(s, "/")
	if !ok {
		return RateLimit{}, fmt.Errorf(`httpserver: rate limit %q: want <requests>/<period>, e.g. "100/15m"`, s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(ns))
	if err != nil || n <= 0 || n > 1_000_000_000 {
		return RateLimit{}, fmt.Errorf("httpserver: rate limit %q: the request count must be a positive integer", s)
	}
	per, err := parsePeriod(strings.TrimSpace(ds))
	if err != nil {
		return RateLimit{}, fmt.Errorf("httpserver: rate limit %q: %w", s, err)
	}
	return RateLimit{Requests: n, Per: per}, nil
}

func parsePeriod(s string) (time.Duration, error) {
	units := map[string]time.Duration{
		"s": time.Second, "sec": time.Second, "second": time.Second,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute,
		"h": time.Hour, "hour": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour,
	}
	if d, ok := units[strings.ToLower(s)]; ok {
		return d, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 366 {
			return 0, errors.New("the period must be a duration such as 15m, 1h or 1d")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, errors.New("the period must be a duration such as 15m, 1h or 1d")
		}
	}
	if d < time.Millisecond || d > 366*24*time.Hour {
		return 0, errors.New("the period must be between 1ms and 366d")
	}
	return d, nil
}

// quota is the state of one bucket after a request.
type quota struct {
	// allowed is false when the request was refused (take only).
	allowed   bool
	limit     int
	remaining int
	// reset is how long until the bucket is full again.
	reset time.Duration
	// retryAfter is how long until the next request is allowed; zero when
	// one is allowed now.
	retryAfter time.Duration
}

// limiters holds one token bucket per key (token name or client
// address). It never holds more than max keys, so memory stays bounded
// whatever the keys: buckets idle long enough to be full again are
// dropped (a fresh bucket behaves the same), and at the bound the least
// recently used one is dropped to make room. Every operation is O(1).
type limiters struct {
	limit RateLimit
	rate  float64 // tokens per second
	fill  int64   // how long an empty bucket takes to fill, in ns
	max   int

	mu sync.Mutex
	m  map[string]*bucket
	// lru is the sentinel of a ring of the buckets in m, most recently
	// used first (lru.next) and least recently used last (lru.prev).
	lru bucket
}

// bucket is one key's token bucket, as x/time/rate's Limiter keeps one:
// it held tokens at last (its last use, in Unix nanoseconds), and refills
// at rate up to limit.Requests. Keeping it inline (no Limiter, no mutex
// of its own) halves the memory and the locking of a bucket.
type bucket struct {
	key        string
	tokens     float64
	last       int64
	prev, next *bucket
}

func newLimiters(l RateLimit, capacity int) *limiters {
	if l.IsZero() {
		return nil
	}
	ls := &limiters{
		limit: l,
		rate:  float64(l.Requests) / l.Per.Seconds(),
		fill:  int64(l.Per),
		max:   max(capacity, 1),
		m:     make(map[string]*bucket),
	}
	ls.lru.prev, ls.lru.next = &ls.lru, &ls.lru
	return ls
}

// tokensAt returns b's tokens at now; a clock going back neither fills
// nor drains it.
func (l *limiters) tokensAt(b *bucket, now int64) float64 {
	if now <= b.last {
		return b.tokens
	}
	return min(float64(l.limit.Requests), b.tokens+float64(now-b.last)/1e9*l.rate)
}

// get returns key's bucket, creating it, as the most recently used one.
// l.mu is held.
func (l *limiters) get(key string, now int64) *bucket {
	if b := l.m[key]; b != nil {
		l.unlink(b)
		l.pushFront(b)
		return b
	}
	var b *bucket // reused from a dropped one: at the bound, no garbage
	for old := l.lru.prev; old != &l.lru && (len(l.m) >= l.max || now-old.last >= l.fill); old = l.lru.prev {
		l.unlink(old)
		delete(l.m, old.key)
		b = old
	}
	if b == nil {
		b = new(bucket)
	}
	*b = bucket{key: key, tokens: float64(l.limit.Requests), last: now}
	l.m[key] = b
	l.pushFront(b)
	return b
}

func (l *limiters) unlink(b *bucket) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
}

func (l *limiters) pushFront(b *bucket) {
	b.prev, b.next = &l.lru, l.lru.next
	l.lru.next.prev = b
	l.lru.next = b
}

// take spends one request of key's budget, if there is one.
func (l *limiters) take(key string, now time.Time) quota {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns := now.UnixNano()
	b := l.get(key, ns)
	b.tokens = l.tokensAt(b, ns)
	b.last = max(b.last, ns)
	ok := b.tokens >= 1
	if ok {
		b.tokens--
	}
	q := l.quota(b.tokens)
	q.allowed = ok
	return q
}

// peek reports key's budget without spending it (it neither creates a
// bucket nor changes the order of eviction): retryAfter is non-zero when
// key has nothing left.
func (l *limiters) peek(key string, now time.Time) quota {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[key]
	if b == nil {
		return quota{allowed: true, limit: l.limit.Requests, remaining: l.limit.Requests}
	}
	q := l.quota(l.tokensAt(b, now.UnixNano()))
	q.allowed = q.retryAfter == 0
	return q
}

// quota describes a bucket holding tokens, in [0, burst] (take never
// overdraws).
func (l *limiters) quota(tokens float64) quota {
	q := quota{limit: l.limit.Requests, remaining: max(0, int(math.Floor(tokens)))}
	perToken := 1 / l.rate
	q.reset = seconds((float64(l.limit.Requests) - tokens) * perToken)
	if tokens < 1 {
		q.retryAfter = max(seconds((1-tokens)*perToken), time.Millisecond)
	}
	return q
}

func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// len returns the number of buckets held (for tests).
func (l *limiters) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// setRateHeaders writes the RateLimit headers of the IETF draft
// (delta-seconds) and the legacy X-RateLimit ones (reset as a Unix time,
// as express-rate-limit sends them).
func setRateHeaders(h http.Header, l RateLimit, q quota, now time.Time) {
	limit := strconv.Itoa(q.limit)
	remaining := strconv.Itoa(q.remaining)
	reset := ceilSeconds(q.reset)
	h.Set("RateLimit-Limit", limit)
	h.Set("RateLimit-Remaining", remaining)
	h.Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
	h.Set("RateLimit-Policy", limit+";w="+strconv.FormatInt(ceilSeconds(l.Per), 10))
	h.Set("X-RateLimit-Limit", limit)
	h.Set("X-RateLimit-Remaining", remaining)
	h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Unix()+reset, 10))
	if !q.allowed && q.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(q.retryAfter)), 10))
	}
}

func ceilSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}
