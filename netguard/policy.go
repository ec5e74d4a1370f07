package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Options configures a [Policy]. The zero value refuses private addresses
// and allow-lists nothing, which is what `agentmesh serve` wants by default.
type Options struct {
	// AllowPrivate allows loopback (127.0.0.0/8, ::1, localhost and
	// *.localhost), RFC 1918, CGNAT (100.64.0.0/10) and ULA (fc00::/7)
	// addresses, and the IPv6 embeddings of such IPv4 addresses. False (the
	// zero value) refuses them. It never allows the always-refused
	// addresses and names (see the package documentation).
	AllowPrivate bool

	// AllowHosts lists endpoints that are allowed even when private. Each
	// entry is one of:
	//
	//   - an exact host name, e.g. "agents.corp.example" (case-insensitive,
	//     a trailing dot is ignored);
	//   - a wildcard "*.suffix", e.g. "*.corp.example", matching every name
	//     that ends in ".corp.example" (but not "corp.example" itself);
	//   - a CIDR prefix, e.g. "10.1.0.0/16" or "fd00:1::/64" (host bits are
	//     masked off), or a single IP address.
	//
	// A name entry allows the name and whatever address it resolves to at
	// dial time; a prefix entry allows the addresses in it, whatever name
	// led to them. Entries never allow the always-refused addresses and
	// names. Surrounding spaces are trimmed; any other malformed entry makes
	// [NewPolicy] fail. Nil or empty (the zero value) allow-lists nothing.
	AllowHosts []string

	// Hint tells a user how to allow a private endpoint, in the words of
	// whoever builds the policy (a command-line flag, a setting), e.g.
	// "set --allow-private-endpoints to allow". It is appended, after
	// "; ", to the rule of every refusal of a private address or name:
	// those AllowPrivate or AllowHosts would lift. Empty (the zero value)
	// appends nothing.
	Hint string
}

// Policy is the endpoint policy: which endpoints the mesh may
// make outbound requests to. Check a URL at registration with
// [Policy.CheckURL]; make the requests with a client from
// [Policy.NewClient], which checks every address it connects to.
//
// A Policy is immutable and safe for concurrent use. A nil *Policy is
// valid and is the library default: it allows private addresses but still
// refuses the always-refused ones. The zero Policy refuses private
// addresses and allow-lists nothing, like NewPolicy(Options{}).
type Policy struct {
	allowPrivate bool
	// hint is appended, after "; ", to the rule of a private refusal.
	hint string
	// names holds exact allow-listed names, lower case, no trailing dot.
	names map[string]struct{}
	// suffixes holds the ".suffix" of each "*.suffix" entry.
	suffixes []string
	// prefixes holds the allow-listed CIDR prefixes, masked.
	prefixes []netip.Prefix
}

// NewPolicy compiles opts into a Policy. It returns an error wrapping
// [ErrInvalidAllowHost] that names every malformed AllowHosts entry. The
// Policy keeps no reference to opts.
func NewPolicy(opts Options) (*Policy, error) {
	p := &Policy{allowPrivate: opts.AllowPrivate, hint: opts.Hint}
	var errs []error
	for _, entry := range opts.AllowHosts {
		if err := p.addAllowHost(entry); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// addAllowHost compiles one AllowHosts entry into p.
func (p *Policy) addAllowHost(entry string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidAllowHost, entry, why)
	}
	e := strings.TrimSpace(entry)
	switch {
	case e == "":
		return bad("empty entry")
	case strings.Contains(e, "/"):
		pfx, err := netip.ParsePrefix(e)
		if err != nil {
			return bad("not a CIDR prefix such as 10.1.0.0/16 or fd00::/8")
		}
		if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
		}
		p.prefixes = append(p.prefixes, pfx.Masked())
		return nil
	}
	if ip, err := netip.ParseAddr(e); err == nil {
		if ip.Zone() != "" {
			return bad("IPv6 zone identifiers are not allowed")
		}
		ip = ip.Unmap()
		p.prefixes = append(p.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
		return nil
	}
	if strings.Contains(e, ":") {
		return bad("not a host name, IP address or CIDR prefix (no scheme, port or brackets)")
	}
	name, wildcard := strings.CutPrefix(e, "*.")
	name, rule := normalizeName(name)
	switch {
	case rule != "":
		return bad(rule)
	case endsInNumber(name):
		return bad("not a dotted-quad IPv4 address or a host name")
	case strings.Contains(name, "*"):
		return bad("a wildcard must be a leading *.")
	}
	if wildcard {
		p.suffixes = append(p.suffixes, "."+name)
		return nil
	}
	if p.names == nil {
		p.names = make(map[string]struct{})
	}
	p.names[name] = struct{}{}
	return nil
}

