package netguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Defaults of [ClientOptions].
const (
	defaultDialTimeout         = 10 * time.Second
	defaultKeepAlive           = 30 * time.Second
	defaultTLSHandshakeTimeout = 10 * time.Second
	defaultIdleConnTimeout     = 90 * time.Second
	defaultMaxIdleConns        = 512
	defaultMaxIdleConnsPerHost = 32
)

// ClientOptions configures the client of [Policy.NewClient] and the
// transport of [Policy.NewTransport]. A nil *ClientOptions, like the zero
// value, means all defaults. The options are copied; later changes to them
// have no effect.
type ClientOptions struct {
	// LookupIP resolves a host name to its addresses. The dialer checks
	// every address it returns. Nil (the default) uses
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host). Tests set it to
	// point names at httptest servers; it must be safe for concurrent use.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)

	// TLSClientConfig is cloned into the transport, e.g. to trust a private
	// CA. Nil (the default) uses the system roots.
	TLSClientConfig *tls.Config

	// DialTimeout bounds each TCP connection attempt. ≤ 0 means 10s. The
	// whole request is bounded by the request's context.
	DialTimeout time.Duration

	// TLSHandshakeTimeout bounds the TLS handshake. ≤ 0 means 10s.
	TLSHandshakeTimeout time.Duration

	// IdleConnTimeout is how long an idle keep-alive connection is kept.
	// ≤ 0 means 90s.
	IdleConnTimeout time.Duration

	// MaxIdleConns caps idle keep-alive connections across all agents.
	// ≤ 0 means 512.
	MaxIdleConns int

	// MaxIdleConnsPerHost caps idle keep-alive connections per agent
	// (host:port). ≤ 0 means 32, so that concurrent delegations to a busy
	// agent reuse connections instead of redialling (net/http's default
	// is 2).
	MaxIdleConnsPerHost int
}

// NewClient returns an HTTP client for outbound calls to endpoints, with
// the transport of [Policy.NewTransport]:
//
//   - It never uses a proxy, whatever the environment says.
//   - It resolves names itself, refuses the connection unless every
//     address the name resolves to passes [Policy.CheckHostAddr], and
//     connects only to checked addresses; a hook on the socket checks the
//     address actually connected to once more.
//   - It never follows a redirect: Do returns the 3xx response itself with
//     a nil error (its Location header unfollowed), and callers should treat
//     it as an unexpected status.
//   - It has no overall timeout (Client.Timeout is 0); bound each request
//     with its context.
//
// A refusal makes Do return an error that matches [ErrNotAllowed] with
// [errors.Is] and a *[RefusedError] with [errors.As], before any byte is
// sent to the refused address. A nil Policy allows private addresses, as
// everywhere. The client is safe for concurrent use; make one per Policy
// and reuse it, so that connections are reused.
func (p *Policy) NewClient(opts *ClientOptions) *http.Client {
	return &http.Client{
		Transport:     p.NewTransport(opts),
		CheckRedirect: noRedirects,
	}
}

// noRedirects makes the client return a 3xx response instead of following
// it.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewTransport returns the transport of [Policy.NewClient], for callers
// that wrap it in another [http.RoundTripper] (say, to add auth headers).
// Such callers must set CheckRedirect on their own client if they want
// redirects refused too (the dialer still checks where a redirect leads).
// Do not change its Proxy, DialContext or DialTLSContext: that would
// bypass the policy.
func (p *Policy) NewTransport(opts *ClientOptions) *http.Transport {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	d := p.newDialer(o)
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.dialContext,
		TLSClientConfig:       o.TLSClientConfig.Clone(),
		TLSHandshakeTimeout:   orDefault(o.TLSHandshakeTimeout, defaultTLSHandshakeTimeout),
		IdleConnTimeout:       orDefault(o.IdleConnTimeout, defaultIdleConnTimeout),
		MaxIdleConns:          orDefault(o.MaxIdleConns, defaultMaxIdleConns),
		MaxIdleConnsPerHost:   orDefault(o.MaxIdleConnsPerHost, defaultMaxIdleConnsPerHost),
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// orDefault returns v, or def when v ≤ 0.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// newDialer returns the dialer of [Policy.NewTransport].
func (p *Policy) newDialer(o ClientOptions) *dialer {
	d := &dialer{policy: p, lookup: o.LookupIP}
	if d.lookup == nil {
		d.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	d.net = net.Dialer{
		Timeout:        orDefault(o.DialTimeout, defaultDialTimeout),
		KeepAlive:      defaultKeepAlive,
		ControlContext: d.control,
	}
	return d
}

// dialer dials endpoints under a policy.
type dialer struct {
	policy *Policy
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	net    net.Dialer
}

// dialHostKey is the context key under which dialContext passes the host
// being dialled to control.
type dialHostKey struct{}

// dialContext resolves the host of address, checks every address it
// resolves to, and connects to the first checked address that accepts.
func (d *dialer) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var want4, want6 bool
	switch network {
	case "tcp":
		want4, want6 = true, true
	case "tcp4":
		want4 = true
	case "tcp6":
		want6 = true
	default:
		return nil, &RefusedError{Rule: ruleNetwork, Host: address}
	}
	hostname, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, &RefusedError{Rule: rulePort, Host: hostname}
	}
	h, err := d.policy.checkHost(hostname)
	if err != nil {
		return nil, err
	}
	addrs := []netip.Addr{h.addr}
	if !h.addr.IsValid() {
		// Resolve the host as written: a trailing dot keeps it out of
		// the resolver's search list.
		addrs, err = d.lookup(ctx, hostname)
		if err != nil {
			return nil, fmt.Errorf("netguard: resolve %s: %w", hostname, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("netguard: resolve %s: no addresses", hostname)
		}
	}
	// A name is allowed only if everything it resolves to is: the result
	// then does not depend on which address answers first.
	nameAllowed := d.policy.nameAllowed(h.name)
	for _, a := range addrs {
		if err := d.policy.checkAddr(hostname, a, nameAllowed); err != nil {
			return nil, err
		}
	}
	ctx = context.WithValue(ctx, dialHostKey{}, hostname)
	var firstErr error
	for _, a := range addrs {
		a = a.Unmap()
		if (a.Is4() && !want4) || (a.Is6() && !want6) {
			continue
		}
		conn, err := d.net.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil || errors.Is(err, ErrNotAllowed) {
			break
		}
	}
	if firstErr == nil {
		return nil, fmt.Errorf("netguard: dial %s: no %s address", address, network)
	}
	return nil, firstErr
}

// control runs on every socket just before it connects and checks the
// address it connects to, so that no path into the dialer skips the
// policy.
func (d *dialer) control(ctx context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Rule: ruleInvalidAddr, Host: address}
	}
	hostname, _ := ctx.Value(dialHostKey{}).(string)
	return d.policy.CheckHostAddr(hostname, ap.Addr())
}
