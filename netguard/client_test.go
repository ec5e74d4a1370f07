package netguard_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/netguard"
)

// agent is an httptest server that counts the requests it receives.
type agent struct {
	*httptest.Server
	hits atomic.Int32
}

// newAgent starts an HTTP server on 127.0.0.1 that answers "ok".
func newAgent(t *testing.T) *agent {
	t.Helper()
	a := &agent{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(a.Close)
	return a
}

// port returns the port the agent listens on.
func (a *agent) port() string {
	return fmt.Sprint(a.Listener.Addr().(*net.TCPAddr).Port)
}

// resolver is a fake LookupIP that maps every name to fixed addresses and
// records the names it was asked for.
type resolver struct {
	mu    sync.Mutex
	addrs []netip.Addr
	err   error
	asked []string
}

func resolveTo(addrs ...string) *resolver {
	r := &resolver{}
	for _, a := range addrs {
		r.addrs = append(r.addrs, netip.MustParseAddr(a))
	}
	return r
}

func (r *resolver) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	return r.addrs, r.err
}

func (r *resolver) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// get makes a GET request with a bounded context and returns the status
// and body, or the error.
func get(t *testing.T, c *http.Client, url string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("NewRequest(%q): %v", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, string(body), nil
}

// wantRefused checks that err is a dial-time refusal by rule.
func wantRefused(t *testing.T, err error, rule string) *netguard.RefusedError {
	t.Helper()
	if err == nil {
		t.Fatalf("request succeeded, want a refusal (%s)", rule)
	}
	if !errors.Is(err, netguard.ErrNotAllowed) {
		t.Fatalf("error %v does not match ErrNotAllowed", err)
	}
	var re *netguard.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not a *RefusedError", err)
	}
	if !strings.Contains(re.Rule, rule) {
		t.Fatalf("rule %q, want it to contain %q", re.Rule, rule)
	}
	return re
}

// wantOK checks that the request reached the agent.
func wantOK(t *testing.T, status int, body string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	if status != http.StatusOK || body != "ok" {
		t.Fatalf("got %d %q, want 200 \"ok\"", status, body)
	}
}

func TestClientRefusesLoopbackServer(t *testing.T) {
	a := newAgent(t)
	c := mustPolicy(t, netguard.Options{}).NewClient(nil)
	_, _, err := get(t, c, a.URL)
	re := wantRefused(t, err, loopback)
	if re.Host != "127.0.0.1" {
		t.Errorf("Host = %q, want 127.0.0.1", re.Host)
	}
	if n := a.hits.Load(); n != 0 {
		t.Fatalf("agent got %d requests, want 0", n)
	}
}

func TestClientAllowsLoopbackWhenPrivateAllowed(t *testing.T) {
	a := newAgent(t)
	policies := map[string]*netguard.Policy{
		"allow-private": mustPolicy(t, netguard.Options{AllowPrivate: true}),
		"nil":           nil,
		"cidr":          mustPolicy(t, netguard.Options{AllowHosts: []string{"127.0.0.0/8"}}),
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			status, body, err := get(t, p.NewClient(nil), a.URL)
			wantOK(t, status, body, err)
		})
	}
}

func TestClientRefusesAlwaysRefusedLiteralsWithoutLookup(t *testing.T) {
	a := newAgent(t)
	r := resolveTo("127.0.0.1")
	// Even the permissive nil policy refuses these. 0.0.0.0 would reach
	// the agent on Linux if it were dialled.
	c := (*netguard.Policy)(nil).NewClient(&netguard.ClientOptions{LookupIP: r.lookup})
	tests := []struct {
		url  string
		rule string
	}{
		{"http://0.0.0.0:" + a.port() + "/", unspecified},
		{"http://[::]:" + a.port() + "/", unspecified},
		{"http://169.254.169.254/latest/meta-data/", linkLocal},
		{"http://[fe80::1]:" + a.port() + "/", linkLocal},
		{"http://[::ffff:169.254.169.254]/", linkLocal},
		{"http://metadata.google.internal/computeMetadata/v1/", metaName},
		{"http://metadata/", metaName},
		{"http://2130706433:" + a.port() + "/", ambiguous},
		{"http://0x7f.0.0.1:" + a.port() + "/", ambiguous},
		{"http://127.1:" + a.port() + "/", ambiguous},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, _, err := get(t, c, tt.url)
			wantRefused(t, err, tt.rule)
		})
	}
	if calls := r.calls(); len(calls) != 0 {
		t.Errorf("resolver was asked for %q; literals and refused names need no lookup", calls)
	}
	if n := a.hits.Load(); n != 0 {
		t.Fatalf("agent got %d requests, want 0", n)
	}
}

