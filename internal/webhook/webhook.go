// Package webhook delivers events to one HTTP endpoint: each event a JSON
// body POSTed and signed with HMAC-SHA256, queued in a bounded queue that
// one goroutine drains, retried with exponential backoff.
//
// # Signature
//
// Every attempt carries:
//
//	Content-Type: application/json
//	X-Agentmesh-Event: <the event's type, e.g. session.closed>
//	X-Agentmesh-Delivery: <an id, the same on every attempt of one event>
//	X-Agentmesh-Timestamp: <Unix seconds when the attempt was signed>
//	X-Agentmesh-Signature: sha256=<hex of HMAC-SHA256(secret, timestamp + "." + body)>
//
// where timestamp is the header's decimal text and body the raw request
// body, byte for byte. A receiver recomputes the HMAC over the same
// bytes, compares in constant time, and refuses a timestamp too far from
// its clock (5 minutes, say) so a captured request cannot be replayed
// later; each attempt is signed anew, so a retry carries a fresh
// timestamp. A receiver may get one event twice (a retry after a reply
// that was lost): dedupe on X-Agentmesh-Delivery.
//
// # Delivery
//
// [Sender.Send] never blocks: when the queue is full (a slow or dead
// receiver) the event is dropped, counted and logged. An attempt that
// fails with a network error, a 5xx or a 429 is retried after an
// exponential backoff with jitter, or after the wait its Retry-After
// asks for; any other status outside 2xx, and a refusal of the client's
// endpoint policy, fails the event at once. [Sender.Shutdown] stops
// taking events and delivers those queued until its context is done.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/internal/retryafter"
	"github.com/agentmesh/agentmesh/netguard"
)

// The headers of a delivery.
const (
	HeaderEvent     = "X-Agentmesh-Event"
	HeaderDelivery  = "X-Agentmesh-Delivery"
	HeaderTimestamp = "X-Agentmesh-Timestamp"
	HeaderSignature = "X-Agentmesh-Signature"
)

// Defaults of [Options].
const (
	DefaultQueueSize     = 1000
	DefaultMaxAttempts   = 6
	DefaultMinBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultMaxRetryAfter = 2 * time.Minute
	DefaultTimeout       = 10 * time.Second
)

// MinSecretLen is the shortest secret [New] accepts, in bytes.
const MinSecretLen = 16

// Sign returns the X-Agentmesh-Signature value of body signed at ts:
// "sha256=" and the hex HMAC-SHA256, keyed with secret, of the decimal
// ts, a dot and body.
func Sign(secret []byte, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(strconv.AppendInt(nil, ts, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Options configures a [Sender]. A nil *Options, like the zero value of
// every field, means the documented default.
type Options struct {
	// Client sends the requests. Nil means a default client that does not
	// follow redirects; the mesh passes a client of its endpoint policy
	// (netguard), which does not either. A redirect fails the event. Each
	// attempt is bounded by Timeout, not by the client.
	Client *http.Client

	// QueueSize is how many events wait for delivery before Send drops
	// new ones. ≤ 0 means DefaultQueueSize (1000).
	QueueSize int

	// MaxAttempts is how many times an event is tried before it fails.
	// ≤ 0 means DefaultMaxAttempts (6).
	MaxAttempts int

	// MinBackoff is the wait before the first retry, doubled for each
	// next one up to MaxBackoff, with jitter (between half and all of
	// it). ≤ 0 means DefaultMinBackoff (500 ms), DefaultMaxBackoff (30 s).
	MinBackoff, MaxBackoff time.Duration

	// MaxRetryAfter caps the wait a Retry-After header asks for. ≤ 0
	// means DefaultMaxRetryAfter (2 min).
	MaxRetryAfter time.Duration

	// Timeout bounds each attempt. ≤ 0 means DefaultTimeout (10 s).
	Timeout time.Duration

	// UserAgent is the User-Agent header. Empty means "agentmesh".
	UserAgent string

	// Now is the clock of the timestamps. Nil means time.Now.
	Now func() time.Time

	// Logger receives failed deliveries and overflows at Warn, never a
	// body or the URL. Nil means discard.
	Logger *slog.Logger
}

// Sender posts events to one URL. It is safe for concurrent use. Create
// it with [New] and stop it with [Sender.Shutdown] (or Close); the zero
// Sender is not usable.
type Sender struct {
	url    string
	secret []byte
	o      Options

	queue chan item
	mu    sync.RWMutex // guards closing against Send
	// closing: Shutdown began; the queue is closed.
	closing bool

	ctx    context.Context // cancelled when Shutdown gives up on the queue
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine exited

	delivered, failed, dropped atomic.Uint64
	overflowing                atomic.Bool
}

type item struct {
	event, id string
	body      []byte
}

// New returns a Sender posting to rawURL (http or https), signing with
// secret (at least [MinSecretLen] bytes), and starts its goroutine.
func New(rawURL string, secret []byte, opts *Options) (*Sender, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, errors.New("webhook: the URL does not parse")
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, errors.New("webhook: the URL must be http:// or https:// with a host")
	case len(secret) < MinSecretLen:
		return nil, fmt.Errorf("webhook: the secret must be at least %d bytes", MinSecretLen)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	o.QueueSize = positive(o.QueueSize, DefaultQueueSize)
	o.MaxAttempts = positive(o.MaxAttempts, DefaultMaxAttempts)
	o.MinBackoff = positive(o.MinBackoff, DefaultMinBackoff)
	o.MaxBackoff = max(positive(o.MaxBackoff, DefaultMaxBackoff), o.MinBackoff)
	o.MaxRetryAfter = positive(o.MaxRetryAfter, DefaultMaxRetryAfter)
	o.Timeout = positive(o.Timeout, DefaultTimeout)
	if o.UserAgent == "" {
		o.UserAgent = "agentmesh"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{
		url:    rawURL,
		secret: bytes.Clone(secret),
		o:      o,
		queue:  make(chan item, o.QueueSize),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go s.run()
	return s, nil
}

func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Send queues body (JSON) as an event of type event and returns at once:
// true if queued, false if dropped because the queue is full or the
// Sender is shutting down. Send takes ownership of body.
func (s *Sender) Send(event string, body []byte) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closing {
		s.dropped.Add(1)
		return false
	}
	select {
	case s.queue <- item{event: event, id: newID(), body: body}:
		s.overflowing.Store(false)
		return true
	default:
		s.dropped.Add(1)
		if s.overflowing.CompareAndSwap(false, true) {
			s.o.Logger.Warn("webhook: queue full, dropping events until it drains", "queue_size", s.o.QueueSize, "dropped_total", s.dropped.Load())
		}
		return false
	}
}

// Delivered is the number of events the receiver accepted (2xx).
func (s *Sender) Delivered() uint64 { return s.delivered.Load() }

// Failed is the number of events given up on: refused (a 4xx other than
// 429, a redirect, the endpoint policy) or failing every attempt.
func (s *Sender) Failed() uint64 { return s.failed.Load() }

// Dropped is the number of events never tried to the end: dropped by
// Send on a full queue or after Shutdown began, or left undelivered when
// Shutdown's context ended.
func (s *Sender) Dropped() uint64 { return s.dropped.Load() }

// Shutdown stops taking events and waits until those queued are
// delivered (or failed), or until ctx is done: then it interrupts the
// attempt in flight, drops what is left (counted in Dropped) and returns
// ctx's error once the goroutine has exited. It is idempotent and safe
// for concurrent use.
func (s *Sender) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.queue)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return ctx.Err()
	}
}

// Close is Shutdown without a grace period: what is queued is dropped.
func (s *Sender) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Shutdown(ctx)
	return nil
}

