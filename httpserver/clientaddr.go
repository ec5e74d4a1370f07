package httpserver

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Limits of the forwarding headers read from a trusted proxy: more hops,
// or a longer Forwarded line, make the header malformed (the peer's
// address is used).
const (
	maxForwardedHops = 32
	maxForwardedLine = 8 << 10
)

// ParseTrustedProxies reads the `--trusted-proxies` form: a
// comma-separated list of CIDRs ("10.0.0.0/8, fd00::/8") or single
// addresses ("192.0.2.7", meaning /32, or /128 for IPv6). An empty string
// means none.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var p netip.Prefix
		if strings.Contains(item, "/") {
			var err error
			if p, err = netip.ParsePrefix(item); err != nil {
				return nil, fmt.Errorf("httpserver: trusted proxy %q: not a CIDR such as 10.0.0.0/8", item)
			}
		} else {
			a, err := netip.ParseAddr(item)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("httpserver: trusted proxy %q: not an IP address or a CIDR", item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Zone() != "" {
			return nil, fmt.Errorf("httpserver: trusted proxy %q: zones are not allowed", item)
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// proxies is the set of trusted reverse proxies.
type proxies []netip.Prefix

func (ps proxies) trusts(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr returns the address of r's client: the connection's peer,
// unless the peer is a trusted proxy, in which case it is the rightmost
// hop of X-Forwarded-For or Forwarded (RFC 7239 for=) that is not a
// trusted proxy (every hop to its right was added by one). A missing,
// malformed or unidentifiable ("unknown", obfuscated) chain means the
// peer; so does a request carrying both headers when they disagree,
// because a proxy that writes one passes the other from the client
// unchanged. A peer that is not an IP address (a Unix socket) is returned
// as it is.
func (ps proxies) clientAddr(r *http.Request) string {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if len(ps) == 0 || !ps.trusts(peer) {
		return peer.String()
	}
	xff, hasXFF := r.Header["X-Forwarded-For"]
	fwd, hasFwd := r.Header["Forwarded"]
	if !hasXFF && !hasFwd {
		return peer.String()
	}
	var client netip.Addr
	if hasXFF {
		a, ok := ps.rightmost(xffHops(xff))
		if !ok {
			return peer.String()
		}
		client = a
	}
	if hasFwd {
		a, ok := ps.rightmost(forwardedHops(fwd))
		if !ok || (client.IsValid() && a != client) {
			return peer.String()
		}
		client = a
	}
	return client.String()
}

// rightmost walks hops from the right (next yields them right to left)
// and returns the first one that is not a trusted proxy, or the leftmost
// one when all are trusted. ok is false when a hop it reaches is not an
// address, or when there are too many.
func (ps proxies) rightmost(next func() (hop string, more bool)) (netip.Addr, bool) {
	var last netip.Addr
	for range maxForwardedHops {
		hop, more := next()
		if !more {
			return last, last.IsValid()
		}
		a, ok := parseHop(hop)
		if !ok {
			return netip.Addr{}, false
		}
		if !ps.trusts(a) {
			return a, true
		}
		last = a
	}
	return netip.Addr{}, false
}

// xffHops yields the comma-separated hops of the X-Forwarded-For lines,
// right to left, without splitting the parts never reached. An empty hop
// ("a,,b", an empty line) is yielded as it is, and does not parse.
func xffHops(lines []string) func() (string, bool) {
	i := len(lines)
	var cur string
	done := true // cur is used up
	return func() (string, bool) {
		if done {
			if i--; i < 0 {
				return "", false
			}
			cur, done = lines[i], false
		}
		j := strings.LastIndexByte(cur, ',')
		if j < 0 {
			done = true
			return cur, true
		}
		hop := cur[j+1:]
		cur = cur[:j]
		return hop, true
	}
}

// forwardedHops yields the for= values of the Forwarded lines, right to
// left. A line that does not parse, or an element without for=, yields
// an empty hop (malformed); lines to its left are not parsed.
func forwardedHops(lines []string) func() (string, bool) {
	i := len(lines) - 1
	var cur []string
	return func() (string, bool) {
		for len(cur) == 0 {
			if i < 0 {
				return "", false
			}
			fors, ok := parseForwarded(lines[i])
			i--
			if !ok {
				return "", true
			}
			cur = fors
		}
		hop := cur[len(cur)-1]
		cur = cur[:len(cur)-1]
		return hop, true
	}
}

// parseForwarded returns the for= value of each element of one
// Forwarded line (RFC 7239: elements separated by commas, pairs by
// semicolons, values tokens or quoted strings), "" for an element without
// one. ok is false when the line does not parse, is empty or is too long.
func parseForwarded(line string) (fors []string, ok bool) {
	if len(line) > maxForwardedLine {
		return nil, false
	}
	s := line
	var forVal string
	hasFor := false
	for {
		s = strings.TrimLeft(s, " \t")
		n := strings.IndexFunc(s, func(r rune) bool { return !isTChar(r) })
		if n <= 0 || s[n] != '=' {
			return nil, false // no name, or end of line without '='
		}
		name := strings.ToLower(s[:n])
		s = s[n+1:]
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			j := 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
					if j == len(s) {
						return nil, false
					}
				}
				b.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, false // unterminated quoted string
			}
			val, s = b.String(), s[j+1:]
		} else {
			m := strings.IndexFunc(s, func(r rune) bool { return !isTChar(r) })
			if m < 0 {
				m = len(s)
			}
			if m == 0 {
				return nil, false
			}
			val, s = s[:m], s[m:]
		}
		if name == "for" {
			if hasFor {
				return nil, false // two for= in one element
			}
			forVal, hasFor = val, true
		}
		s = strings.TrimLeft(s, " \t")
		switch {
		case s == "":
			return append(fors, forVal), true
		case s[0] == ';':
			s = s[1:]
		case s[0] == ',':
			fors = append(fors, forVal)
			forVal, hasFor = "", false
			s = s[1:]
		default:
			return nil, false
		}
	}
}

// isTChar reports whether r is a token character of RFC 9110, plus ':',
// '[' and ']' so that unquoted addresses with ports (which RFC 7239 wants
// quoted) still parse.
func isTChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~:[]", r)
}

// parseHop reads one hop: an IPv4 or IPv6 address, optionally in
// brackets, optionally with a port ("192.0.2.1:443", "[2001:db8::1]:80").
// IPv4-mapped IPv6 addresses are unmapped; zones are refused.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		if ap, err2 := netip.ParseAddrPort(s); err2 == nil {
			a, err = ap.Addr(), nil
		} else if inner, ok := strings.CutPrefix(s, "["); ok && strings.HasSuffix(inner, "]") {
			a, err = netip.ParseAddr(strings.TrimSuffix(inner, "]"))
		}
	}
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// throttleKey is the key of a client address in the failed-authentication
// throttle: an IPv4 address by itself, an IPv6 address by its /64 (the
// smallest block a site or a cloud machine gets, so one holder cannot
// rotate through 2^64 keys), anything else as it is.
func throttleKey(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil || a.Zone() != "" {
		return client
	}
	if a = a.Unmap(); a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}