func TestClientRefusesLocalhostWithoutLookup(t *testing.T) {
	a := newAgent(t)
	r := resolveTo("127.0.0.1")
	c := mustPolicy(t, netguard.Options{}).NewClient(&netguard.ClientOptions{LookupIP: r.lookup})
	for _, host := range []string{"localhost", "LOCALHOST", "localhost.", "agent.localhost"} {
		_, _, err := get(t, c, "http://"+host+":"+a.port()+"/")
		wantRefused(t, err, localName)
	}
	if calls := r.calls(); len(calls) != 0 {
		t.Errorf("resolver was asked for %q", calls)
	}
	if n := a.hits.Load(); n != 0 {
		t.Fatalf("agent got %d requests, want 0", n)
	}
}

func TestClientRefusesNameResolvingToRefusedAddress(t *testing.T) {
	a := newAgent(t)
	tests := []struct {
		name  string
		addrs []string
		rule  string
	}{
		{"loopback", []string{"127.0.0.1"}, loopback},
		{"rfc1918", []string{"10.0.0.1"}, rfc1918},
		{"cgnat", []string{"100.64.0.1"}, cgnat},
		{"ipv6 loopback", []string{"::1"}, loopback},
		{"ula", []string{"fd00::1"}, ula},
		{"mapped loopback", []string{"::ffff:127.0.0.1"}, mapped},
		{"nat64 loopback", []string{"64:ff9b::7f00:1"}, nat64},
		{"metadata", []string{"169.254.169.254"}, linkLocal},
		{"unspecified", []string{"0.0.0.0"}, unspecified},
		// One bad address refuses the name, wherever it is in the list.
		{"public then loopback", []string{"192.0.2.1", "127.0.0.1"}, loopback},
		{"loopback then public", []string{"127.0.0.1", "192.0.2.1"}, loopback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := resolveTo(tt.addrs...)
			c := mustPolicy(t, netguard.Options{}).NewClient(&netguard.ClientOptions{LookupIP: r.lookup})
			_, _, err := get(t, c, "http://agent.example.com:"+a.port()+"/task")
			re := wantRefused(t, err, tt.rule)
			if re.Host != "agent.example.com" || !re.Addr.IsValid() {
				t.Errorf("RefusedError = %+v, want Host agent.example.com and the address", re)
			}
			if calls := r.calls(); len(calls) != 1 || calls[0] != "agent.example.com" {
				t.Errorf("resolver calls = %q, want [agent.example.com]", calls)
			}
		})
	}
	if n := a.hits.Load(); n != 0 {
		t.Fatalf("agent got %d requests, want 0", n)
	}
}

func TestClientAllowListedNameResolvingToPrivate(t *testing.T) {
	a := newAgent(t)
	tests := []struct {
		name  string
		hosts []string
		url   string
		addrs []string
		rule  string // "" means the request must reach the agent
	}{
		{"exact name", []string{"agent.internal.example"}, "http://agent.internal.example:%s/", []string{"127.0.0.1"}, ""},
		{"exact name any case", []string{"Agent.Internal.Example."}, "http://AGENT.internal.example:%s/", []string{"127.0.0.1"}, ""},
		{"wildcard", []string{"*.internal.example"}, "http://a.b.internal.example:%s/", []string{"127.0.0.1"}, ""},
		{"cidr", []string{"127.0.0.0/8"}, "http://agent.example.com:%s/", []string{"127.0.0.1"}, ""},
		{"other name", []string{"agent.internal.example"}, "http://other.internal.example:%s/", []string{"127.0.0.1"}, loopback},
		{"wildcard apex", []string{"*.internal.example"}, "http://internal.example:%s/", []string{"127.0.0.1"}, loopback},
		{"other cidr", []string{"10.0.0.0/8"}, "http://agent.example.com:%s/", []string{"127.0.0.1"}, loopback},
		{"name to metadata", []string{"agent.internal.example"}, "http://agent.internal.example:%s/", []string{"169.254.169.254"}, linkLocal},
		{"name to mapped metadata", []string{"agent.internal.example"}, "http://agent.internal.example:%s/", []string{"::ffff:169.254.169.254"}, linkLocal},
		{"name to unspecified", []string{"agent.internal.example"}, "http://agent.internal.example:%s/", []string{"0.0.0.0"}, unspecified},
		{"metadata name", []string{"metadata.google.internal"}, "http://metadata.google.internal:%s/", []string{"127.0.0.1"}, metaName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := resolveTo(tt.addrs...)
			p := mustPolicy(t, netguard.Options{AllowHosts: tt.hosts})
			c := p.NewClient(&netguard.ClientOptions{LookupIP: r.lookup})
			before := a.hits.Load()
			status, body, err := get(t, c, fmt.Sprintf(tt.url, a.port()))
			if tt.rule == "" {
				wantOK(t, status, body, err)
				return
			}
			wantRefused(t, err, tt.rule)
			if a.hits.Load() != before {
				t.Fatal("refused request reached the agent")
			}
		})
	}
}

