package netguard

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"syscall"
)

// DialCause says in words why a connection to a host could not be made,
// without what Go's error texts carry of the network: the addresses a
// name resolved to ("dial tcp 10.0.0.5:80: …") and the resolver's address
// ("lookup x on 10.0.0.2:53: …"). Those are the mesh's network, not the
// business of whoever asked for the connection, and telling "connection
// refused" from a timeout is all a caller needs to act. A refusal of the
// endpoint policy is its [RefusedError.Reason].
func DialCause(err error) string {
	var refused *RefusedError
	var dns *net.DNSError
	switch {
	case errors.As(err, &refused):
		return "refused by the endpoint policy: " + refused.Reason()
	case errors.Is(err, ErrNotAllowed):
		return "refused by the endpoint policy"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "the host name does not resolve"
	case errors.As(err, &dns) && dns.IsTimeout:
		return "the host name lookup timed out"
	case errors.As(err, &dns):
		return "the host name lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to the host's address"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "connection timed out"
	}
	var tlsErr *tls.CertificateVerificationError
	var rec tls.RecordHeaderError
	var op *net.OpError
	var ue *url.Error
	switch {
	case errors.As(err, &tlsErr):
		return "the TLS certificate does not verify: " + tlsErr.Err.Error()
	case errors.As(err, &rec):
		return "the host does not speak TLS"
	case errors.As(err, &op):
		return "connection failed"
	case errors.As(err, &ue) && ue.Err != nil:
		return ue.Err.Error() // without the URL, which may carry a secret query
	}
	return err.Error()
}
