package netguard

import (
	"errors"
	"net/netip"
)

// Sentinel errors. Match them with [errors.Is].
var (
	// ErrNotAllowed is wrapped by every refusal of the endpoint policy,
	// whether it comes from [Policy.CheckURL], [Policy.CheckAddr],
	// [Policy.CheckHostAddr] or a connection attempt of a client built by
	// [Policy.NewClient]. The refusal itself is a *[RefusedError].
	ErrNotAllowed = errors.New("netguard: endpoint not allowed")

	// ErrInvalidAllowHost is wrapped by the error [NewPolicy] returns for a
	// malformed [Options.AllowHosts] entry.
	ErrInvalidAllowHost = errors.New("netguard: invalid AllowHosts entry")
)

// RefusedError is a refusal by the endpoint policy. It unwraps to
// [ErrNotAllowed]; use [errors.As] to read the rule.
//
// The error never repeats the URL it was given, so a password in refused
// userinfo does not end up in logs. A RefusedError is not modified after
// it is returned, so it may be shared between goroutines.
type RefusedError struct {
	// Rule says which rule refused the endpoint, in words a user can act
	// on, e.g. "link-local address (cloud metadata)" or "loopback address",
	// followed for a private endpoint by "; " and the policy's
	// [Options.Hint], when it has one. It is never empty.
	Rule string
	// Host is the host name or IP literal that was refused, as written in
	// the URL or dial address. It is empty when the refusal concerns the
	// URL itself (scheme, userinfo, syntax) or when the check was given
	// only an address ([Policy.CheckAddr]).
	Host string
	// Addr is the address that was refused when a check or a dial looked
	// at an address a host name resolved to. It is the zero Addr when the
	// refusal was decided on the URL or the name alone.
	Addr netip.Addr
}

// Error returns "netguard: endpoint not allowed: " followed by the
// [RefusedError.Reason].
func (e *RefusedError) Error() string {
	return "netguard: endpoint not allowed: " + e.Reason()
}

// Reason returns what was refused and why, for a caller to report in its
// own words: the host and address when known, then the rule, e.g.
// "agent.example (10.0.0.1): private address (RFC 1918)". Like Error, it
// never repeats the URL.
func (e *RefusedError) Reason() string {
	switch {
	case e.Host != "" && e.Addr.IsValid() && e.Addr.String() != e.Host:
		return e.Host + " (" + e.Addr.String() + "): " + e.Rule
	case e.Host != "":
		return e.Host + ": " + e.Rule
	case e.Addr.IsValid():
		return e.Addr.String() + ": " + e.Rule
	}
	return e.Rule
}

// Unwrap returns [ErrNotAllowed].
func (e *RefusedError) Unwrap() error { return ErrNotAllowed }
