package netguard_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/netguard"
)

// mustPolicy builds a Policy or fails the test.
func mustPolicy(t testing.TB, opts netguard.Options) *netguard.Policy {
	t.Helper()
	p, err := netguard.NewPolicy(opts)
	if err != nil {
		t.Fatalf("NewPolicy(%+v): %v", opts, err)
	}
	return p
}

// checkRefusal checks that err is nil when want is "", and otherwise a
// *RefusedError wrapping ErrNotAllowed whose Rule contains want.
func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("refused, want allowed: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("allowed, want refusal %q", want)
	}
	if !errors.Is(err, netguard.ErrNotAllowed) {
		t.Fatalf("error %v does not match ErrNotAllowed", err)
	}
	var re *netguard.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("error %T %v is not a *RefusedError", err, err)
	}
	if !strings.Contains(re.Rule, want) {
		t.Fatalf("rule %q, want it to contain %q", re.Rule, want)
	}
}

// Rule fragments the tests look for.
const (
	allowed     = ""
	scheme      = "scheme must be http or https"
	userinfo    = "userinfo"
	noHost      = "host required"
	port        = "port must be"
	malformed   = "malformed URL"
	nameChars   = "ASCII letters"
	badName     = "malformed host name"
	badV6       = "malformed IPv6 literal"
	zone        = "zone identifier"
	ambiguous   = "ambiguous IP literal"
	metaName    = "cloud metadata host name"
	metaAddr    = "cloud metadata address"
	unspecified = "unspecified address"
	linkLocal   = "link-local address (cloud metadata)"
	multicast   = "multicast address"
	broadcast   = "broadcast address"
	reserved    = "reserved address"
	loopback    = "loopback address"
	localName   = "loopback host name"
	rfc1918     = "private address (RFC 1918)"
	cgnat       = "CGNAT"
	ula         = "unique local address"
	siteLocal   = "site-local"
	privateHint = "set --allow-private-endpoints to allow" // the Hint of the tests
	mapped      = "IPv4-mapped"
	compatible  = "IPv4-compatible"
	translated  = "IPv4-translated"
	nat64       = "NAT64"
	sixToFour   = "6to4"
)

// urlCase is one row of the URL matrix: the rule fragment expected under a
// strict policy (AllowPrivate false) and under a permissive one
// (AllowPrivate true, and the nil policy). "" means allowed.
type urlCase struct {
	url        string
	strict     string
	permissive string
}

// always is a row refused by the same rule under every policy.
func always(url, rule string) urlCase { return urlCase{url, rule, rule} }

// private is a row refused by a strict policy only.
func private(url, rule string) urlCase { return urlCase{url, rule, allowed} }

// public is a row every policy allows.
func public(url string) urlCase { return urlCase{url, allowed, allowed} }