func TestClientChecksEveryNewConnection(t *testing.T) {
	// DNS rebinding: the name first resolves to an allowed address, then
	// to a refused one. The second connection must be refused.
	a := newAgent(t)
	r := resolveTo("127.0.0.1")
	p := mustPolicy(t, netguard.Options{AllowHosts: []string{"127.0.0.1"}})
	tr := p.NewTransport(&netguard.ClientOptions{LookupIP: r.lookup})
	c := &http.Client{Transport: tr}
	url := "http://rebind.example.com:" + a.port() + "/"
	status, body, err := get(t, c, url)
	wantOK(t, status, body, err)

	tr.CloseIdleConnections()
	r.mu.Lock()
	r.addrs = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	r.mu.Unlock()
	_, _, err = get(t, c, url)
	wantRefused(t, err, loopback)
	if n := a.hits.Load(); n != 1 {
		t.Fatalf("agent got %d requests, want 1", n)
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	target := newAgent(t)
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			redirector := httptest.NewServer(http.RedirectHandler(target.URL+"/elsewhere", code))
			defer redirector.Close()
			c := (*netguard.Policy)(nil).NewClient(nil)
			resp, err := c.Post(redirector.URL, "text/plain", strings.NewReader("task"))
			if err != nil {
				t.Fatalf("Post: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Errorf("status %d, want %d", resp.StatusCode, code)
			}
			if loc := resp.Header.Get("Location"); loc != target.URL+"/elsewhere" {
				t.Errorf("Location %q, want %q", loc, target.URL+"/elsewhere")
			}
		})
	}
	if n := target.hits.Load(); n != 0 {
		t.Fatalf("redirect target got %d requests, want 0", n)
	}
}

func TestClientLookupFailure(t *testing.T) {
	errNXDomain := errors.New("no such host")
	tests := []struct {
		name string
		r    *resolver
		want error
	}{
		{"error", &resolver{err: errNXDomain}, errNXDomain},
		{"no addresses", &resolver{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustPolicy(t, netguard.Options{}).NewClient(&netguard.ClientOptions{LookupIP: tt.r.lookup})
			_, _, err := get(t, c, "http://agent.example.com/")
			if err == nil {
				t.Fatal("request succeeded")
			}
			if errors.Is(err, netguard.ErrNotAllowed) {
				t.Fatalf("a resolver failure %v matches ErrNotAllowed", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("error %v does not wrap %v", err, tt.want)
			}
		})
	}
}

func TestClientTLSVerifiesTheName(t *testing.T) {
	// httptest's certificate is valid for example.com and 127.0.0.1. The
	// client dials the checked IP but verifies the certificate against
	// the name in the URL.
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer ts.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())

	p := mustPolicy(t, netguard.Options{AllowHosts: []string{"example.com", "agent.example.org"}})
	c := p.NewClient(&netguard.ClientOptions{
		LookupIP:        resolveTo("127.0.0.1").lookup,
		TLSClientConfig: &tls.Config{RootCAs: roots},
	})
	status, body, err := get(t, c, "https://example.com:"+port+"/")
	wantOK(t, status, body, err)

	_, _, err = get(t, c, "https://agent.example.org:"+port+"/")
	var certErr *tls.CertificateVerificationError
	if !errors.As(err, &certErr) {
		t.Fatalf("got %v, want a certificate error for a name the certificate does not cover", err)
	}
}

func TestClientIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	defer ts.Close()

	_, _, err = get(t, mustPolicy(t, netguard.Options{}).NewClient(nil), ts.URL)
	wantRefused(t, err, loopback)
	status, body, err := get(t, mustPolicy(t, netguard.Options{AllowPrivate: true}).NewClient(nil), ts.URL)
	wantOK(t, status, body, err)
}

