package netguard

import (
	"net/netip"
	"strings"
)

// The rules, in the words a [RefusedError] reports them.
const (
	ruleMalformedURL = "malformed URL"
	ruleScheme       = "scheme must be http or https"
	ruleUserinfo     = "userinfo (user:password@) is not allowed in an endpoint URL"
	ruleNoHost       = "host required"
	rulePort         = "port must be 1..65535"
	ruleNetwork      = "network must be tcp"

	ruleZone         = "IPv6 zone identifier not allowed"
	ruleBadIPLiteral = "malformed IPv6 literal"
	ruleBadName      = "malformed host name"
	ruleNameChars    = "host name may only contain ASCII letters, digits, '-', '_' and '.' (use the punycode form of international names)"
	ruleAmbiguous    = "ambiguous IP literal (decimal, octal, hex or short IPv4 forms are not allowed; write a dotted-quad address)"
	ruleMetaName     = "cloud metadata host name"
	ruleLocalName    = "loopback host name (localhost)"

	ruleInvalidAddr = "invalid IP address"
	ruleUnspecified = "unspecified address"
	ruleLinkLocal   = "link-local address (cloud metadata)"
	ruleMetaAddr    = "cloud metadata address"
	ruleMulticast   = "multicast address"
	ruleBroadcast   = "broadcast address"
	ruleReserved    = "reserved address (240.0.0.0/4)"
	ruleLoopback    = "loopback address"
	ruleRFC1918     = "private address (RFC 1918)"
	ruleCGNAT       = "shared address space (CGNAT 100.64.0.0/10)"
	ruleULA         = "unique local address (fc00::/7)"
	ruleSiteLocal   = "site-local address (deprecated fec0::/10)"
)

// class is how the policy treats an address or a host name.
type class uint8

const (
	// classPublic is allowed.
	classPublic class = iota
	// classPrivate is refused unless private endpoints are allowed or the
	// endpoint is on the allow-list.
	classPrivate
	// classRefused is always refused.
	classRefused
)

// verdict is the classification of one address.
type verdict struct {
	class class
	// rule says why, in words; empty for classPublic.
	rule string
	// judged is the address the verdict is about: the address itself, or
	// the IPv4 address embedded in an IPv6 one. CIDR allow-list entries
	// are matched against both.
	judged netip.Addr
}

// classifyAddr classifies ip by the address rules of the endpoint policy.
func classifyAddr(ip netip.Addr) verdict {
	switch {
	case !ip.IsValid():
		return verdict{classRefused, ruleInvalidAddr, ip}
	case ip.Is4():
		return classify4(ip)
	case ip.Zone() != "":
		return verdict{classRefused, ruleZone, ip}
	}
	a := ip.As16()
	switch {
	case ip.IsUnspecified():
		return verdict{classRefused, ruleUnspecified, ip}
	case ip == netip.IPv6Loopback():
		return verdict{classPrivate, ruleLoopback, ip}
	case a[0] == 0xfe && a[1]&0xc0 == 0x80: // fe80::/10
		return verdict{classRefused, ruleLinkLocal, ip}
	case a[0] == 0xff: // ff00::/8
		return verdict{classRefused, ruleMulticast, ip}
	case ip == awsMetadata6():
		return verdict{classRefused, ruleMetaAddr, ip}
	}
	if v4, form, ok := embeddedIPv4(a); ok {
		v := classify4(v4)
		if v.class != classPublic {
			v.rule += ", embedded in " + form
		}
		return v
	}
	switch {
	case a[0]&0xfe == 0xfc: // fc00::/7
		return verdict{classPrivate, ruleULA, ip}
	case a[0] == 0xfe && a[1]&0xc0 == 0xc0: // fec0::/10
		return verdict{classPrivate, ruleSiteLocal, ip}
	}
	return verdict{classPublic, "", ip}
}

// classify4 classifies an IPv4 address.
func classify4(ip netip.Addr) verdict {
	b := ip.As4()
	switch {
	case b[0] == 0: // 0.0.0.0/8
		return verdict{classRefused, ruleUnspecified, ip}
	case b == [4]byte{255, 255, 255, 255}:
		return verdict{classRefused, ruleBroadcast, ip}
	case b[0] == 169 && b[1] == 254: // 169.254.0.0/16
		return verdict{classRefused, ruleLinkLocal, ip}
	case b[0]&0xf0 == 224: // 224.0.0.0/4
		return verdict{classRefused, ruleMulticast, ip}
	case b[0]&0xf0 == 240: // 240.0.0.0/4
		return verdict{classRefused, ruleReserved, ip}
	case b == [4]byte{100, 100, 100, 200}: // Alibaba Cloud metadata, inside CGNAT
		return verdict{classRefused, ruleMetaAddr, ip}
	case b[0] == 127: // 127.0.0.0/8
		return verdict{classPrivate, ruleLoopback, ip}
	case b[0] == 10, // 10.0.0.0/8
		b[0] == 172 && b[1]&0xf0 == 16, // 172.16.0.0/12
		b[0] == 192 && b[1] == 168:     // 192.168.0.0/16
		return verdict{classPrivate, ruleRFC1918, ip}
	case b[0] == 100 && b[1]&0xc0 == 64: // 100.64.0.0/10
		return verdict{classPrivate, ruleCGNAT, ip}
	}
	return verdict{classPublic, "", ip}
}

