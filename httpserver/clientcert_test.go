package httpserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/harness/certtest"
)

// TestCertIdentity: with Options.CertIdentity, a verified client
// certificate stands for the token its hook names (that token's scopes);
// a token sent along wins; a certificate the server did not verify, or one
// naming no current token, authenticates nothing; SetTokens revokes it.
func TestCertIdentity(t *testing.T) {
	ca, rogue := certtest.NewCA(t, "client CA"), certtest.NewCA(t, "rogue CA")
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.CertIdentity = func(c *x509.Certificate) (string, bool) { return c.Subject.CommonName, true }
	}})
	ts := httptest.NewUnstartedServer(e.srv)
	ts.TLS = &tls.Config{ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	get := func(cert *certtest.Pair, method, path, token string) int {
		t.Helper()
		cfg := &tls.Config{RootCAs: roots}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{cert.TLS(t)}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		req, err := http.NewRequest(method, ts.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	reader := ca.Issue(t, certtest.Client, "reader")
	assert.Equal(t, http.StatusOK, get(reader, "GET", "/v1/agents", ""), "the reader token's identity")
	assert.Equal(t, http.StatusForbidden, get(reader, "POST", "/v1/agents", ""), "with the reader's scopes only")
	assert.Equal(t, http.StatusUnauthorized, get(reader, "GET", "/v1/agents", "wrong"), "a token sent along is checked alone")
	assert.Equal(t, http.StatusOK, get(reader, "GET", "/v1/agents", adminToken))
	assert.Equal(t, http.StatusUnauthorized, get(ca.Issue(t, certtest.Client, "nobody"), "GET", "/v1/agents", ""), "no token of that name")
	assert.Equal(t, http.StatusUnauthorized, get(nil, "GET", "/v1/agents", ""))

	// A certificate of another CA authenticates nothing (Go's client does
	// not even send it: the server names its CAs); a server that does not
	// verify client certificates ignores them.
	cfg := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{rogue.Issue(t, certtest.Client, "reader").TLS(t)}}
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(ts.URL + "/v1/agents")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a certificate of another CA")
	forced := rogue.Issue(t, certtest.Client, "reader").TLS(t)
	cfg = &tls.Config{RootCAs: roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forced, nil }}
	_, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(ts.URL + "/v1/agents")
	assert.Error(t, err, "a certificate of another CA, sent anyway, fails the handshake")
	noVerify := httptest.NewUnstartedServer(e.srv)
	noVerify.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	noVerify.StartTLS()
	t.Cleanup(noVerify.Close)
	cfg = &tls.Config{RootCAs: noVerify.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, Certificates: []tls.Certificate{reader.TLS(t)}}
	resp, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(noVerify.URL + "/v1/agents")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an unverified certificate authenticates nothing")

	// Removing the token revokes the certificate.
	require.NoError(t, e.srv.SetTokens(testTokens()[1:]))
	assert.Equal(t, http.StatusUnauthorized, get(reader, "GET", "/v1/agents", ""))
}
