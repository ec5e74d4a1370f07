package netguard_test

import (
	"errors"
	"net"
	"net/url"
	"testing"

	"github.com/agentmesh/agentmesh/netguard"
)

// FuzzCheckURL checks that CheckURL never panics, that every refusal is a
// *RefusedError wrapping ErrNotAllowed, that a stricter policy never
// allows what a more permissive one refuses, and that an allowed IP
// literal is not one net.IP itself calls private.
func FuzzCheckURL(f *testing.F) {
	for _, c := range urlMatrix {
		f.Add(c.url)
	}
	for _, s := range []string{
		"http://[::ffff:127.0.0.1%25x]/",
		"https://[64:ff9b::127.0.0.1]:443",
		"http://0x7f.1/",
		"http://%30/",
		"http://[::1]:/",
		"http://a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.localhost/",
		"http://\u0661\u0662\u0667.0.0.1/",
		"http://１２７.０.０.１/",
		"HTTP://EXAMPLE.COM:080/",
	} {
		f.Add(s)
	}
	strict, err := netguard.NewPolicy(netguard.Options{})
	if err != nil {
		f.Fatal(err)
	}
	listed, err := netguard.NewPolicy(netguard.Options{AllowHosts: []string{"10.0.0.0/8", "*.corp.example", "localhost"}})
	if err != nil {
		f.Fatal(err)
	}
	permissive, err := netguard.NewPolicy(netguard.Options{AllowPrivate: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var nilPolicy *netguard.Policy
		errStrict := strict.CheckURL(raw)
		errListed := listed.CheckURL(raw)
		errPermissive := permissive.CheckURL(raw)
		errNil := nilPolicy.CheckURL(raw)
		for _, err := range []error{errStrict, errListed, errPermissive, errNil} {
			if err == nil {
				continue
			}
			var re *netguard.RefusedError
			if !errors.As(err, &re) || !errors.Is(err, netguard.ErrNotAllowed) || re.Rule == "" {
				t.Fatalf("CheckURL(%q) = %#v, want a *RefusedError with a rule", raw, err)
			}
		}
		if (errPermissive == nil) != (errNil == nil) {
			t.Fatalf("CheckURL(%q): AllowPrivate %v, nil policy %v", raw, errPermissive, errNil)
		}
		if errPermissive != nil && (errStrict == nil || errListed == nil) {
			t.Fatalf("CheckURL(%q): permissive refuses (%v) but strict %v, listed %v", raw, errPermissive, errStrict, errListed)
		}
		if errListed != nil && errStrict == nil {
			t.Fatalf("CheckURL(%q): allow-list refuses (%v) what strict allows", raw, errListed)
		}
		if errStrict != nil {
			return
		}
		// Allowed by the strict policy: an absolute http(s) URL with a
		// host and no userinfo, and no private or special IP literal.
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			t.Fatalf("strict policy allows %q (parse err %v)", raw, err)
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			if ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() ||
				ip.IsLinkLocalMulticast() || ip.IsMulticast() || ip.Equal(net.IPv4bcast) {
				t.Fatalf("strict policy allows IP literal %q", raw)
			}
		}
	})
}

// FuzzNewPolicy checks that NewPolicy never panics on an AllowHosts entry
// and fails only with ErrInvalidAllowHost.
func FuzzNewPolicy(f *testing.F) {
	for _, s := range []string{"agents.example", "*.example", "10.0.0.0/8", "::1", "fd00::/8", "*", "a..b", "127.1", "[::1]", "x:1", "10.0.0.0/33"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		p, err := netguard.NewPolicy(netguard.Options{AllowHosts: []string{entry}})
		if err != nil {
			if p != nil || !errors.Is(err, netguard.ErrInvalidAllowHost) {
				t.Fatalf("NewPolicy(%q) = %v, %v", entry, p, err)
			}
			return
		}
		// An allow-list never allows an always-refused endpoint.
		for _, raw := range []string{"http://169.254.169.254/", "http://metadata/", "http://0.0.0.0/", "http://[ff02::1]/"} {
			if p.CheckURL(raw) == nil {
				t.Fatalf("AllowHosts [%q] allows %s", entry, raw)
			}
		}
	})
}