var urlMatrix = []urlCase{
	// Public endpoints.
	public("http://example.com/"),
	public("https://Example.COM:8443/path?q=1#frag"),
	public("HTTPS://example.com"),
	public("http://example.com./"),
	public("http://agent_1.svc-2.example.com/"),
	public("http://8.8.8.8/"),
	public("http://192.0.2.1:8080/task"),
	public("http://1.0.0.0/"),
	public("http://100.63.255.255/"),
	public("http://100.128.0.0/"),
	public("http://172.15.255.255/"),
	public("http://172.32.0.0/"),
	public("http://169.253.255.255/"),
	public("http://169.255.0.1/"),
	public("http://223.255.255.255/"),
	public("http://126.255.255.255/"),
	public("http://128.0.0.0/"),
	public("http://[2001:db8::1]:8080/"),
	public("http://[2606:4700::1111]/"),
	public("http://[::ffff:8.8.8.8]/"),
	public("http://[64:ff9b::808:808]/"),
	public("http://[2002:808:808::1]/"),
	public("http://localhostx.com/"),
	public("http://localhost.example.com/"),
	public("http://metadata.example.com/"),
	public("http://my-metadata/"),
	public("http://example.com:65535/"),

	// The URL itself.
	always("ftp://example.com/", scheme),
	always("file:///etc/passwd", scheme),
	always("gopher://example.com/", scheme),
	always("javascript:alert(1)", scheme),
	always("ws://example.com/", scheme),
	always("//example.com/", scheme),
	always("example.com", scheme),
	always("", scheme),
	always("http://user:pass@example.com/", userinfo),
	always("http://user@example.com/", userinfo),
	always("http://@example.com/", userinfo),
	always("http://example.com@127.0.0.1/", userinfo),
	always("http:example.com", noHost),
	always("http:///path", noHost),
	always("http://:8080/", noHost),
	always("http://example.com:0/", port),
	always("http://example.com:65536/", port),
	always("http://example.com:99999/", port),
	always("http://[::1", malformed),
	always("http://exa mple.com/", malformed),
	always("http://127.0.0.%31/", malformed),
	always("http://[127.0.0.1]/", malformed),
	always("http://evil.com\\@good.com/", malformed),
	always("http://b%C3%BCcher.de/", nameChars),
	always("http://ex*ample.com/", nameChars),
	always("http://ex!ample.com/", nameChars),
	always("http://a..b/", badName),
	always("http://.example.com/", badName),
	always("http://"+strings.Repeat("a", 64)+".com/", badName),
	always("http://"+strings.Repeat("a.", 127)+"com/", badName),

	// IPv6 zones.
	always("http://[fe80::1%25eth0]/", zone),
	always("http://[2001:db8::1%25eth0]/", zone),
	always("http://[::1%25lo]:8080/", zone),

	// Ambiguous IP literals, refused whatever the policy.
	always("http://2130706433/", ambiguous),
	always("http://2130706433:8080/", ambiguous),
	always("http://0177.0.0.1/", ambiguous),
	always("http://0x7f.0.0.1/", ambiguous),
	always("http://0X7F.0.0.1/", ambiguous),
	always("http://0x7f000001/", ambiguous),
	always("http://017700000001/", ambiguous),
	always("http://127.1/", ambiguous),
	always("http://127.0.1/", ambiguous),
	always("http://10.1/", ambiguous),
	always("http://0/", ambiguous),
	always("http://127.000.000.001/", ambiguous),
	always("http://127.0.0.1./", ambiguous),
	always("http://8.8.8.8./", ambiguous),
	always("http://1.2.3.0x4/", ambiguous),
	always("http://169.254.43518/", ambiguous),
	always("http://foo.123/", ambiguous),
	always("http://foo.0x/", ambiguous),

	// Always refused names.
	always("http://metadata.google.internal/computeMetadata/v1/", metaName),
	always("http://METADATA.Google.Internal./", metaName),
	always("http://metadata/", metaName),
	always("http://metadata./", metaName),
	always("http://Metadata:80/", metaName),

	// Always refused addresses.
	always("http://0.0.0.0/", unspecified),
	always("http://0.0.0.0:8080/", unspecified),
	always("http://0.1.2.3/", unspecified),
	always("http://[::]/", unspecified),
	always("http://[::]:8080/", unspecified),
	always("http://[::ffff:0.0.0.0]/", unspecified),
	always("http://169.254.169.254/latest/meta-data/", linkLocal),
	always("http://169.254.0.1/", linkLocal),
	always("http://[fe80::1]/", linkLocal),
	always("http://[febf:ffff::1]/", linkLocal),
	always("http://[::ffff:169.254.169.254]/", linkLocal),
	always("http://[::ffff:a9fe:a9fe]/", linkLocal),
	always("http://[64:ff9b::a9fe:a9fe]/", linkLocal),
	always("http://[2002:a9fe:a9fe::1]/", linkLocal),
	always("http://[::169.254.169.254]/", linkLocal),
	always("http://100.100.100.200/", metaAddr),
	always("http://[fd00:ec2::254]/", metaAddr),
	always("http://224.0.0.1/", multicast),
	always("http://239.255.255.250:1900/", multicast),
	always("http://[ff02::1]/", multicast),
	always("http://[ff05::1:3]/", multicast),
	always("http://[::ffff:224.0.0.251]/", multicast),
	always("http://255.255.255.255/", broadcast),
	always("http://240.0.0.1/", reserved),
	always("http://254.255.255.255/", reserved),

	// Private: loopback.
	private("http://127.0.0.1/", loopback),
	private("http://127.0.0.1:8080/task", loopback),
	private("http://127.255.255.254/", loopback),
	private("http://[::1]/", loopback),
	private("http://[::1]:8080/", loopback),
	private("http://[0:0:0:0:0:0:0:1]/", loopback),
	private("http://localhost/", localName),
	private("http://localhost:8080/", localName),
	private("http://localhost./", localName),
	private("http://LOCALHOST/", localName),
	private("http://LocalHost.:9000/", localName),
	private("http://foo.localhost/", localName),
	private("http://a.b.FOO.localhost./", localName),

	// Private: RFC 1918, CGNAT, ULA, site-local.
	private("http://10.0.0.1/", rfc1918),
	private("http://10.255.255.255/", rfc1918),
	private("http://172.16.0.1/", rfc1918),
	private("http://172.31.255.255/", rfc1918),
	private("http://192.168.1.1/", rfc1918),
	private("http://100.64.0.1/", cgnat),
	private("http://100.127.255.255/", cgnat),
	private("http://[fc00::1]/", ula),
	private("http://[fd12:3456:789a::1]/", ula),
	private("http://[fec0::1]/", siteLocal),

	// Private IPv4 addresses embedded in IPv6.
	private("http://[::ffff:127.0.0.1]/", mapped),
	private("http://[::ffff:7f00:1]/", mapped),
	private("http://[::ffff:10.0.0.1]:8080/", mapped),
	private("http://[::ffff:c0a8:101]/", mapped),
	private("http://[::127.0.0.1]/", compatible),
	private("http://[::7f00:1]/", compatible),
	private("http://[::ffff:0:7f00:1]/", translated),
	private("http://[64:ff9b::7f00:1]/", nat64),
	private("http://[64:ff9b::10.0.0.1]/", nat64),
	private("http://[64:ff9b::6440:1]/", nat64),
	private("http://[2002:7f00:1::]/", sixToFour),
	private("http://[2002:c0a8:101::1]/", sixToFour),
}

