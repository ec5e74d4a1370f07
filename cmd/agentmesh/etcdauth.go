package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentmesh/agentmesh/store/etcdstore"
)

// etcdAuthConfig is how the etcd client of --store etcd authenticates:
// TLS (the servers' CA, a client certificate) and an etcd user.
type etcdAuthConfig struct {
	caFile   string // --etcd-ca
	certFile string // --etcd-cert
	keyFile  string // --etcd-key
	username string // --etcd-username
	password string // MESH_ETCD_PASSWORD only, never a flag
}

// tls reports whether the flags ask for TLS to etcd.
func (c etcdAuthConfig) tls() bool { return c.caFile != "" || c.certFile != "" || c.keyFile != "" }

// options returns the store options for endpoints: the TLS configuration
// and credentials c describes. Half a setting, files that do not load and
// plain http:// endpoints with TLS asked for are errors naming the flag.
func (c etcdAuthConfig) options(endpoints []string) (*etcdstore.Options, error) {
	o := &etcdstore.Options{Endpoints: endpoints, Username: c.username, Password: c.password}
	switch {
	case c.username != "" && c.password == "":
		return nil, errors.New("--etcd-username needs the password in MESH_ETCD_PASSWORD")
	case c.username == "" && c.password != "":
		return nil, errors.New("MESH_ETCD_PASSWORD needs --etcd-username (MESH_ETCD_USERNAME)")
	case c.certFile != "" && c.keyFile == "":
		return nil, errors.New("--etcd-cert needs --etcd-key (MESH_ETCD_KEY)")
	case c.certFile == "" && c.keyFile != "":
		return nil, errors.New("--etcd-key needs --etcd-cert (MESH_ETCD_CERT)")
	}
	if !c.tls() {
		return o, nil
	}
	// The etcd client speaks plain gRPC to an http:// endpoint whatever
	// its TLS configuration: refuse rather than drop the TLS asked for.
	for _, ep := range endpoints {
		if strings.HasPrefix(ep, "http://") || strings.HasPrefix(ep, "unix:") {
			return nil, fmt.Errorf("--etcd-endpoints %s: with --etcd-ca, --etcd-cert or --etcd-key, use https:// endpoints (or host:port)", ep)
		}
	}
	o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	if c.caFile != "" {
		data, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--etcd-ca %s: no PEM certificate in the file", c.caFile)
		}
		o.TLS.RootCAs = pool
	}
	if c.certFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert %s with --etcd-key %s: %w", c.certFile, c.keyFile, err)
		}
		o.TLS.Certificates = []tls.Certificate{cert}
	}
	return o, nil
}

// allHTTPS reports whether every endpoint is an https:// URL (which the
// etcd client dials with TLS even without a TLS configuration).
func allHTTPS(endpoints []string) bool {
	for _, ep := range endpoints {
		if !strings.HasPrefix(ep, "https://") {
			return false
		}
	}
	return len(endpoints) > 0
}
