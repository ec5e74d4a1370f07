package netguard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	neturl "net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/netguard"
)

func TestDialCause(t *testing.T) {
	// A real refused connection, through a real client.
	ts := httptest.NewServer(http.NotFoundHandler())
	ts.Close()
	_, refused := http.Get(ts.URL + "/task?token=secret")
	require.Error(t, refused)
	require.ErrorIs(t, refused, syscall.ECONNREFUSED)

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"connection refused", refused, "connection refused"},
		{"no such host", &net.DNSError{Err: "no such host", Name: "agent.example", Server: "10.0.0.2:53", IsNotFound: true}, "the host name does not resolve"},
		{"lookup timeout", &net.DNSError{Err: "i/o timeout", Name: "agent.example", Server: "10.0.0.2:53", IsTimeout: true}, "the host name lookup timed out"},
		{"lookup failure", &net.DNSError{Err: "server misbehaving", Name: "agent.example", Server: "10.0.0.2:53"}, "the host name lookup failed"},
		{"unreachable", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.EHOSTUNREACH}, "no route to the host's address"},
		{"other dial failure", &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 80}, Err: errors.New("boom")}, "connection failed"},
		{"policy", fmt.Errorf("dial: %w", &netguard.RefusedError{Rule: "private address (RFC 1918)", Host: "agent.example", Addr: netip.MustParseAddr("10.0.0.5")}),
			"refused by the endpoint policy: agent.example (10.0.0.5): private address (RFC 1918)"},
		{"url error", fmt.Errorf("get: %w", &urlError), "stopped"},
		{"deadline", context.DeadlineExceeded, "context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := netguard.DialCause(tc.err)
			assert.Equal(t, tc.want, got)
			if tc.name != "policy" { // a refusal names what it refused, on purpose
				assert.NotContains(t, got, "10.0.0", "no address of the network")
				assert.NotContains(t, got, "127.0.0.1")
			}
			assert.NotContains(t, got, "secret", "no URL")
		})
	}
}

var urlError = neturl.Error{Op: "Get", URL: "http://127.0.0.1:9/task?token=secret", Err: errors.New("stopped")}
