package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/certtest"
	"github.com/agentmesh/agentmesh/internal/harness/etcdtest"
)

// TestEtcdAuthOptions: the etcd flags build the store's TLS and
// credentials; half a setting, files that do not load, and http://
// endpoints with TLS asked for are errors naming the flag.
func TestEtcdAuthOptions(t *testing.T) {
	ca := certtest.NewCA(t, "etcd CA")
	client, other := ca.Issue(t, certtest.Client, "mesh"), ca.Issue(t, certtest.Client, "other")
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not PEM"), 0o600))
	eps := []string{"https://10.0.0.1:2379", "10.0.0.2:2379"}

	o, err := etcdAuthConfig{}.options(eps)
	require.NoError(t, err)
	assert.Nil(t, o.TLS)
	assert.Empty(t, o.Username)

	o, err = etcdAuthConfig{caFile: ca.CertFile, certFile: client.CertFile, keyFile: client.KeyFile, username: "mesh", password: "pw"}.options(eps)
	require.NoError(t, err)
	require.NotNil(t, o.TLS)
	assert.Equal(t, eps, o.Endpoints)
	assert.Equal(t, uint16(tls.VersionTLS12), o.TLS.MinVersion)
	assert.NotNil(t, o.TLS.RootCAs)
	require.Len(t, o.TLS.Certificates, 1)
	assert.Equal(t, client.Cert.Raw, o.TLS.Certificates[0].Certificate[0])
	assert.Equal(t, "mesh", o.Username)
	assert.Equal(t, "pw", o.Password)

	o, err = etcdAuthConfig{caFile: ca.CertFile}.options(eps)
	require.NoError(t, err)
	assert.Empty(t, o.TLS.Certificates, "TLS with the servers' CA only")

	for _, tc := range []struct {
		name string
		cfg  etcdAuthConfig
		eps  []string
		want string
	}{
		{"username without password", etcdAuthConfig{username: "mesh"}, eps, "--etcd-username needs the password in MESH_ETCD_PASSWORD"},
		{"password without username", etcdAuthConfig{password: "pw"}, eps, "MESH_ETCD_PASSWORD needs --etcd-username"},
		{"cert without key", etcdAuthConfig{certFile: client.CertFile}, eps, "--etcd-cert needs --etcd-key"},
		{"key without cert", etcdAuthConfig{keyFile: client.KeyFile}, eps, "--etcd-key needs --etcd-cert"},
		{"http endpoint with TLS", etcdAuthConfig{caFile: ca.CertFile}, []string{"https://a:2379", "http://b:2379"}, "--etcd-endpoints http://b:2379: with --etcd-ca"},
		{"missing CA", etcdAuthConfig{caFile: ca.CertFile + ".missing"}, eps, "--etcd-ca: open"},
		{"CA not PEM", etcdAuthConfig{caFile: notPEM}, eps, "--etcd-ca " + notPEM + ": no PEM certificate"},
		{"mismatched pair", etcdAuthConfig{certFile: client.CertFile, keyFile: other.KeyFile}, eps, "--etcd-cert " + client.CertFile + " with --etcd-key " + other.KeyFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.options(tc.eps)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestOpenEtcdTLSAuth: openEtcd reaches an etcd that serves TLS, requires
// client certificates and has authentication on, with the CA, the client
// certificate and the user of the flags; without the certificate, or with
// a wrong password, it fails.
func TestOpenEtcdTLSAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd server")
	}
	ca := certtest.NewCA(t, "etcd CA")
	server := ca.Issue(t, certtest.Server, "localhost", "127.0.0.1")
	client := ca.Issue(t, certtest.Client, "mesh")
	clientCert := client.TLS(t)
	srv, err := etcdtest.StartWith(t.TempDir(), &etcdtest.Options{
		CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: ca.CertFile, RootPassword: "s3cret",
		ClientTLS: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}},
	})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	require.True(t, strings.HasPrefix(srv.Endpoints[0], "https://"), srv.Endpoints[0])

	cfg := meshConfig{
		etcdEndpoints: strings.Join(srv.Endpoints, ","),
		etcd:          etcdAuthConfig{caFile: ca.CertFile, certFile: client.CertFile, keyFile: client.KeyFile, username: "root", password: "s3cret"},
		log:           slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := openEtcd(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	wrong := cfg
	wrong.etcd.password = "wrong"
	_, err = openEtcd(ctx, wrong)
	assert.Error(t, err, "a wrong password")

	noCert := cfg
	noCert.etcd.certFile, noCert.etcd.keyFile = "", ""
	_, err = openEtcd(ctx, noCert)
	assert.Error(t, err, "no client certificate")

	// The binary, with the flags and the password in its variable.
	p := startServe(t, serveSpec{token: "t", args: []string{"--store", "etcd", "--etcd-endpoints", cfg.etcdEndpoints,
		"--etcd-ca", ca.CertFile, "--etcd-cert", client.CertFile, "--etcd-key", client.KeyFile, "--etcd-username", "root"},
		env: []string{"MESH_ETCD_PASSWORD=s3cret"}})
	p.stderr.wait(t, time.Second, "the etcd store", func(l string) bool {
		return strings.Contains(l, `"msg":"store opened"`) && strings.Contains(l, `"store":"etcd"`)
	})
	r := p.client().do("POST", "/v1/agents", agentJSON("tls-etcd-agent", "https://agent.example.com/task", "x"))
	require.Equal(t, 201, r.status, "%s", r)
	p.stop()
}
