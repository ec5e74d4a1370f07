package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// The socket hook is the second line of defence: it refuses a connection
// to a refused address even when the pre-dial check is skipped.
func TestControlHookRefusesWhatDialContextWouldRefuse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()

	p, err := NewPolicy(Options{AllowHosts: []string{"agent.internal.example"}})
	if err != nil {
		t.Fatal(err)
	}
	tr := p.NewTransport(nil)
	d := p.newDialer(ClientOptions{})

	ctx := t.Context()
	// Bypass dialContext: dial the raw address with the hook alone.
	if c, err := d.net.DialContext(ctx, "tcp", ln.Addr().String()); !errors.Is(err, ErrNotAllowed) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("hook let a loopback dial through: %v", err)
	}
	var re *RefusedError
	if _, err := d.net.DialContext(ctx, "tcp", ln.Addr().String()); !errors.As(err, &re) || re.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("hook error %v, want a *RefusedError for 127.0.0.1", err)
	}
	select {
	case <-accepted:
		t.Fatal("the listener accepted a refused connection")
	case <-time.After(50 * time.Millisecond):
	}

	// The hook honours the allow-listed name dialContext passes along.
	hctx := context.WithValue(ctx, dialHostKey{}, "agent.internal.example")
	c, err := d.net.DialContext(hctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("hook refused an allow-listed name: %v", err)
	}
	c.Close()

	// The transport's own DialContext refuses unknown networks.
	if _, err := tr.DialContext(ctx, "udp", "8.8.8.8:53"); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("DialContext(udp) = %v, want a refusal", err)
	}
}

func TestDialContextNetworkFamilies(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	lookup := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
	}
	tr := (*Policy)(nil).NewTransport(&ClientOptions{LookupIP: lookup})
	ctx := t.Context()

	// A mapped address is dialled as IPv4.
	for _, network := range []string{"tcp", "tcp4"} {
		c, err := tr.DialContext(ctx, network, "agent.example:"+port)
		if err != nil {
			t.Fatalf("DialContext(%s): %v", network, err)
		}
		c.Close()
	}
	if _, err := tr.DialContext(ctx, "tcp6", "agent.example:"+port); err == nil || errors.Is(err, ErrNotAllowed) {
		t.Fatalf("DialContext(tcp6) to an IPv4-only name = %v, want a plain error", err)
	}
	for _, addr := range []string{"agent.example", "agent.example:http", "agent.example:0", "agent.example:70000"} {
		if _, err := tr.DialContext(ctx, "tcp", addr); err == nil {
			t.Errorf("DialContext(%q) succeeded", addr)
		}
	}
}

func TestEndsInNumber(t *testing.T) {
	tests := map[string]bool{
		"0": true, "123": true, "a.1": true, "a.0x": true, "a.0x1F": true, "0x": true,
		"a": false, "a.b": false, "a.1b": false, "a.0xg": false, "a.x1": false, "1.a": false,
	}
	for name, want := range tests {
		if got := endsInNumber(name); got != want {
			t.Errorf("endsInNumber(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestNewDialerSettings(t *testing.T) {
	tests := []struct {
		opts ClientOptions
		want time.Duration
	}{
		{ClientOptions{}, defaultDialTimeout},
		{ClientOptions{DialTimeout: -time.Second}, defaultDialTimeout},
		{ClientOptions{DialTimeout: 3 * time.Second}, 3 * time.Second},
	}
	for _, tt := range tests {
		d := (*Policy)(nil).newDialer(tt.opts)
		if d.net.Timeout != tt.want || d.net.KeepAlive != defaultKeepAlive {
			t.Errorf("newDialer(%+v): Timeout %v KeepAlive %v, want %v %v", tt.opts, d.net.Timeout, d.net.KeepAlive, tt.want, defaultKeepAlive)
		}
		if d.net.ControlContext == nil || d.lookup == nil {
			t.Errorf("newDialer(%+v): no socket hook or resolver", tt.opts)
		}
	}
}
