// Package netguard keeps the mesh from being turned into a proxy into
// private networks (server-side request forgery). It implements the
// mesh's endpoint policy and the HTTP client every outbound call of the
// mesh goes through.
//
// A [Policy] is built from [Options] by [NewPolicy]. It is applied twice:
//
//   - at registration, to the endpoint URL, by [Policy.CheckURL];
//   - at dial time, to every address the endpoint's host resolves to and
//     to the address the socket actually connects to, by the client of
//     [Policy.NewClient]. This catches names that resolve to private
//     addresses and DNS rebinding. [Policy.CheckAddr] and
//     [Policy.CheckHostAddr] expose the same checks.
//
// For example:
//
//	policy, err := netguard.NewPolicy(netguard.Options{AllowHosts: []string{"10.1.0.0/16"}})
//	if err != nil {
//		return err // a malformed AllowHosts entry
//	}
//	if err := policy.CheckURL(endpoint); err != nil {
//		return err // a *netguard.RefusedError
//	}
//	client := policy.NewClient(nil)
//	resp, err := client.Do(req) // errors.Is(err, netguard.ErrNotAllowed) on refusal
//
// # Rules
//
// A URL must be http or https, have a host, and have no userinfo. Its host
// must be a canonical IP literal (IPv6 in brackets) or a plain ASCII DNS
// name. Refused with a rule of their own are IPv6 zone identifiers and
// hosts that some resolvers read as IPv4 addresses though they are not
// dotted quads ("ambiguous IP literal": 2130706433, 0177.0.0.1,
// 0x7f.0.0.1, 127.1, 127.0.0.1.).
//
// Always refused, even when allow-listed:
//
//   - unspecified addresses (0.0.0.0/8, ::);
//   - link-local addresses (169.254.0.0/16, fe80::/10), where cloud
//     metadata services live;
//   - multicast (224.0.0.0/4, ff00::/8), broadcast (255.255.255.255) and
//     reserved (240.0.0.0/4) addresses;
//   - the cloud metadata addresses that are not link-local,
//     100.100.100.200 and fd00:ec2::254;
//   - the names metadata and metadata.google.internal.
//
// Refused unless [Options.AllowPrivate] is set or the endpoint is
// allow-listed: loopback (127.0.0.0/8, ::1, localhost and *.localhost),
// RFC 1918, CGNAT (100.64.0.0/10), ULA (fc00::/7) and site-local
// (fec0::/10) addresses.
//
// An IPv6 address that embeds an IPv4 address (IPv4-mapped ::ffff:a.b.c.d,
// IPv4-compatible ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d, NAT64
// 64:ff9b::/96 and 6to4 2002::/16) is judged as that IPv4 address.
//
// Names are compared case-insensitively and without a trailing dot.
//
// # Allow-list
//
// [Options.AllowHosts] holds exact names, "*.suffix" wildcards and CIDR
// prefixes. A name entry allows the name itself (so "localhost" may be
// allow-listed) and every address the name resolves to; a prefix entry
// allows the addresses it contains, whichever name led to them. Neither
// ever allows an always-refused address or name.
//
// # Nil policy
//
// A nil *Policy is the library default: private endpoints are allowed (a
// local tool talking to local agents), the always-refused ones are not.
// `agentmesh serve` builds its Policy with AllowPrivate false.
//
// # Concurrency
//
// A Policy is immutable once built, and all its methods are safe for
// concurrent use, as are the clients and transports it returns. The
// package has no global state.
//
// # Errors
//
// Every refusal is a *[RefusedError] whose Rule names the rule in words
// (followed by [Options.Hint] when allowing private endpoints would lift
// it), and which wraps [ErrNotAllowed]; match it with [errors.Is] or read it
// with [errors.As]. Refusals at dial time reach the caller of
// [http.Client.Do] wrapped in *url.Error (and *net.OpError for the socket
// check), so errors.Is(err, ErrNotAllowed) tells them apart from network
// failures. DNS failures are wrapped with their cause and do not match
// ErrNotAllowed. [NewPolicy] returns an error wrapping
// [ErrInvalidAllowHost] for each malformed entry.
package netguard
