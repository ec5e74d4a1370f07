package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/certtest"
)

// tlsServe starts `serve --tls-cert --tls-key` on a copy of pair's files
// (which the test may replace) with the token "t" and extra args, and
// returns the process with its URL made https://.
func tlsServe(t *testing.T, pair *certtest.Pair, args ...string) (p *meshProc, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	pair.CopyTo(t, certFile, keyFile)
	p = startServe(t, serveSpec{token: "t", args: append([]string{"--tls-cert", certFile, "--tls-key", keyFile}, args...)})
	p.url = "https://" + strings.TrimPrefix(p.url, "http://")
	return p, certFile, keyFile
}

// tlsClient is an HTTPS client trusting ca, with its own connection
// pool (HTTP/2), presenting cert when not nil.
func tlsClient(ca *certtest.CA, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: ca.Pool()}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}, Timeout: 30 * time.Second}
}

// get sends GET path with the bearer token (if any) and reads the reply.
func tlsGet(t *testing.T, c *http.Client, url, token string) (*http.Response, []byte) {
	t.Helper()
	return tlsDo(t, c, http.MethodGet, url, token)
}

func tlsDo(t *testing.T, c *http.Client, method, url, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// servedCert is the CommonName of the certificate a response came with.
func servedCert(resp *http.Response) string {
	return resp.TLS.PeerCertificates[0].Subject.CommonName
}

// TestE2ETLS: `serve --tls-cert --tls-key` serves HTTPS (TLS ≥ 1.2,
// HTTP/2) with HSTS on every response, authenticated or not; plain HTTP on
// its port gets 400 and is served nothing; the public URL defaults to
// https://localhost:<port>.
func TestE2ETLS(t *testing.T) {
	ca := certtest.NewCA(t, "test CA")
	p, _, _ := tlsServe(t, ca.Issue(t, certtest.Server, "localhost", "127.0.0.1"))
	line := p.stderr.wait(t, time.Second, "the serving line", func(l string) bool { return strings.Contains(l, `"msg":"agentmesh serving"`) })
	var rec struct {
		PublicURL string `json:"public_url"`
		TLS       bool   `json:"tls"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &rec))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.url, "https://"))
	assert.Equal(t, "https://localhost:"+port, rec.PublicURL)
	assert.True(t, rec.TLS)

	c := tlsClient(ca, nil)
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/health", "", http.StatusOK},
		{"/v1/agents", "t", http.StatusOK},
		{"/v1/agents", "", http.StatusUnauthorized},
		{"/v1/agents", "wrong", http.StatusUnauthorized},
		{"/no-such-route", "", http.StatusNotFound},
	} {
		resp, body := tlsGet(t, c, p.url+tc.path, tc.token)
		assert.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.path, body)
		assert.Equal(t, "max-age=63072000", resp.Header.Get("Strict-Transport-Security"), tc.path)
		assert.Equal(t, "HTTP/2.0", resp.Proto, tc.path)
		assert.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))
	}
	// The mesh's own links and card use the https public URL.
	resp, body := tlsGet(t, c, p.url+"/.well-known/agent-card.json", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "https://localhost:"+port)

	// Plain HTTP on the TLS port: Go's TLS server answers 400 and closes.
	plain, err := http.Get("http://" + strings.TrimPrefix(p.url, "https://") + "/health")
	require.NoError(t, err)
	pb, _ := io.ReadAll(plain.Body)
	plain.Body.Close()
	assert.Equal(t, http.StatusBadRequest, plain.StatusCode)
	assert.Contains(t, string(pb), "HTTP request to an HTTPS server")
	assert.Empty(t, plain.Header.Get("Strict-Transport-Security"))
	assert.NotContains(t, string(pb), `"status"`, "nothing of the API is served over plain HTTP")

	// Old protocol versions and non-AEAD TLS 1.2 suites are refused.
	addr := strings.TrimPrefix(p.url, "https://")
	_, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS11})
	assert.Error(t, err, "TLS 1.1")
	_, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}})
	assert.Error(t, err, "a CBC suite")
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12})
	require.NoError(t, err, "TLS 1.2 with an AEAD suite")
	assert.Equal(t, uint16(tls.VersionTLS12), conn.ConnectionState().Version)
	conn.Close()

	// The client commands trust a private CA through SSL_CERT_FILE.
	r := runCLI(t, []string{"MESH_URL=" + p.url, "MESH_TOKEN=t", "SSL_CERT_FILE=" + ca.CertFile}, "", "agents", "list")
	assert.Equal(t, 0, r.code, "%s", r)
	r = runCLI(t, []string{"MESH_URL=" + p.url, "MESH_TOKEN=t"}, "", "agents", "list")
	assert.NotEqual(t, 0, r.code, "an unknown CA: %s", r)
	p.stop()
}

// TestE2ETLSReload: replacing the certificate files and sending SIGHUP
// serves the new certificate on new connections while a connection opened
// before keeps working (with the old one); a change of the files alone is
// picked up too; a bad pair keeps the previous one in service and is
// reported (the log, /health/deep, the reload response).
func TestE2ETLSReload(t *testing.T) {
	ca := certtest.NewCA(t, "test CA")
	a := ca.Issue(t, certtest.Server, "a.test", "localhost", "127.0.0.1")
	p, certFile, keyFile := tlsServe(t, a)

	old := tlsClient(ca, nil)
	resp, _ := tlsGet(t, old, p.url+"/health", "")
	require.Equal(t, "a.test", servedCert(resp))

	// SIGHUP after replacing the files.
	b := ca.Issue(t, certtest.Server, "b.test", "localhost", "127.0.0.1")
	b.CopyTo(t, certFile, keyFile)
	p.signal(syscall.SIGHUP)
	p.stderr.wait(t, 10*time.Second, "the reload", func(l string) bool { return strings.Contains(l, `"msg":"reloaded"`) })
	resp, _ = tlsGet(t, tlsClient(ca, nil), p.url+"/health", "")
	assert.Equal(t, "b.test", servedCert(resp), "a new connection gets the new certificate")
	resp, body := tlsGet(t, old, p.url+"/v1/agents", "t")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, "a.test", servedCert(resp), "the open connection keeps working, on its handshake's certificate")

	// A change of the files alone (polled every few seconds).
	c := ca.Issue(t, certtest.Server, "c.test", "localhost", "127.0.0.1")
	c.CopyTo(t, certFile, keyFile)
	p.stderr.wait(t, 15*time.Second, "the file reload", func(l string) bool {
		return strings.Contains(l, `"msg":"TLS certificate reloaded"`) && strings.Contains(l, "c.test")
	})
	resp, _ = tlsGet(t, tlsClient(ca, nil), p.url+"/health", "")
	assert.Equal(t, "c.test", servedCert(resp))

	// A bad pair (d's certificate with c's key): kept out, reported.
	d := ca.Issue(t, certtest.Server, "d.test", "localhost", "127.0.0.1")
	certtest.WriteFile(t, certFile, d.CertPEM)
	p.stderr.wait(t, 15*time.Second, "the failed file reload", func(l string) bool {
		return strings.Contains(l, `"msg":"TLS certificate reload failed; the previous certificate stays in service"`)
	})
	resp, body = tlsDo(t, tlsClient(ca, nil), http.MethodPost, p.url+"/v1/admin/reload", "t")
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "does not match")
	resp, body = tlsGet(t, tlsClient(ca, nil), p.url+"/health/deep", "t")
	assert.Contains(t, string(body), "does not match", "%s", body)
	assert.Equal(t, "c.test", servedCert(resp), "the previous pair stays in service")

	// Fixed: the next reload clears the error.
	d.CopyTo(t, certFile, keyFile)
	p.signal(syscall.SIGHUP)
	require.Eventually(t, func() bool {
		resp, _ := tlsGet(t, tlsClient(ca, nil), p.url+"/health", "")
		return servedCert(resp) == "d.test"
	}, 10*time.Second, 50*time.Millisecond)
	resp, body = tlsGet(t, tlsClient(ca, nil), p.url+"/health/deep", "t")
	assert.NotContains(t, string(body), "lastReloadError", "%s", body)
	p.stop()
}

// TestE2ETLSFlags: half a TLS setting, or files that do not load, stop
// serve at startup with an error naming the flag; the variables
// MESH_TLS_CERT and MESH_TLS_KEY work as the flags.
func TestE2ETLSFlags(t *testing.T) {
	ca := certtest.NewCA(t, "test CA")
	a, b := ca.Issue(t, certtest.Server, "localhost"), ca.Issue(t, certtest.Server, "localhost")
	db := filepath.Join(t.TempDir(), "mesh.db")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"cert alone", nil, []string{"--tls-cert", a.CertFile}, 2, "--tls-cert needs --tls-key (MESH_TLS_KEY)"},
		{"key alone", []string{"MESH_TLS_KEY=" + a.KeyFile}, nil, 2, "--tls-key needs --tls-cert (MESH_TLS_CERT)"},
		{"client CA without TLS", nil, []string{"--tls-client-ca", ca.CertFile}, 2, "--tls-client-ca needs --tls-cert"},
		{"mismatched pair", nil, []string{"--tls-cert", a.CertFile, "--tls-key", b.KeyFile}, 1, "does not match"},
		{"missing key", nil, []string{"--tls-cert", a.CertFile, "--tls-key", a.KeyFile + ".missing"}, 1, "no such file"},
		{"client CA not PEM", nil, []string{"--tls-cert", a.CertFile, "--tls-key", a.KeyFile, "--tls-client-ca", a.KeyFile}, 1, "--tls-client-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, tc.args...)
			r := runCLI(t, append(tc.env, "MESH_TOKEN=t"), "", args...)
			assert.Equal(t, tc.code, r.code, "%s", r)
			assert.Contains(t, r.stderr, tc.want, "%s", r)
		})
	}

	// The variables alone serve HTTPS.
	p := startServe(t, serveSpec{token: "t", env: []string{"MESH_TLS_CERT=" + a.CertFile, "MESH_TLS_KEY=" + a.KeyFile}})
	conn, err := tls.Dial("tcp", strings.TrimPrefix(p.url, "http://"), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	require.NoError(t, err)
	fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	conn.Close()
	p.stop()
}

// TestE2ETLSClientCert: with --tls-client-ca, a client certificate signed
// by that CA is the --tokens-file entry named by its CommonName, with that
// entry's scopes and no bearer token; a certificate naming no entry, or
// the MESH_TOKEN, is not; removing the entry (SIGHUP) revokes it.
func TestE2ETLSClientCert(t *testing.T) {
	ca, clients := certtest.NewCA(t, "server CA"), certtest.NewCA(t, "client CA")
	tokens := writeTemp(t, "tokens.yaml", "- {name: ci, token_sha256: "+strings.Repeat("a", 64)+", scopes: [read]}\n"+
		"- {name: ops, token: ops-secret, scopes: [read, register]}\n")
	p, _, _ := tlsServe(t, ca.Issue(t, certtest.Server, "localhost", "127.0.0.1"), "--tls-client-ca", clients.CertFile, "--tokens-file", tokens)
	as := func(cn string) *http.Client {
		c := clients.Issue(t, certtest.Client, cn).TLS(t)
		return tlsClient(ca, &c)
	}
	ci := as("ci")
	resp, body := tlsGet(t, ci, p.url+"/v1/agents", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	resp, body = tlsDo(t, ci, http.MethodPost, p.url+"/v1/agents", "")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "ci holds read only: %s", body)
	p.stderr.wait(t, 5*time.Second, "the request of ci", func(l string) bool {
		return strings.Contains(l, `"route":"GET /v1/agents"`) && strings.Contains(l, `"token":"ci"`)
	})
	resp, _ = tlsGet(t, as("ops"), p.url+"/v1/agents", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for _, cn := range []string{"nobody", "mesh_token", "local"} {
		resp, _ = tlsGet(t, as(cn), p.url+"/v1/agents", "")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, cn)
	}
	resp, _ = tlsGet(t, tlsClient(ca, nil), p.url+"/v1/agents", "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no certificate, no token")
	resp, _ = tlsGet(t, tlsClient(ca, nil), p.url+"/v1/agents", "ops-secret")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "tokens still work")
	// A certificate of a CA the server does not trust, sent anyway.
	rogue := certtest.NewCA(t, "rogue CA").Issue(t, certtest.Client, "ops").TLS(t)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(p.url, "https://"), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &rogue, nil }})
	if err == nil { // TLS 1.3: the server's verdict comes with the first read
		fmt.Fprintf(conn, "GET /v1/agents HTTP/1.1\r\nHost: localhost\r\n\r\n")
		_, err = http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
	}
	assert.Error(t, err, "an untrusted client certificate fails the handshake")

	// The entry removed: the certificate no longer authenticates (on a
	// connection made before, too).
	require.NoError(t, os.WriteFile(tokens, []byte("- {name: ops, token: ops-secret, scopes: [read, register]}\n"), 0o600))
	p.signal(syscall.SIGHUP)
	p.stderr.wait(t, 10*time.Second, "the reload", func(l string) bool { return strings.Contains(l, `"msg":"reloaded"`) })
	resp, _ = tlsGet(t, ci, p.url+"/v1/agents", "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	p.stop()
}
