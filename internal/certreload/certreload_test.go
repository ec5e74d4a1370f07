package certreload_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/certreload"
	"github.com/agentmesh/agentmesh/internal/harness/certtest"
)

// files copies p to a cert and a key file of a directory of their own, the
// files a Reloader watches.
func files(t *testing.T, p *certtest.Pair) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	p.CopyTo(t, certFile, keyFile)
	return certFile, keyFile
}

func serving(t *testing.T, r *certreload.Reloader) *x509.Certificate {
	t.Helper()
	c, err := r.GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	require.NotNil(t, c.Leaf)
	return c.Leaf
}

// TestNew: New loads a good pair, and refuses a missing file, a key of
// another certificate and a file that is not PEM, naming the file.
func TestNew(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	a, b := ca.Issue(t, certtest.Server, "a"), ca.Issue(t, certtest.Server, "b")
	r, err := certreload.New(a.CertFile, a.KeyFile)
	require.NoError(t, err)
	assert.Equal(t, "a", serving(t, r).Subject.CommonName)
	assert.NoError(t, r.LastError())

	_, err = certreload.New(a.CertFile, filepath.Join(t.TempDir(), "missing.key"))
	assert.ErrorContains(t, err, "missing.key")
	assert.ErrorIs(t, err, os.ErrNotExist)

	_, err = certreload.New(a.CertFile, b.KeyFile)
	assert.ErrorContains(t, err, "does not match")
	assert.ErrorContains(t, err, a.CertFile)

	junk := filepath.Join(t.TempDir(), "junk.crt")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	_, err = certreload.New(junk, a.KeyFile)
	assert.ErrorContains(t, err, junk)

	_, err = certreload.New("", a.KeyFile)
	assert.Error(t, err)
}

// TestReload: Reload swaps in the files' new pair; a bad pair (a key of
// another certificate, a missing file) keeps the previous one in service
// and is the LastError until a reload succeeds.
func TestReload(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	a, b, c := ca.Issue(t, certtest.Server, "a"), ca.Issue(t, certtest.Server, "b"), ca.Issue(t, certtest.Server, "c")
	certFile, keyFile := files(t, a)
	r, err := certreload.New(certFile, keyFile)
	require.NoError(t, err)

	b.CopyTo(t, certFile, keyFile)
	leaf, err := r.Reload()
	require.NoError(t, err)
	assert.Equal(t, "b", leaf.Subject.CommonName)
	assert.Equal(t, "b", serving(t, r).Subject.CommonName)

	// Half a rotation: c's certificate with b's key.
	require.NoError(t, os.WriteFile(certFile, c.CertPEM, 0o600))
	_, err = r.Reload()
	require.ErrorContains(t, err, "does not match")
	assert.Equal(t, "b", serving(t, r).Subject.CommonName, "a failed reload keeps the previous pair")
	assert.Equal(t, err, r.LastError())

	require.NoError(t, os.Remove(keyFile))
	_, err = r.Reload()
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, "b", serving(t, r).Subject.CommonName)

	c.CopyTo(t, certFile, keyFile)
	_, err = r.Reload()
	require.NoError(t, err)
	assert.Equal(t, "c", serving(t, r).Subject.CommonName)
	assert.NoError(t, r.LastError())
}

// watch runs r.Watch for the test, recording what it reports.
type watch struct {
	mu      sync.Mutex
	reports []string // the new leaf's CommonName, or "error: ..."
}

func startWatch(t *testing.T, r *certreload.Reloader) *watch {
	w := &watch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Watch(ctx, 10*time.Millisecond, func(leaf *x509.Certificate, err error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if err != nil {
				w.reports = append(w.reports, "error: "+err.Error())
				return
			}
			w.reports = append(w.reports, leaf.Subject.CommonName)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *watch) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.reports...)
}

// TestWatch: Watch reloads a pair whose files changed (even to the same
// size), reports a bad pair once and keeps the previous one, and reloads
// again when the files are fixed; unchanged files are not reloaded.
func TestWatch(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	a, b, c := ca.Issue(t, certtest.Server, "a"), ca.Issue(t, certtest.Server, "b"), ca.Issue(t, certtest.Server, "c")
	certFile, keyFile := files(t, a)
	r, err := certreload.New(certFile, keyFile)
	require.NoError(t, err)
	w := startWatch(t, r)

	time.Sleep(50 * time.Millisecond)
	assert.Empty(t, w.list(), "unchanged files are not reloaded")

	b.CopyTo(t, certFile, keyFile)
	require.Eventually(t, func() bool { return serving(t, r).Subject.CommonName == "b" }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"b"}, w.list())

	// A bad pair: reported once, the previous pair stays.
	require.NoError(t, os.WriteFile(certFile, c.CertPEM, 0o600))
	require.Eventually(t, func() bool { return len(w.list()) == 2 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Len(t, w.list(), 2, "an unchanged bad pair is reported once")
	assert.Contains(t, w.list()[1], "error: ")
	assert.Equal(t, "b", serving(t, r).Subject.CommonName)
	assert.Error(t, r.LastError())

	// A missing file: reported once too.
	require.NoError(t, os.Remove(keyFile))
	require.Eventually(t, func() bool { return len(w.list()) == 3 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Len(t, w.list(), 3)
	assert.Equal(t, "b", serving(t, r).Subject.CommonName)

	require.NoError(t, os.WriteFile(keyFile, c.KeyPEM, 0o600))
	require.Eventually(t, func() bool { return serving(t, r).Subject.CommonName == "c" }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, "c", w.list()[3])
	assert.NoError(t, r.LastError())
}

// TestHandshakes: a TLS server on GetCertificate serves the new pair on new
// connections after a reload, while a connection made before keeps
// working with the old one.
func TestHandshakes(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	a, b := ca.Issue(t, certtest.Server, "a", "127.0.0.1"), ca.Issue(t, certtest.Server, "b", "127.0.0.1")
	certFile, keyFile := files(t, a)
	r, err := certreload.New(certFile, keyFile)
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo
				defer c.Close()
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	echo := func(c net.Conn) {
		_, err := c.Write([]byte("ping"))
		require.NoError(t, err)
		buf := make([]byte, 4)
		_, err = c.Read(buf)
		require.NoError(t, err)
		require.Equal(t, "ping", string(buf))
	}
	old := dial()
	echo(old)
	assert.Equal(t, "a", old.ConnectionState().PeerCertificates[0].Subject.CommonName)

	b.CopyTo(t, certFile, keyFile)
	_, err = r.Reload()
	require.NoError(t, err)
	fresh := dial()
	echo(fresh)
	assert.Equal(t, "b", fresh.ConnectionState().PeerCertificates[0].Subject.CommonName)
	echo(old)
}
