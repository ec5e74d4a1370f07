package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flood sizes: floodClients addresses of 127.0.0.0/8, each opening
// floodPerClient slow connections, against a serve capped at floodMax.
const (
	floodMax       = 1500
	floodPerClient = 8
	floodClients   = 600 // 4800 connections, over three times the cap
)

// TestE2ESlowClientFlood: thousands of slow clients (half stuck in their
// headers, half in their bodies) from hundreds of loopback addresses
// never stop /health from answering; one address holds no more than its
// cap, the connections over it hold no descriptor of the server, and the
// server holds no more than --max-connections.
func TestE2ESlowClientFlood(t *testing.T) {
	requireLoopbackNet(t)
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{
		"--store", "memory", "--read-timeout", "2m",
		"--max-connections", strconv.Itoa(floodMax), "--max-connections-per-client", strconv.Itoa(floodPerClient),
	}})
	addr := strings.TrimPrefix(p.url, "http://")
	pid := p.cmd.Process.Pid
	base := serverFDs(t, pid)

	// One address: its connections over the cap are closed at accept.
	var one []net.Conn
	for range 3 * floodPerClient {
		one = append(one, dialFromAddr(t, addr, "127.1.0.1"))
	}
	served := 0
	for _, c := range one {
		if status, err := healthOn(c); err == nil {
			require.Equal(t, http.StatusOK, status)
			served++
		}
	}
	assert.Equal(t, floodPerClient, served, "the connections of one address served")
	assert.LessOrEqual(t, serverFDs(t, pid)-base, floodPerClient+8, "descriptors held for %d connections of one address", len(one))
	for _, c := range one {
		c.Close()
	}

	// The flood, with /health probed on a new connection every 50 ms
	// while it runs and after.
	var (
		mu        sync.Mutex
		latencies []time.Duration
		failures  []string
	)
	probes := 0
	probe := func() {
		// Each probe from an address of its own, as the per-client cap
		// is not what this measures: closed probes linger on the server
		// until it reads their end.
		probes++
		src := fmt.Sprintf("127.3.%d.%d", probes/250, probes%250+1)
		start := time.Now()
		err := probeHealth(addr, src)
		mu.Lock()
		defer mu.Unlock()
		latencies = append(latencies, time.Since(start))
		if err != nil {
			failures = append(failures, err.Error())
		}
	}
	stop := make(chan struct{})
	probing := make(chan struct{})
	go func() {
		defer close(probing)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				probe()
			}
		}
	}()

	start := time.Now()
	conns := make([]net.Conn, 0, floodClients*floodPerClient)
	var dialErrs int
	for i := range floodClients {
		src := fmt.Sprintf("127.2.%d.%d", i/250, i%250+1)
		for j := range floodPerClient {
			c, err := dialSlow(addr, src, j%2 == 0)
			if err != nil {
				dialErrs++
				continue
			}
			conns = append(conns, c)
		}
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	opened := time.Since(start)
	// The flood holds its connections for a second, and until at least
	// five probes have answered during it (a loaded machine probes slowly).
	for held := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(latencies) + len(failures)
		mu.Unlock()
		if time.Since(held) >= time.Second && n >= 5 || time.Since(held) > 30*time.Second {
			break
		}
	}
	close(stop)
	<-probing
	held := serverFDs(t, pid) - base
	for range 5 {
		probe()
	}

	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latencies)
	t.Logf("%d slow connections from %d addresses opened in %s (%d dial errors); server holds %d more descriptors; /health probes: %d, median %s, max %s",
		len(conns), floodClients, opened.Round(time.Millisecond), dialErrs, held, len(latencies),
		latencies[len(latencies)/2].Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond))
	assert.Empty(t, failures, "every /health probe answers during and after the flood")
	assert.GreaterOrEqual(t, len(latencies), 10)
	assert.Less(t, latencies[len(latencies)-1], 10*time.Second, "the slowest /health")
	assert.LessOrEqual(t, held, floodMax+16, "the server holds at most --max-connections")
	assert.GreaterOrEqual(t, held, floodMax/2, "the flood reached the cap (else it tests nothing)")
	assert.Zero(t, dialErrs, "the kernel accepted every connection")

	m := metricsText(t, p)
	assert.Greater(t, counter(t, m, "agentmesh_http_connections_evicted_total"), float64(0))
	assert.GreaterOrEqual(t, counter(t, m, "agentmesh_http_connections_refused_total"), float64(2*floodPerClient))
	assert.LessOrEqual(t, counter(t, m, "agentmesh_http_connections"), float64(floodMax))
	for _, c := range conns { // else the shutdown waits for the slow bodies
		c.Close()
	}
	p.stop()
}