// CheckURL checks an endpoint URL at registration time: the scheme must be
// http or https, there must be a host and no userinfo, and the host must
// pass the policy. A host name is judged by name only; CheckURL does no
// DNS lookups (the client from [Policy.NewClient] checks the addresses a
// name resolves to when it connects). The length limit of the URL is not
// checked here.
//
// It returns nil or a *[RefusedError] wrapping [ErrNotAllowed].
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &RefusedError{Rule: ruleMalformedURL}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &RefusedError{Rule: ruleScheme}
	}
	if u.User != nil {
		return &RefusedError{Rule: ruleUserinfo}
	}
	if u.Opaque != "" || u.Host == "" {
		return &RefusedError{Rule: ruleNoHost}
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return &RefusedError{Rule: rulePort, Host: u.Hostname()}
		}
	}
	_, err = p.checkHost(u.Hostname())
	return err
}

// CheckAddr checks an IP address, e.g. one about to be dialled, against the
// address rules and the CIDR entries of the allow-list. Name entries of the
// allow-list play no part; use [Policy.CheckHostAddr] when the address
// came from resolving a name. The zero Addr is refused.
//
// It returns nil or a *[RefusedError] wrapping [ErrNotAllowed].
func (p *Policy) CheckAddr(ip netip.Addr) error {
	return p.checkAddr("", ip, false)
}

// CheckHostAddr checks that a connection to ip on behalf of host is
// allowed, where host is the name (or IP literal) of the endpoint and ip an
// address it resolved to. The host must pass the rules [Policy.CheckURL]
// applies to hosts, and ip must pass [Policy.CheckAddr], except that a
// private ip is also allowed when host matches a name entry of the
// allow-list. An empty host makes it the same as CheckAddr.
//
// It returns nil or a *[RefusedError] wrapping [ErrNotAllowed].
func (p *Policy) CheckHostAddr(host string, ip netip.Addr) error {
	if host == "" {
		return p.CheckAddr(ip)
	}
	h, err := p.checkHost(host)
	if err != nil {
		return err
	}
	return p.checkAddr(host, ip, p.nameAllowed(h.name))
}

// checkHost parses host (an IP literal or a name, no brackets) and applies
// the rules that need no DNS: address rules to a literal, name rules to a
// name.
func (p *Policy) checkHost(hostname string) (host, error) {
	h, rule := parseHost(hostname)
	if rule != "" {
		return host{}, &RefusedError{Rule: rule, Host: hostname}
	}
	if h.addr.IsValid() {
		return h, p.checkAddr(hostname, h.addr, false)
	}
	v := classifyName(h.name)
	switch {
	case v.class == classRefused,
		v.class == classPrivate && !p.allowsPrivate() && !p.nameAllowed(h.name):
		return host{}, p.refusal(v, hostname, netip.Addr{})
	}
	return h, nil
}

// checkAddr applies the address rules to ip. A private address is allowed
// when private addresses are, when nameAllowed says the host name that led
// to it is allow-listed, or when a CIDR entry contains it. hostname is
// reported in the refusal.
func (p *Policy) checkAddr(hostname string, ip netip.Addr, nameAllowed bool) error {
	v := classifyAddr(ip)
	switch v.class {
	case classPublic:
		return nil
	case classPrivate:
		if p.allowsPrivate() || nameAllowed || p.prefixAllowed(ip) || p.prefixAllowed(v.judged) {
			return nil
		}
	}
	return p.refusal(v, hostname, ip)
}

// refusal builds the error for a verdict that refuses: a private one
// carries the policy's hint.
func (p *Policy) refusal(v verdict, hostname string, ip netip.Addr) *RefusedError {
	rule := v.rule
	if v.class == classPrivate && p != nil && p.hint != "" {
		rule += "; " + p.hint
	}
	return &RefusedError{Rule: rule, Host: hostname, Addr: ip}
}

// allowsPrivate reports whether private addresses are allowed. A nil
// Policy allows them.
func (p *Policy) allowsPrivate() bool { return p == nil || p.allowPrivate }

// nameAllowed reports whether a normalised name is allow-listed by an
// exact or a wildcard entry.
func (p *Policy) nameAllowed(name string) bool {
	if p == nil || name == "" {
		return false
	}
	if _, ok := p.names[name]; ok {
		return true
	}
	for _, s := range p.suffixes {
		if len(name) > len(s) && strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// prefixAllowed reports whether a CIDR entry contains ip.
func (p *Policy) prefixAllowed(ip netip.Addr) bool {
	if p == nil || !ip.IsValid() {
		return false
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}
