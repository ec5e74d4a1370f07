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
	// on, e.g. "link-local address (cloud metadata)" or "loopback address;
	// set --allow-private-endpoints to allow". It is never empty.
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

// Error returns "netguard: endpoint not allowed: " followed by the host and
// address when known, and the rule.
func (e *RefusedError) Error() string {
	msg := "netguard: endpoint not allowed: "
	switch {
	case e.Host != "" && e.Addr.IsValid() && e.Addr.String() != e.Host:
		msg += e.Host + " (" + e.Addr.String() + "): "
	case e.Host != "":
		msg += e.Host + ": "
	case e.Addr.IsValid():
		msg += e.Addr.String() + ": "
	}
	return msg + e.Rule
}

// Unwrap returns [ErrNotAllowed].
func (e *RefusedError) Unwrap() error { return ErrNotAllowed }