// awsMetadata6 is fd00:ec2::254, the IPv6 address of the AWS instance
// metadata service. It lies in the ULA range but is always refused.
func awsMetadata6() netip.Addr {
	return netip.AddrFrom16([16]byte{0xfd, 0x00, 0x0e, 0xc2, 14: 0x02, 15: 0x54})
}

// embeddedIPv4 returns the IPv4 address carried by an IPv6 address in one
// of the embeddings that route to (or stand for) that IPv4 address, and the
// name of the embedding. The caller has already handled :: and ::1.
func embeddedIPv4(a [16]byte) (netip.Addr, string, bool) {
	last := func() netip.Addr { return netip.AddrFrom4([4]byte(a[12:16])) }
	zero := func(b []byte) bool {
		for _, x := range b {
			if x != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case zero(a[:10]) && a[10] == 0xff && a[11] == 0xff: // ::ffff:0:0/96
		return last(), "an IPv4-mapped IPv6 address", true
	case zero(a[:12]): // ::/96
		return last(), "an IPv4-compatible IPv6 address", true
	case zero(a[:8]) && a[8] == 0xff && a[9] == 0xff && zero(a[10:12]): // ::ffff:0:0:0/96
		return last(), "an IPv4-translated IPv6 address", true
	case a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && zero(a[4:12]): // 64:ff9b::/96
		return last(), "a NAT64 (64:ff9b::/96) address", true
	case a[0] == 0x20 && a[1] == 0x02: // 2002::/16
		return netip.AddrFrom4([4]byte(a[2:6])), "a 6to4 (2002::/16) address", true
	}
	return netip.Addr{}, "", false
}

// classifyName classifies a host name that [parseHost] accepted.
func classifyName(name string) verdict {
	switch {
	case name == "metadata" || name == "metadata.google.internal":
		return verdict{class: classRefused, rule: ruleMetaName}
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return verdict{class: classPrivate, rule: ruleLocalName}
	}
	return verdict{class: classPublic}
}

// host is a parsed host: either an IP literal or a normalised name.
type host struct {
	// addr is the address when the host is an IP literal.
	addr netip.Addr
	// name is the lower-case name without a trailing dot when the host is
	// not an IP literal.
	name string
}

// parseHost parses a host as it appears in a URL (brackets removed,
// percent-decoded) or in a dial address. It accepts canonical IP literals
// and plain ASCII DNS names, and returns the rule that refuses anything
// else, including names that some resolvers would read as IP addresses.
func parseHost(h string) (host, string) {
	if h == "" {
		return host{}, ruleNoHost
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return host{}, ruleZone
		}
		return host{addr: ip}, ""
	}
	if strings.Contains(h, ":") {
		return host{}, ruleBadIPLiteral
	}
	name, rule := normalizeName(h)
	if rule != "" {
		return host{}, rule
	}
	if endsInNumber(name) {
		return host{}, ruleAmbiguous
	}
	return host{name: name}, ""
}

// normalizeName validates a DNS name and returns it in lower case without
// its trailing dot.
func normalizeName(h string) (string, string) {
	name := strings.TrimSuffix(h, ".")
	if name == "" || len(name) > 253 {
		return "", ruleBadName
	}
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return "", ruleBadName
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		case 'A' <= c && c <= 'Z':
		default:
			return "", ruleNameChars
		}
		label++
		if label > 63 {
			return "", ruleBadName
		}
	}
	if label == 0 {
		return "", ruleBadName
	}
	return strings.ToLower(name), ""
}

// endsInNumber reports whether the last label of a normalised name is a
// number (decimal, or hex with a 0x prefix). Such a name is not a DNS name
// (no top-level domain is numeric) but an IPv4 address in a form that
// inet_aton and the WHATWG URL parser accept: 2130706433, 0177.0.0.1,
// 0x7f.0.0.1, 127.1, or a dotted quad with a trailing dot. Canonical dotted
// quads never get here: they parse as addresses first.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		last = last[2:]
		for i := 0; i < len(last); i++ {
			c := last[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return last != ""
}