func TestClientConcurrentUse(t *testing.T) {
	a := newAgent(t)
	p := mustPolicy(t, netguard.Options{AllowHosts: []string{"*.agents.example"}})
	c := p.NewClient(&netguard.ClientOptions{LookupIP: resolveTo("127.0.0.1").lookup})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			host := fmt.Sprintf("a%d.agents.example", i%4)
			if i%8 == 7 {
				host = "evil.example" // refused
			}
			_, _, err := get(t, c, "http://"+host+":"+a.port()+"/")
			if (err != nil) != (host == "evil.example") {
				errs <- fmt.Errorf("%s: %v", host, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := a.hits.Load(); n != 56 {
		t.Errorf("agent got %d requests, want 56", n)
	}
}

// limits are the transport settings ClientOptions control.
type limits struct {
	TLSHandshakeTimeout time.Duration
	IdleConnTimeout     time.Duration
	MaxIdleConns        int
	MaxIdleConnsPerHost int
}

func TestNewTransportSettings(t *testing.T) {
	tlsConf := &tls.Config{ServerName: "x"}
	tests := []struct {
		name string
		opts *netguard.ClientOptions
		want limits
	}{
		{"nil", nil, limits{
			TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second,
			MaxIdleConns: 512, MaxIdleConnsPerHost: 32,
		}},
		{"zero", &netguard.ClientOptions{}, limits{
			TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second,
			MaxIdleConns: 512, MaxIdleConnsPerHost: 32,
		}},
		{"negative", &netguard.ClientOptions{TLSHandshakeTimeout: -1, IdleConnTimeout: -1, MaxIdleConns: -1, MaxIdleConnsPerHost: -1}, limits{
			TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second,
			MaxIdleConns: 512, MaxIdleConnsPerHost: 32,
		}},
		{"set", &netguard.ClientOptions{
			TLSHandshakeTimeout: time.Second, IdleConnTimeout: time.Minute,
			MaxIdleConns: 7, MaxIdleConnsPerHost: 3, TLSClientConfig: tlsConf,
		}, limits{
			TLSHandshakeTimeout: time.Second, IdleConnTimeout: time.Minute,
			MaxIdleConns: 7, MaxIdleConnsPerHost: 3,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustPolicy(t, netguard.Options{}).NewClient(tt.opts)
			tr, ok := c.Transport.(*http.Transport)
			if !ok {
				t.Fatalf("Transport is %T", c.Transport)
			}
			if tr.Proxy != nil {
				t.Error("Proxy is set; the client must never use a proxy")
			}
			if tr.DialContext == nil || tr.DialTLSContext != nil || tr.Dial != nil || tr.DialTLS != nil {
				t.Error("the transport must dial through the policy's DialContext only")
			}
			if c.CheckRedirect == nil || c.Timeout != 0 || c.Jar != nil {
				t.Errorf("client: CheckRedirect set %v, Timeout %v, Jar %v", c.CheckRedirect != nil, c.Timeout, c.Jar)
			}
			if tr.TLSHandshakeTimeout != tt.want.TLSHandshakeTimeout || tr.IdleConnTimeout != tt.want.IdleConnTimeout ||
				tr.MaxIdleConns != tt.want.MaxIdleConns || tr.MaxIdleConnsPerHost != tt.want.MaxIdleConnsPerHost {
				t.Errorf("transport timeouts/limits = %v %v %d %d, want %v %v %d %d",
					tr.TLSHandshakeTimeout, tr.IdleConnTimeout, tr.MaxIdleConns, tr.MaxIdleConnsPerHost,
					tt.want.TLSHandshakeTimeout, tt.want.IdleConnTimeout, tt.want.MaxIdleConns, tt.want.MaxIdleConnsPerHost)
			}
			if !tr.ForceAttemptHTTP2 {
				t.Error("ForceAttemptHTTP2 is off")
			}
			if tt.opts != nil && tt.opts.TLSClientConfig != nil {
				if tr.TLSClientConfig == tt.opts.TLSClientConfig || tr.TLSClientConfig.ServerName != "x" {
					t.Error("TLSClientConfig is not a clone of the option")
				}
			}
		})
	}
}

func TestClientNetworkFailureIsNotARefusal(t *testing.T) {
	// A port nobody listens on: the policy allows the dial, the network
	// refuses it, and the caller can tell the two apart.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := mustPolicy(t, netguard.Options{AllowPrivate: true}).NewClient(nil)
	_, _, err = get(t, c, "http://"+addr+"/")
	if err == nil {
		t.Skip("something is listening on the closed port")
	}
	if errors.Is(err, netguard.ErrNotAllowed) {
		t.Fatalf("a network failure %v matches ErrNotAllowed", err)
	}
}