func TestCheckURLMatrix(t *testing.T) {
	strict := mustPolicy(t, netguard.Options{})
	permissive := mustPolicy(t, netguard.Options{AllowPrivate: true})
	policies := []struct {
		name   string
		policy *netguard.Policy
		want   func(urlCase) string
	}{
		{"strict", strict, func(c urlCase) string { return c.strict }},
		{"zero", &netguard.Policy{}, func(c urlCase) string { return c.strict }},
		{"allow-private", permissive, func(c urlCase) string { return c.permissive }},
		{"nil", nil, func(c urlCase) string { return c.permissive }},
	}
	for _, pol := range policies {
		for _, c := range urlMatrix {
			t.Run(pol.name+"/"+c.url, func(t *testing.T) {
				checkRefusal(t, pol.policy.CheckURL(c.url), pol.want(c))
			})
		}
	}
}

// The Hint of the policy follows the rule of every private refusal, and
// only of those; without one, the rule is alone.
func TestCheckURLPrivateRuleHint(t *testing.T) {
	hinted := mustPolicy(t, netguard.Options{Hint: privateHint})
	strict := mustPolicy(t, netguard.Options{})
	for _, c := range urlMatrix {
		if c.strict == "" {
			continue
		}
		var re *netguard.RefusedError
		err := hinted.CheckURL(c.url)
		if !errors.As(err, &re) {
			t.Fatalf("CheckURL(%q) = %v, want a refusal", c.url, err)
		}
		if private := c.permissive == ""; private != strings.HasSuffix(re.Rule, "; "+privateHint) {
			t.Errorf("CheckURL(%q) = %v, want the hint only on a private refusal", c.url, err)
		}
		if err := strict.CheckURL(c.url); !errors.As(err, &re) || strings.Contains(re.Rule, privateHint) {
			t.Errorf("CheckURL(%q) without a Hint = %v, want no hint", c.url, err)
		}
	}
}

