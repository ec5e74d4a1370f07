// Package certtest makes throwaway certificate authorities and the
// certificates they issue, as PEM files in a test's temporary directory,
// for the tests of TLS servers and clients.
//
//	ca := certtest.NewCA(t, "test CA")
//	srv := ca.Issue(t, certtest.Server, "localhost", "127.0.0.1")
//	// srv.CertFile, srv.KeyFile; ca.CertFile for the clients' roots
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	// Cert is the CA's certificate; CertFile holds it as PEM.
	Cert     *x509.Certificate
	CertFile string

	key *ecdsa.PrivateKey
}

// Pair is an issued certificate and its key, as PEM files.
type Pair struct {
	// Cert is the certificate; CertFile and KeyFile hold it and its key
	// as PEM, CertPEM and KeyPEM are their contents.
	Cert              *x509.Certificate
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
}

// TLS returns the pair as a tls.Certificate.
func (p *Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatalf("certtest: %v", err)
	}
	return c
}

// Usage is what an issued certificate is for.
type Usage int

const (
	Server Usage = iota // server authentication (TLS servers)
	Client              // client authentication (client certificates)
)

// NewCA makes a CA whose subject CommonName is cn, its certificate in a
// file of t.TempDir().
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := newTemplate(t, cn)
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("certtest: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	ca := &CA{Cert: cert, CertFile: filepath.Join(dir, "ca.crt"), key: key}
	write(t, ca.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// newTemplate returns a certificate template for the subject CommonName cn,
// with a fresh serial number, valid from an hour ago for a day.
func newTemplate(t testing.TB, cn string) *x509.Certificate {
	t.Helper()
	return &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

// Pool returns a cert pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a certificate signed by ca for usage, whose subject
// CommonName is cn; a Server certificate also names cn and hosts (names
// or IP addresses) as its subject alternative names. Its files are in a
// new directory of t.TempDir().
func (ca *CA) Issue(t testing.TB, usage Usage, cn string, hosts ...string) *Pair {
	t.Helper()
	key := newKey(t)
	tmpl := newTemplate(t, cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	switch usage {
	case Server:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range append([]string{cn}, hosts...) {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case Client:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("certtest: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("certtest: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	p := &Pair{
		Cert:     cert,
		CertFile: filepath.Join(dir, "tls.crt"),
		KeyFile:  filepath.Join(dir, "tls.key"),
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	write(t, p.CertFile, p.CertPEM)
	write(t, p.KeyFile, p.KeyPEM)
	return p
}

// CopyTo writes the pair's PEM files to certFile and keyFile, replacing
// them, as a certificate rotation would.
func (p *Pair) CopyTo(t testing.TB, certFile, keyFile string) {
	t.Helper()
	write(t, certFile, p.CertPEM)
	write(t, keyFile, p.KeyPEM)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("certtest: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("certtest: %v", err)
	}
	return n
}

// WriteFile replaces path with data atomically (a rename), as a half
// done rotation would leave it.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	write(t, path, data)
}

// write replaces path atomically (a rename), so a reader never sees half
// a file.
func write(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatalf("certtest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("certtest: %v", err)
	}
}
