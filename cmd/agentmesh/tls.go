package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/certreload"
)

// tlsConfig is the TLS setting of `serve`: with a certificate and its key,
// the API port serves HTTPS only.
type tlsConfig struct {
	certFile string // --tls-cert
	keyFile  string // --tls-key
	clientCA string // --tls-client-ca
}

// tlsFlags declares the TLS flags of `serve`.
func tlsFlags(f *flags, cfg *tlsConfig) {
	f.String(&cfg.certFile, "tls-cert", "MESH_TLS_CERT", "", "PEM certificate (then any intermediates) to serve HTTPS with, with --tls-key; reloaded on change and SIGHUP")
	f.String(&cfg.keyFile, "tls-key", "MESH_TLS_KEY", "", "PEM private key of --tls-cert")
	f.String(&cfg.clientCA, "tls-client-ca", "MESH_TLS_CLIENT_CA", "", "PEM CA certificates verifying client certificates (with --tls-cert): a client presenting one it signed is the --tokens-file entry named by its subject CommonName, with no token")
}

// enabled reports whether serve runs HTTPS.
func (c tlsConfig) enabled() bool { return c.certFile != "" || c.keyFile != "" }

// check refuses half a TLS setting.
func (c tlsConfig) check() error {
	switch {
	case c.certFile != "" && c.keyFile == "":
		return errors.New("--tls-cert needs --tls-key (MESH_TLS_KEY)")
	case c.certFile == "" && c.keyFile != "":
		return errors.New("--tls-key needs --tls-cert (MESH_TLS_CERT)")
	case c.clientCA != "" && c.certFile == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are only asked for over HTTPS")
	}
	return nil
}

// tlsInterval is how often the certificate files are checked for a change.
const tlsInterval = certreload.DefaultInterval

// hstsValue is the Strict-Transport-Security of every HTTPS response: two
// years, the preload lists' minimum.
const hstsValue = "max-age=63072000"

// serverTLS is the HTTPS of `serve`: the certificate pair in service and
// the configuration handshakes use.
type serverTLS struct {
	certs  *certreload.Reloader
	config *tls.Config
}

// newServerTLS loads the certificate pair and the client CAs of cfg.
func newServerTLS(cfg tlsConfig) (*serverTLS, error) {
	certs, err := certreload.New(cfg.certFile, cfg.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   tls12Suites,
		GetCertificate: certs.GetCertificate,
		// HTTP/2 first; net/http adds both when missing, the list says so.
		NextProtos: []string{"h2", "http/1.1"},
	}
	if cfg.clientCA != "" {
		pool, err := readCAs(cfg.clientCA)
		if err != nil {
			return nil, err
		}
		c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return &serverTLS{certs: certs, config: c}, nil
}

// tls12Suites are the TLS 1.2 cipher suites served: ECDHE key exchange
// with an AEAD only (no RSA key exchange, no CBC). TLS 1.3 suites are not
// configurable in Go, and its defaults are all AEADs.
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, // required by HTTP/2
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// readCAs reads a PEM bundle of CA certificates into a pool; a file with
// none is an error.
func readCAs(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in the file", path)
	}
	return pool, nil
}

// certIdentity is httpserver.Options.CertIdentity: with --tls-client-ca,
// a verified client certificate is the --tokens-file entry named by its
// subject CommonName. The MESH_TOKEN and the local socket's token are
// never a certificate's.
func (c tlsConfig) certIdentity() func(*x509.Certificate) (string, bool) {
	if c.clientCA == "" {
		return nil
	}
	return func(cert *x509.Certificate) (string, bool) {
		switch cn := cert.Subject.CommonName; cn {
		case "", httpserver.MeshTokenName, localTokenName:
			return "", false
		default:
			return cn, true
		}
	}
}

// certReport describes a certificate pair put in service, in the report
// of a reload.
type certReport struct {
	Subject  string    `json:"subject"`
	NotAfter time.Time `json:"notAfter"`
}

// reload reads the certificate pair again (SIGHUP, POST
// /v1/admin/reload); on error the previous pair stays in service.
func (s *serverTLS) reload() (certReport, error) {
	leaf, err := s.certs.Reload()
	if err != nil {
		return certReport{}, err
	}
	return certReport{Subject: leaf.Subject.String(), NotAfter: leaf.NotAfter}, nil
}

// lastError is the error of the last reload of the pair, nil when it
// succeeded.
func (s *serverTLS) lastError() error {
	if s == nil {
		return nil
	}
	return s.certs.LastError()
}

// watch reloads the pair when its files change, until ctx is done,
// reporting each reload as the agent directory's are.
func (s *serverTLS) watch(ctx context.Context, obs *observer, log *slog.Logger) {
	s.certs.Watch(ctx, tlsInterval, func(leaf *x509.Certificate, err error) {
		obs.reloaded("file", err)
		if err != nil {
			log.Error("TLS certificate reload failed; the previous certificate stays in service", "err", err)
			return
		}
		log.Info("TLS certificate reloaded", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	})
}

// hsts sets Strict-Transport-Security on every response to a request that
// came over TLS.
func hsts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", hstsValue)
		}
		next.ServeHTTP(w, r)
	})
}