func TestCheckURLAllowHosts(t *testing.T) {
	p := mustPolicy(t, netguard.Options{AllowHosts: []string{
		"agents.corp.example",
		"*.svc.example",
		"LocalHost.",
		"10.1.0.0/16",
		"fd00:1::/32",
		"192.168.5.5",
		// Entries that must not override the always-refused rules.
		"metadata",
		"metadata.google.internal",
		"169.254.0.0/16",
		"0.0.0.0/8",
		"224.0.0.0/4",
		"fe80::/10",
		"100.100.100.200",
	}})
	tests := []struct {
		url  string
		want string
	}{
		{"http://agents.corp.example/", allowed},
		{"http://localhost:8080/", allowed},
		{"http://LOCALHOST./", allowed},
		{"http://foo.localhost/", localName},
		{"http://10.1.2.3/", allowed},
		{"http://10.1.255.255:9000/", allowed},
		{"http://10.2.0.1/", rfc1918},
		{"http://[::ffff:10.1.2.3]/", allowed},
		{"http://[64:ff9b::a01:203]/", allowed},
		{"http://[2002:a01:203::]/", allowed},
		{"http://[::ffff:10.2.0.1]/", rfc1918},
		{"http://[fd00:1::5]/", allowed},
		{"http://[fd00:1:ffff::5]/", allowed},
		{"http://[fd00:2::5]/", ula},
		{"http://192.168.5.5/", allowed},
		{"http://192.168.5.6/", rfc1918},
		{"http://127.0.0.1/", loopback},
		{"http://metadata/", metaName},
		{"http://metadata.google.internal/", metaName},
		{"http://169.254.169.254/", linkLocal},
		{"http://0.0.0.0/", unspecified},
		{"http://224.0.0.1/", multicast},
		{"http://[fe80::1]/", linkLocal},
		{"http://100.100.100.200/", metaAddr},
		{"http://2130706433/", ambiguous},
		{"ftp://agents.corp.example/", scheme},
		{"http://user@agents.corp.example/", userinfo},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			checkRefusal(t, p.CheckURL(tt.url), tt.want)
		})
	}
}

func TestCheckURLAllowEverythingPrivateByCIDR(t *testing.T) {
	p := mustPolicy(t, netguard.Options{AllowHosts: []string{"0.0.0.0/0", "::/0"}})
	tests := []struct {
		url  string
		want string
	}{
		{"http://127.0.0.1/", allowed},
		{"http://10.0.0.1/", allowed},
		{"http://[::1]/", allowed},
		{"http://[fc00::1]/", allowed},
		{"http://[::ffff:127.0.0.1]/", allowed},
		{"http://localhost/", localName}, // a name, not an address
		{"http://0.0.0.0/", unspecified},
		{"http://[::]/", unspecified},
		{"http://169.254.169.254/", linkLocal},
		{"http://[fe80::1]/", linkLocal},
		{"http://[ff02::1]/", multicast},
		{"http://255.255.255.255/", broadcast},
		{"http://240.0.0.1/", reserved},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			checkRefusal(t, p.CheckURL(tt.url), tt.want)
		})
	}
}

func TestCheckAddr(t *testing.T) {
	strict := mustPolicy(t, netguard.Options{AllowHosts: []string{"10.1.0.0/16", "::ffff:192.168.0.0/112"}})
	tests := []struct {
		addr       string // "" is the zero Addr
		strict     string
		permissive string
	}{
		{"", "invalid IP address", "invalid IP address"},
		{"8.8.8.8", allowed, allowed},
		{"2001:db8::1", allowed, allowed},
		{"127.0.0.1", loopback, allowed},
		{"::1", loopback, allowed},
		{"::ffff:127.0.0.1", mapped, allowed},
		{"10.1.9.9", allowed, allowed},
		{"::ffff:10.1.9.9", allowed, allowed},
		{"10.9.9.9", rfc1918, allowed},
		{"192.168.7.7", allowed, allowed},
		{"192.169.7.7", allowed, allowed},
		{"0.0.0.0", unspecified, unspecified},
		{"::", unspecified, unspecified},
		{"169.254.169.254", linkLocal, linkLocal},
		{"fe80::1", linkLocal, linkLocal},
		{"fe80::1%eth0", zone, zone},
		{"2001:db8::1%eth0", zone, zone},
		{"ff02::1", multicast, multicast},
		{"255.255.255.255", broadcast, broadcast},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			var ip netip.Addr
			if tt.addr != "" {
				ip = netip.MustParseAddr(tt.addr)
			}
			checkRefusal(t, strict.CheckAddr(ip), tt.strict)
			var nilPolicy *netguard.Policy
			checkRefusal(t, nilPolicy.CheckAddr(ip), tt.permissive)
		})
	}
}

