package httpserver

import "net/http"

// certLookup returns the identity that the request's verified TLS client
// certificate stands for (Options.CertIdentity): the current token of
// that name, with its scopes, so that removing the token from the tokens
// file revokes the certificate's access too.
func (s *Server) certLookup(r *http.Request) (Identity, bool) {
	if s.certName == nil || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	name, ok := s.certName(r.TLS.VerifiedChains[0][0])
	if !ok || name == "" {
		return Identity{}, false
	}
	for _, e := range s.tokens.Load().entries {
		if e.name == name {
			return e.identity(), true
		}
	}
	return Identity{}, false
}
