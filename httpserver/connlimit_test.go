package httpserver_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
)

// limitedServer serves a handler that reads the whole body and answers
// "ok", behind lim, on a loopback port.
func limitedServer(t *testing.T, lim *httpserver.ConnLimiter, useTLS bool) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	ts.Listener = lim.Listener(ts.Listener)
	ts.Config.ConnState = lim.ConnState
	ts.Config.ReadHeaderTimeout = time.Minute
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the evicted connections' handshake errors
	if useTLS {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	return ts
}

// dialFrom connects to ts from the loopback address src (any of
// 127.0.0.0/8 on Linux).
func dialFrom(t *testing.T, ts *httptest.Server, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c (a read returns EOF
// or a reset) rather than keeping it open for the whole wait.
func closedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// get sends GET /health on c and returns the status.
func getOn(t *testing.T, c net.Conn) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return resp.StatusCode
}

func requireLoopback8(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skip("127.0.0.2 is not routed to the loopback interface here:", err)
	}
	l.Close()
}

func TestConnLimiterPerClient(t *testing.T) {
	requireLoopback8(t)
	lim, err := httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{PerClient: 2})
	require.NoError(t, err)
	ts := limitedServer(t, lim, false)

	a1, a2 := dialFrom(t, ts, "127.0.0.2"), dialFrom(t, ts, "127.0.0.2")
	a3 := dialFrom(t, ts, "127.0.0.2")
	assert.True(t, closedByServer(a3, 5*time.Second), "the third connection of one address is closed at once")
	b := dialFrom(t, ts, "127.0.0.3")
	assert.Equal(t, http.StatusOK, getOn(t, b), "another address is served")
	assert.Equal(t, http.StatusOK, getOn(t, a1), "the connections within the cap are served")
	assert.Equal(t, http.StatusOK, getOn(t, a2))
	st := lim.Stats()
	assert.Equal(t, 3, st.Open)
	assert.Equal(t, uint64(1), st.Refused)

	// A closed connection frees its slot.
	require.NoError(t, a1.Close())
	require.Eventually(t, func() bool { return lim.Stats().Open == 2 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, http.StatusOK, getOn(t, dialFrom(t, ts, "127.0.0.2")))
}

func TestConnLimiterExempt(t *testing.T) {
	requireLoopback8(t)
	lim, err := httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{PerClient: 1, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.4/32")}})
	require.NoError(t, err)
	ts := limitedServer(t, lim, false)
	for range 3 {
		assert.Equal(t, http.StatusOK, getOn(t, dialFrom(t, ts, "127.0.0.4")), "a proxy has no per-client cap")
	}
	_ = dialFrom(t, ts, "127.0.0.5")
	assert.True(t, closedByServer(dialFrom(t, ts, "127.0.0.5"), 5*time.Second))
}

// TestConnLimiterEvictsLongestWaiting: at the global cap, a new client
// is served; the connections that waited longest for headers go first,
// before one in the middle of a request.
func TestConnLimiterEvictsLongestWaiting(t *testing.T) {
	requireLoopback8(t)
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			lim, err := httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{Max: 3})
			require.NoError(t, err)
			ts := limitedServer(t, lim, useTLS)

			// A request whose body never comes: the connection serves it.
			slow := dialFrom(t, ts, "127.0.0.6")
			if useTLS {
				slow = tlsClient(t, ts, slow)
			}
			_, err = io.WriteString(slow, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
			require.NoError(t, err)
			idle1 := dialFrom(t, ts, "127.0.0.7")
			idle2 := dialFrom(t, ts, "127.0.0.8")
			require.Eventually(t, func() bool { st := lim.Stats(); return st.Open == 3 && st.Waiting == 2 }, 5*time.Second, 5*time.Millisecond)
			time.Sleep(1100 * time.Millisecond) // past the eviction grace

			c := dialFrom(t, ts, "127.0.0.9")
			if useTLS {
				c = tlsClient(t, ts, c)
			}
			assert.Equal(t, http.StatusOK, getOn(t, c), "a client arriving at the cap is served")
			assert.True(t, closedByServer(idle1, 5*time.Second), "the connection waiting longest is evicted")
			assert.False(t, closedByServer(idle2, 200*time.Millisecond), "only one is evicted")
			assert.False(t, closedByServer(slow, 200*time.Millisecond), "a connection serving a request outlives a waiting one")
			st := lim.Stats()
			assert.Equal(t, 3, st.Open)
			assert.Equal(t, uint64(1), st.Evicted)
		})
	}
}

// tlsClient runs a TLS handshake over c with ts's certificate.
func tlsClient(t *testing.T, ts *httptest.Server, c net.Conn) net.Conn {
	t.Helper()
	cfg := ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "example.com"
	cfg.NextProtos = []string{"http/1.1"}
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	require.NoError(t, tc.Handshake())
	_ = tc.SetDeadline(time.Time{})
	return tc
}

func TestNewConnLimiterRefusesNegativeCaps(t *testing.T) {
	_, err := httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{Max: -1})
	assert.Error(t, err)
	_, err = httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{PerClient: -1})
	assert.Error(t, err)
	lim, err := httpserver.NewConnLimiter(nil)
	require.NoError(t, err)
	assert.Equal(t, httpserver.ConnStats{}, lim.Stats())
}