func TestCheckHostAddr(t *testing.T) {
	p := mustPolicy(t, netguard.Options{AllowHosts: []string{"agents.corp.example", "*.svc.example", "10.1.0.0/16"}})
	tests := []struct {
		host string
		addr string
		want string
	}{
		{"agents.corp.example", "10.9.9.9", allowed},
		{"AGENTS.Corp.Example.", "127.0.0.1", allowed},
		{"agents.corp.example", "::1", allowed},
		{"agents.corp.example", "fd00::1", allowed},
		{"x.svc.example", "192.168.0.1", allowed},
		{"a.b.svc.example", "100.64.0.1", allowed},
		{"svc.example", "192.168.0.1", rfc1918},
		{"xsvc.example", "192.168.0.1", rfc1918},
		{"evil.example", "127.0.0.1", loopback},
		{"evil.example", "::ffff:127.0.0.1", mapped},
		{"evil.example", "10.0.0.1", rfc1918},
		{"evil.example", "10.1.0.9", allowed},
		{"evil.example", "8.8.8.8", allowed},
		{"evil.example", "", "invalid IP address"},
		{"agents.corp.example", "169.254.169.254", linkLocal},
		{"agents.corp.example", "::ffff:169.254.169.254", linkLocal},
		{"agents.corp.example", "0.0.0.0", unspecified},
		{"metadata", "8.8.8.8", metaName},
		{"metadata.google.internal.", "8.8.8.8", metaName},
		{"localhost", "8.8.8.8", localName},
		{"", "127.0.0.1", loopback},
		{"", "8.8.8.8", allowed},
		{"127.0.0.1", "127.0.0.1", loopback},
		{"10.1.2.3", "10.1.2.3", allowed},
		{"2130706433", "127.0.0.1", ambiguous},
		{"fe80::1%eth0", "8.8.8.8", zone},
		{"bad host", "8.8.8.8", nameChars},
	}
	for _, tt := range tests {
		t.Run(tt.host+"/"+tt.addr, func(t *testing.T) {
			var ip netip.Addr
			if tt.addr != "" {
				ip = netip.MustParseAddr(tt.addr)
			}
			checkRefusal(t, p.CheckHostAddr(tt.host, ip), tt.want)
		})
	}
}

func TestNewPolicyRejectsMalformedAllowHosts(t *testing.T) {
	bad := []string{
		"",
		"   ",
		"http://agents.example.com",
		"agents.example.com:8080",
		"agents.example.com/path",
		"[::1]",
		"10.0.0.0/33",
		"10.0.0.0/",
		"/8",
		"10.0.0.0/8/8",
		"fe80::1%eth0",
		"fe80::/10%eth0",
		"::1:",
		"*",
		"*.",
		"*.*.example.com",
		"foo.*.com",
		"*foo.com",
		"127.1",
		"0x7f.0.0.1",
		"2130706433",
		"127.0.0.1.",
		"bücher.de",
		"a..b",
		"10.1.0.0/16,10.2.0.0/16",
		"agents example",
		strings.Repeat("a", 64) + ".example",
	}
	for _, entry := range bad {
		t.Run(entry, func(t *testing.T) {
			p, err := netguard.NewPolicy(netguard.Options{AllowHosts: []string{"ok.example", entry}})
			if err == nil || p != nil {
				t.Fatalf("NewPolicy accepted %q", entry)
			}
			if !errors.Is(err, netguard.ErrInvalidAllowHost) {
				t.Fatalf("error %v does not match ErrInvalidAllowHost", err)
			}
			if errors.Is(err, netguard.ErrNotAllowed) {
				t.Fatalf("error %v matches ErrNotAllowed", err)
			}
			if !strings.Contains(err.Error(), "\""+entry+"\"") && entry != "" {
				t.Fatalf("error %q does not name the entry", err)
			}
		})
	}
}

func TestNewPolicyReportsEveryMalformedEntry(t *testing.T) {
	_, err := netguard.NewPolicy(netguard.Options{AllowHosts: []string{"a..b", "ok.example", "10.0.0.0/99"}})
	if err == nil {
		t.Fatal("NewPolicy accepted malformed entries")
	}
	for _, entry := range []string{`"a..b"`, `"10.0.0.0/99"`} {
		if !strings.Contains(err.Error(), entry) {
			t.Errorf("error %q does not name %s", err, entry)
		}
	}
	if strings.Contains(err.Error(), "ok.example") {
		t.Errorf("error %q names a good entry", err)
	}
}