func (s *Sender) run() {
	defer close(s.done)
	defer s.cancel()
	left := 0
	for it := range s.queue {
		if s.ctx.Err() != nil {
			left++
			continue
		}
		s.deliver(it)
	}
	if left > 0 {
		s.dropped.Add(uint64(left))
		s.o.Logger.Warn("webhook: shutdown ended before these events were delivered", "dropped", left)
	}
}

// deliver tries it until it is delivered, refused, out of attempts, or
// the Sender gives up on its queue.
func (s *Sender) deliver(it item) {
	var last string // what the last attempt ended with, for the log
	for attempt := 1; ; attempt++ {
		status, wait, err := s.attempt(it)
		switch {
		case err == nil && status/100 == 2:
			s.delivered.Add(1)
			return
		case s.ctx.Err() != nil:
			s.dropped.Add(1)
			s.o.Logger.Warn("webhook: shutdown interrupted a delivery", "event", it.event, "delivery", it.id, "attempts", attempt)
			return
		case err != nil:
			last = err.Error()
			if errors.Is(err, netguard.ErrNotAllowed) {
				s.fail(it, attempt, last)
				return
			}
		case status == http.StatusTooManyRequests || status/100 == 5:
			last = "HTTP " + strconv.Itoa(status)
		default:
			s.fail(it, attempt, "HTTP "+strconv.Itoa(status)+", not retried")
			return
		}
		if attempt >= s.o.MaxAttempts {
			s.fail(it, attempt, last)
			return
		}
		if wait <= 0 {
			wait = s.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			s.dropped.Add(1)
			s.o.Logger.Warn("webhook: shutdown interrupted a delivery", "event", it.event, "delivery", it.id, "attempts", attempt)
			return
		}
	}
}

func (s *Sender) fail(it item, attempts int, why string) {
	s.failed.Add(1)
	s.o.Logger.Warn("webhook: delivery failed", "event", it.event, "delivery", it.id, "attempts", attempts, "err", why)
}

// backoff is the wait after the attempt-th attempt failed: MinBackoff
// doubled per attempt, capped at MaxBackoff, of which a random half.
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.o.MinBackoff
	for range attempt - 1 {
		if d >= s.o.MaxBackoff/2 {
			d = s.o.MaxBackoff
			break
		}
		d *= 2
	}
	d = min(d, s.o.MaxBackoff)
	return d/2 + mathrand.N(d/2+1)
}

// attempt posts it once. It returns the status, the wait a 429 or 503
// asked for with Retry-After (0 for none), or the error of a request
// that got no reply — with the URL left out, since it may hold a token.
func (s *Sender) attempt(it item) (status int, wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(it.body))
	if err != nil {
		return 0, 0, err
	}
	now := s.o.Now()
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.o.UserAgent)
	req.Header.Set(HeaderEvent, it.event)
	req.Header.Set(HeaderDelivery, it.id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(s.secret, ts, it.body))
	resp, err := s.o.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		wait = retryafter.Parse(resp.Header.Get("Retry-After"), now, s.o.MaxRetryAfter)
	}
	return resp.StatusCode, wait, nil
}

// newID returns a random delivery id: 32 hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
