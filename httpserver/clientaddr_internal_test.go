package httpserver

import (
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 2001:db8:ffff::/48")
	require.NoError(t, err)
	ps := proxies(trusted)
	for _, c := range []struct {
		name   string
		remote string
		hdr    map[string][]string
		want   string
	}{
		{"no proxy header", "10.0.0.1:5000", nil, "10.0.0.1"},
		{"untrusted peer", "203.0.113.9:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "203.0.113.9"},
		{"untrusted peer, Forwarded", "203.0.113.9:5000", map[string][]string{"Forwarded": {"for=198.51.100.1"}}, "203.0.113.9"},
		{"trusted peer", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"rightmost untrusted hop", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"192.0.2.66, 198.51.100.1, 10.2.3.4"}}, "198.51.100.1"},
		{"spoofed hops to the left are ignored", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"garbage, 10.9.9.9, 198.51.100.1"}}, "198.51.100.1"},
		{"several lines", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"192.0.2.66", "198.51.100.1, 10.2.3.4"}}, "198.51.100.1"},
		{"several lines, the last one trusted", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1", "10.2.3.4"}}, "198.51.100.1"},
		{"all hops trusted: the leftmost", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"10.5.5.5, 10.2.3.4"}}, "10.5.5.5"},
		{"hop with a port", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1:443"}}, "198.51.100.1"},
		{"IPv6 hop", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"[2001:db8::7]:80, 2001:db8:ffff::1"}}, "2001:db8::7"},
		{"IPv4-mapped peer", "[::ffff:10.0.0.1]:5000", map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.1"}}, "198.51.100.1"},
		{"IPv6 trusted peer", "[2001:db8:ffff::2]:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"malformed hop", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1, nonsense"}}, "10.0.0.1"},
		{"empty hop", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1,"}}, "10.0.0.1"},
		{"empty header", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {""}}, "10.0.0.1"},
		{"zone", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"fe80::1%eth0"}}, "10.0.0.1"},
		{"Forwarded", "10.0.0.1:5000", map[string][]string{"Forwarded": {"for=192.0.2.60;proto=http;by=203.0.113.43"}}, "192.0.2.60"},
		{"Forwarded, case and spaces", "10.0.0.1:5000", map[string][]string{"Forwarded": {"For=192.0.2.43 ; proto=https, for=10.1.1.1"}}, "192.0.2.43"},
		{"Forwarded, quoted IPv6 with port", "10.0.0.1:5000", map[string][]string{"Forwarded": {`for="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::17"},
		{"Forwarded, quoted comma", "10.0.0.1:5000", map[string][]string{"Forwarded": {`for=192.0.2.1;x="a,b", for=198.51.100.1`}}, "198.51.100.1"},
		{"Forwarded, several lines", "10.0.0.1:5000", map[string][]string{"Forwarded": {`for="broken`, "for=198.51.100.1"}}, "198.51.100.1"},
		{"Forwarded, unknown", "10.0.0.1:5000", map[string][]string{"Forwarded": {"for=unknown"}}, "10.0.0.1"},
		{"Forwarded, obfuscated", "10.0.0.1:5000", map[string][]string{"Forwarded": {"for=_hidden, for=10.1.1.1"}}, "10.0.0.1"},
		{"Forwarded, no for", "10.0.0.1:5000", map[string][]string{"Forwarded": {"proto=https"}}, "10.0.0.1"},
		{"Forwarded, two for", "10.0.0.1:5000", map[string][]string{"Forwarded": {"for=192.0.2.1;for=192.0.2.2"}}, "10.0.0.1"},
		{"Forwarded, unterminated quote", "10.0.0.1:5000", map[string][]string{"Forwarded": {`for="192.0.2.1`}}, "10.0.0.1"},
		{"Forwarded, garbage", "10.0.0.1:5000", map[string][]string{"Forwarded": {"192.0.2.1"}}, "10.0.0.1"},
		{"both headers agree", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=198.51.100.1"}}, "198.51.100.1"},
		{"both headers disagree", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=192.0.2.99"}}, "10.0.0.1"},
		{"one header malformed", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for="}}, "10.0.0.1"},
		{"too many trusted hops", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1" + strings.Repeat(", 10.0.0.2", maxForwardedHops)}}, "10.0.0.1"},
		{"Forwarded line too long", "10.0.0.1:5000", map[string][]string{"Forwarded": {"for=198.51.100.1;x=" + strings.Repeat("a", maxForwardedLine)}}, "10.0.0.1"},
		{"not an IP peer", "@", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "@"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/agents", nil)
			r.RemoteAddr = c.remote
			for k, v := range c.hdr {
				r.Header[k] = v
			}
			assert.Equal(t, c.want, ps.clientAddr(r))
		})
	}

	// No trusted proxy: the headers are never read.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:1"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	assert.Equal(t, "10.0.0.1", proxies(nil).clientAddr(r))
}

// clientN is the i-th address of 10.0.0.0/8.
func clientN(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}

func TestThrottleKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1":             "192.0.2.1",
		"::ffff:192.0.2.1":      "192.0.2.1",
		"2001:db8:1:2:3:4:5:6":  "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":    "2001:db8:1:2::/64",
		"@":                     "@",
		"":                      "",
		"fe80::1%eth0":          "fe80::1%eth0",
		"2001:db8:1:3:ffff::1":  "2001:db8:1:3::/64",
		"2001:0db8:0001:0002::": "2001:db8:1:2::/64",
	} {
		assert.Equal(t, want, throttleKey(in), in)
	}
}

// clientsFed is how many distinct client addresses
// TestLimitersMillionClients feeds the failed-authentication throttle.
const clientsFed = 1_000_000

// TestLimitersMillionClients: a million distinct client addresses, all
// within the period (none idle long enough to be dropped as full), never
// make the map hold more than its bound, and the heap stays within what
// that many buckets need; the most recent clients keep their state.
func TestLimitersMillionClients(t *testing.T) {
	l := newLimiters(RateLimit{Requests: DefaultAuthFailures, Per: DefaultAuthFailurePeriod}, maxClientBuckets)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	keys := make([]byte, 0, 16)
	for i := range clientsFed {
		keys = clientN(i).AppendTo(keys[:0])
		l.take(string(keys), now.Add(time.Duration(i)*time.Microsecond)) // a million in 1 s
		if i%65536 == 0 {
			require.LessOrEqual(t, l.len(), maxClientBuckets)
		}
	}
	assert.Equal(t, maxClientBuckets, l.len())
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d clients fed, %d buckets held, heap grew %d KiB (%d B a bucket)", clientsFed, l.len(), grown/1024, grown/int64(l.len()))
	assert.Less(t, grown, int64(maxClientBuckets)*400, "at most ~400 B a bucket")

	last := clientN(clientsFed - 1).String()
	q := l.peek(last, now.Add(time.Second))
	assert.Equal(t, DefaultAuthFailures-1, q.remaining, "the latest client's bucket is kept")
	first := "10.0.0.0"
	assert.Equal(t, DefaultAuthFailures, l.peek(first, now.Add(time.Second)).remaining, "the oldest were dropped")

	// Per-token buckets are the same type, with their own bound.
	tl := newLimiters(RateLimit{Requests: 100, Per: time.Minute}, maxTokenBuckets)
	for i := range 3 * maxTokenBuckets {
		tl.take("token-"+clientN(i).String(), now)
	}
	assert.Equal(t, maxTokenBuckets, tl.len())
}

// TestLimitersDropIdleBuckets: buckets full again are dropped as new keys
// come, and the least recently used one goes at the bound.
func TestLimitersDropIdleBuckets(t *testing.T) {
	l := newLimiters(RateLimit{Requests: 2, Per: time.Minute}, 3)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.take("a", now)
	l.take("b", now)
	l.take("c", now)
	l.take("a", now.Add(time.Second)) // a is now the most recent
	l.take("d", now.Add(2*time.Second))
	assert.Equal(t, 3, l.len())
	assert.Equal(t, 2, l.peek("b", now.Add(2*time.Second)).remaining, "b, the least recently used, was dropped")
	assert.Equal(t, 0, l.peek("a", now.Add(2*time.Second)).remaining, "a kept its state")

	// A minute after their last use, a, c and d are full: the next new
	// key drops them all.
	l.take("e", now.Add(62*time.Second))
	assert.Equal(t, 1, l.len())
}