func TestNewPolicyAcceptsAllowHosts(t *testing.T) {
	tests := []struct {
		entry string
		url   string // refused by a strict policy
		want  string // under a policy allow-listing entry
	}{
		{"localhost", "http://localhost/", allowed},
		{"LOCALHOST.", "http://localhost./", allowed},
		{"*.localhost", "http://a.localhost/", allowed},
		{"*.localhost", "http://localhost/", localName},
		{" 10.0.0.0/8 ", "http://10.9.8.7/", allowed},
		{"10.1.2.3/16", "http://10.1.200.1/", allowed},
		{"10.1.2.3", "http://10.1.2.3/", allowed},
		{"10.1.2.3", "http://10.1.2.4/", rfc1918},
		{"::1", "http://[::1]/", allowed},
		{"::ffff:10.0.0.1", "http://10.0.0.1/", allowed},
		{"::ffff:10.0.0.0/104", "http://10.5.5.5/", allowed},
		{"fc00::/7", "http://[fd00::1]/", allowed},
		{"127.0.0.0/8", "http://[::ffff:127.0.0.1]/", allowed},
		// A name entry allows the name, not an address literal.
		{"agents.example", "http://127.0.0.1/", loopback},
		// A prefix entry allows addresses, not the name localhost.
		{"127.0.0.0/8", "http://localhost/", localName},
	}
	strict := mustPolicy(t, netguard.Options{})
	for _, tt := range tests {
		t.Run(tt.entry+"/"+tt.url, func(t *testing.T) {
			if strict.CheckURL(tt.url) == nil {
				t.Fatalf("strict policy allows %s; bad test", tt.url)
			}
			p := mustPolicy(t, netguard.Options{AllowHosts: []string{tt.entry}})
			checkRefusal(t, p.CheckURL(tt.url), tt.want)
		})
	}
}

func TestNewPolicyCopiesOptions(t *testing.T) {
	hosts := []string{"10.0.0.0/8"}
	p := mustPolicy(t, netguard.Options{AllowHosts: hosts})
	hosts[0] = "192.168.0.0/16"
	checkRefusal(t, p.CheckURL("http://10.1.1.1/"), allowed)
	checkRefusal(t, p.CheckURL("http://192.168.1.1/"), rfc1918)
}

func TestRefusedError(t *testing.T) {
	tests := []struct {
		err  *netguard.RefusedError
		want string
	}{
		{&netguard.RefusedError{Rule: "r"}, "netguard: endpoint not allowed: r"},
		{&netguard.RefusedError{Rule: "r", Host: "h.example"}, "netguard: endpoint not allowed: h.example: r"},
		{&netguard.RefusedError{Rule: "r", Addr: netip.MustParseAddr("10.0.0.1")}, "netguard: endpoint not allowed: 10.0.0.1: r"},
		{&netguard.RefusedError{Rule: "r", Host: "10.0.0.1", Addr: netip.MustParseAddr("10.0.0.1")}, "netguard: endpoint not allowed: 10.0.0.1: r"},
		{&netguard.RefusedError{Rule: "r", Host: "h.example", Addr: netip.MustParseAddr("::1")}, "netguard: endpoint not allowed: h.example (::1): r"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if got, want := tt.err.Reason(), strings.TrimPrefix(tt.want, "netguard: endpoint not allowed: "); got != want {
			t.Errorf("Reason() = %q, want %q", got, want)
		}
		if !errors.Is(tt.err, netguard.ErrNotAllowed) {
			t.Errorf("%v does not match ErrNotAllowed", tt.err)
		}
	}
}

func TestRefusedErrorDoesNotLeakUserinfo(t *testing.T) {
	err := mustPolicy(t, netguard.Options{}).CheckURL("http://admin:s3cret@example.com/")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("CheckURL = %v; want a refusal without the password", err)
	}
	err = mustPolicy(t, netguard.Options{}).CheckURL("http://admin:s3cret@exa mple.com/")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("CheckURL = %v; want a refusal without the password", err)
	}
}
