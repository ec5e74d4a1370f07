package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/logtest"
	"github.com/agentmesh/agentmesh/internal/webhook"
	"github.com/agentmesh/agentmesh/netguard"
)

var secret = []byte("0123456789abcdef-test-secret")

// delivery is one request the receiver got.
type delivery struct {
	at       time.Time
	body     string
	header   http.Header
	verified bool // the signature checks out, computed independently
}

// receiver is an httptest server answering each request with the next
// reply of replies (the last one repeated), recording every request.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []delivery
	replies []func(w http.ResponseWriter, r *http.Request)
	arrived chan struct{}
}

func newReceiver(t *testing.T, replies ...func(w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{replies: replies, arrived: make(chan struct{}, 100)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := delivery{at: time.Now(), body: string(body), header: r.Header.Clone(), verified: verify(r.Header, body)}
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, d)
		rc.mu.Unlock()
		rc.arrived <- struct{}{}
		reply := rc.replies[min(n, len(rc.replies)-1)]
		reply(w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// verify checks the signature headers the way a receiver would, without
// the package's code: HMAC-SHA256 over "<timestamp>.<body>".
func verify(h http.Header, body []byte) bool {
	ts := h.Get("X-Agentmesh-Timestamp")
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "." + string(body)))
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(h.Get("X-Agentmesh-Signature")))
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func status(code int) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// fast are options with short backoffs for tests.
func fast(o webhook.Options) *webhook.Options {
	o.MinBackoff, o.MaxBackoff = time.Millisecond, 5*time.Millisecond
	return &o
}

func newSender(t *testing.T, url string, opts *webhook.Options) *webhook.Sender {
	t.Helper()
	s, err := webhook.New(url, secret, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// drain shuts s down, letting it deliver what is queued.
func drain(t *testing.T, s *webhook.Sender) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
}

func TestSignedDelivery(t *testing.T) {
	rc := newReceiver(t, status(http.StatusNoContent))
	at := time.Unix(1748779200, 0)
	s := newSender(t, rc.srv.URL+"/hook", fast(webhook.Options{Now: func() time.Time { return at }}))
	body := `{"type":"session.closed","session_id":"s1"}`
	require.True(t, s.Send("session.closed", []byte(body)))
	drain(t, s)

	got := rc.deliveries()
	require.Len(t, got, 1)
	d := got[0]
	assert.True(t, d.verified, "the signature verifies with an independent HMAC")
	assert.Equal(t, body, d.body)
	assert.Equal(t, "1748779200", d.header.Get("X-Agentmesh-Timestamp"))
	assert.Equal(t, "session.closed", d.header.Get("X-Agentmesh-Event"))
	assert.Regexp(t, `^[0-9a-f]{32}$`, d.header.Get("X-Agentmesh-Delivery"))
	assert.Equal(t, "application/json", d.header.Get("Content-Type"))
	assert.Equal(t, uint64(1), s.Delivered())
	assert.Zero(t, s.Failed()+s.Dropped())

	// The published helper agrees with the independent computation, and
	// a changed body or timestamp does not verify.
	assert.Equal(t, d.header.Get("X-Agentmesh-Signature"), webhook.Sign(secret, 1748779200, []byte(body)))
	h := d.header.Clone()
	h.Set("X-Agentmesh-Timestamp", "1748779201")
	assert.False(t, verify(h, []byte(body)), "a replayed body with a new timestamp does not verify")
	assert.False(t, verify(d.header, []byte(body+" ")))
}

func TestRetriesOn5xx(t *testing.T) {
	rc := newReceiver(t, status(500), status(502), status(200))
	var mu sync.Mutex
	clock := time.Unix(1748779200, 0)
	now := func() time.Time { // each attempt a second later
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	s := newSender(t, rc.srv.URL, fast(webhook.Options{Now: now}))
	require.True(t, s.Send("session.closed", []byte(`{"n":1}`)))
	drain(t, s)
	got := rc.deliveries()
	require.Len(t, got, 3, "two failures, then delivered")
	for i, d := range got {
		assert.True(t, d.verified, "attempt %d is signed", i+1)
		assert.Equal(t, got[0].header.Get("X-Agentmesh-Delivery"), d.header.Get("X-Agentmesh-Delivery"), "one delivery id for every attempt")
	}
	assert.NotEqual(t, got[0].header.Get("X-Agentmesh-Timestamp"), got[2].header.Get("X-Agentmesh-Timestamp"), "each attempt is signed anew")
	assert.Equal(t, uint64(1), s.Delivered())
	assert.Zero(t, s.Failed())
}

func TestRetryAfterOn429(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}, status(200))
	s := newSender(t, rc.srv.URL, fast(webhook.Options{}))
	require.True(t, s.Send("e", []byte(`{}`)))
	drain(t, s)
	got := rc.deliveries()
	require.Len(t, got, 2)
	gap := got[1].at.Sub(got[0].at)
	assert.GreaterOrEqual(t, gap, 900*time.Millisecond, "the retry waits the second Retry-After asks for, not the 1 ms backoff")
	assert.Less(t, gap, 5*time.Second)
	assert.Equal(t, uint64(1), s.Delivered())
}

func TestNoRetryOn4xx(t *testing.T) {
	redirect := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }
	for _, tc := range []struct {
		name  string
		reply func(http.ResponseWriter, *http.Request)
	}{
		{"400", status(http.StatusBadRequest)},
		{"401", status(http.StatusUnauthorized)},
		{"404", status(http.StatusNotFound)},
		{"302", redirect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, tc.reply, status(200))
			var logs logtest.Buffer
			s := newSender(t, rc.srv.URL, fast(webhook.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
			require.True(t, s.Send("e", []byte(`{}`)))
			drain(t, s)
			assert.Len(t, rc.deliveries(), 1, "not retried, nor a redirect followed")
			assert.Equal(t, uint64(1), s.Failed())
			assert.Zero(t, s.Delivered())
			assert.Contains(t, logs.String(), "delivery failed")
		})
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	rc := newReceiver(t, status(503))
	s := newSender(t, rc.srv.URL, fast(webhook.Options{MaxAttempts: 3}))
	require.True(t, s.Send("e", []byte(`{}`)))
	drain(t, s)
	assert.Len(t, rc.deliveries(), 3)
	assert.Equal(t, uint64(1), s.Failed())
}

func TestRetriesNetworkErrors(t *testing.T) {
	// The first attempt's connection is cut before any reply.
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}, status(200))
	var logs logtest.Buffer
	url := rc.srv.URL + "/hook?token=URLSECRET"
	s := newSender(t, url, fast(webhook.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	require.True(t, s.Send("e", []byte(`{}`)))
	drain(t, s)
	assert.Len(t, rc.deliveries(), 2)
	assert.Equal(t, uint64(1), s.Delivered())

	// A receiver that never answers: the error is logged without the URL.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/hook?token=URLSECRET"
	dead.Close()
	s = newSender(t, deadURL, fast(webhook.Options{MaxAttempts: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	require.True(t, s.Send("e", []byte(`{}`)))
	drain(t, s)
	assert.Equal(t, uint64(1), s.Failed())
	assert.Contains(t, logs.String(), "delivery failed")
	assert.NotContains(t, logs.String(), "URLSECRET", "the URL may hold a token: never logged")
}

func TestEndpointPolicyRefusalIsNotRetried(t *testing.T) {
	rc := newReceiver(t, status(200))
	policy, err := netguard.NewPolicy(netguard.Options{AllowPrivate: false})
	require.NoError(t, err)
	s := newSender(t, rc.srv.URL, fast(webhook.Options{Client: policy.NewClient(nil)}))
	require.True(t, s.Send("e", []byte(`{}`)))
	drain(t, s)
	assert.Empty(t, rc.deliveries(), "the policy refuses loopback before any byte is sent")
	assert.Equal(t, uint64(1), s.Failed())
}

func TestOverflowDrops(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		<-release
		w.WriteHeader(200)
	})
	var logs logtest.Buffer
	s := newSender(t, rc.srv.URL, fast(webhook.Options{QueueSize: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	require.True(t, s.Send("e", []byte(`{"n":0}`)))
	<-rc.arrived // the first is in flight, blocked
	start := time.Now()
	assert.True(t, s.Send("e", []byte(`{"n":1}`)))
	assert.True(t, s.Send("e", []byte(`{"n":2}`)))
	for i := 3; i < 10; i++ {
		assert.False(t, s.Send("e", []byte(fmt.Sprintf(`{"n":%d}`, i))), "the queue is full")
	}
	assert.Less(t, time.Since(start), time.Second, "Send never blocks")
	assert.Equal(t, uint64(7), s.Dropped())
	assert.Equal(t, 1, strings.Count(logs.String(), "queue full"), "one warning per overflow, not one per event")
	close(release)
	drain(t, s)
	assert.Equal(t, uint64(3), s.Delivered())
	got := rc.deliveries()
	require.Len(t, got, 3)
	for i, d := range got {
		assert.Equal(t, fmt.Sprintf(`{"n":%d}`, i), d.body, "in order")
	}
}

func TestShutdownDrains(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(200)
	})
	s := newSender(t, rc.srv.URL, fast(webhook.Options{}))
	for i := range 5 {
		require.True(t, s.Send("e", []byte(strconv.Itoa(i))))
	}
	drain(t, s)
	assert.Len(t, rc.deliveries(), 5, "Shutdown delivers what was queued")
	assert.Equal(t, uint64(5), s.Delivered())
	assert.False(t, s.Send("e", []byte("late")), "no event after Shutdown")
	assert.Equal(t, uint64(1), s.Dropped())
	require.NoError(t, s.Shutdown(t.Context()), "idempotent")
}

func TestShutdownDeadline(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	s := newSender(t, rc.srv.URL, fast(webhook.Options{}))
	for i := range 4 {
		require.True(t, s.Send("e", []byte(strconv.Itoa(i))))
	}
	<-rc.arrived
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Shutdown(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second, "Shutdown returns at its deadline, interrupting the attempt")
	assert.Equal(t, uint64(4), s.Dropped(), "the one in flight and the three queued")
	assert.Zero(t, s.Delivered())
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		url    string
		secret string
	}{
		{"ftp://example.com/hook", string(secret)},
		{"https:///nohost", string(secret)},
		{"://bad", string(secret)},
		{"https://example.com/hook", "short"},
	} {
		_, err := webhook.New(tc.url, []byte(tc.secret), nil)
		assert.Error(t, err, "%s with a %d-byte secret", tc.url, len(tc.secret))
		if err != nil {
			assert.NotContains(t, err.Error(), tc.secret)
		}
	}
}