// TestE2EReadTimeoutCutsSlowBodies: a body that does not arrive within
// --read-timeout ends the connection.
func TestE2EReadTimeoutCutsSlowBodies(t *testing.T) {
	t.Parallel()
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{"--store", "memory", "--read-timeout", "1s"}})
	addr := strings.TrimPrefix(p.url, "http://")
	c, err := dialSlow(addr, "127.0.0.1", true) // its headers sent, its body stalled
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	// The handler's read fails: it answers 400 (or the server just closes).
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	} else if ne, ok := err.(net.Error); ok {
		require.False(t, ne.Timeout(), "the server kept the slow body's connection for 20 s")
	}
	assert.Less(t, time.Since(start), 8*time.Second, "cut by --read-timeout, not by the 10 s allowed for the headers")
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "cut before --read-timeout")
}

// requireLoopbackNet skips the test where 127.0.0.0/8 is not all loopback.
func requireLoopbackNet(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.1.2.3:0")
	if err != nil {
		t.Skip("127.0.0.0/8 is not routed to the loopback interface here:", err)
	}
	l.Close()
}

// dialFrom connects to addr from the loopback address src, within timeout.
func dialFrom(addr, src string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: timeout}
	return d.Dial("tcp", addr)
}

// dialFromAddr connects to addr from the loopback address src.
func dialFromAddr(t *testing.T, addr, src string) net.Conn {
	t.Helper()
	c, err := dialFrom(addr, src, 10*time.Second)
	require.NoError(t, err)
	return c
}

// dialSlow opens a connection from src that stops in the middle of a
// request: in its headers, or (body) after them, 10 bytes into a body of
// 100 kB.
func dialSlow(addr, src string, body bool) (net.Conn, error) {
	c, err := dialFrom(addr, src, 10*time.Second)
	if err != nil {
		return nil, err
	}
	req := "POST /v1/agents HTTP/1.1\r\nHost: mesh\r\nAuthorization: Bearer " + e2eMeshToken + "\r\n"
	if body {
		req += "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"name\":\"x"
	}
	// A connection the server closed at once may refuse the write: it
	// then holds nothing, which is what the test is after.
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, req)
	return c, nil
}

// healthOn sends GET /health on c and returns the status; an error when
// the server closed c.
func healthOn(c net.Conn) (int, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: mesh\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// probeHealth asks GET /health on a new connection from src.
func probeHealth(addr, src string) error {
	c, err := dialFrom(addr, src, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	status, err := healthOn(c)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET /health: %d", status)
	}
	return nil
}

// serverFDs counts the open file descriptors of process pid.
func serverFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skip("no /proc to count descriptors:", err)
	}
	return len(ents)
}

// metricsText returns the server's /metrics exposition.
func metricsText(t *testing.T, p *meshProc) string {
	t.Helper()
	r := p.client().do("GET", "/metrics", nil)
	require.Equal(t, 200, r.status, "%s", r)
	return string(r.body)
}

// counter returns the value of the unlabelled metric name in text.
func counter(t *testing.T, text, name string) float64 {
	t.Helper()
	v, ok := metricValue(text, name)
	require.True(t, ok, "no %s in the metrics", name)
	f, err := strconv.ParseFloat(v, 64)
	require.NoError(t, err)
	return f
}
