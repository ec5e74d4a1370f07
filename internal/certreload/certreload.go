// Package certreload serves a TLS certificate pair read from two PEM
// files, and swaps in a new pair when the files change or on demand,
// without dropping connections: [Reloader.GetCertificate] is meant for
// [tls.Config.GetCertificate], so each new handshake takes the pair in
// service at that moment, and connections already established keep the
// one they started with.
//
// A reload that fails (a missing or unreadable file, bad PEM, a key that
// does not match the certificate) keeps the previous pair in service and
// is reported by [Reloader.Reload] and [Reloader.LastError].
//
//	r, err := certreload.New("tls.crt", "tls.key")
//	...
//	go r.Watch(ctx, certreload.DefaultInterval, func(leaf *x509.Certificate, err error) { ... })
//	srv.TLSConfig = &tls.Config{GetCertificate: r.GetCertificate}
package certreload

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is a reasonable interval for [Reloader.Watch].
const DefaultInterval = 3 * time.Second

// maxFileBytes caps what is read of each file: PEM pairs are a few KiB,
// a chain a few more.
const maxFileBytes = 1 << 20

// Reloader holds the certificate pair of two files. Build it with [New];
// the zero Reloader is not usable. A Reloader is safe for concurrent use:
// reloads are serialised, and readers never wait for one.
type Reloader struct {
	certFile, keyFile string

	cert atomic.Pointer[tls.Certificate]

	mu      sync.Mutex
	digest  [2][sha256.Size]byte // of the files' contents last tried
	lastErr error                // of the last reload
}

// New loads the pair of certFile (PEM, the leaf first, then any
// intermediates) and keyFile (its PEM private key). A pair that does not
// load is an error naming the file.
func New(certFile, keyFile string) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("certreload: both a certificate file and a key file are needed")
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate returns the pair in service, for
// [tls.Config.GetCertificate].
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// Certificate returns the pair in service; its Leaf is parsed.
func (r *Reloader) Certificate() *tls.Certificate {
	return r.cert.Load()
}

// Reload reads both files again and puts the pair in service, returning
// its leaf certificate. On error the previous pair stays in service.
func (r *Reloader) Reload() (*x509.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	certPEM, keyPEM, err := r.read()
	if err != nil {
		r.lastErr = err
		return nil, err
	}
	return r.load(certPEM, keyPEM)
}

// LastError returns the error of the last reload ([Reloader.Reload] or
// one of [Reloader.Watch]), nil when it succeeded.
func (r *Reloader) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Watch reads the files every interval (≤ 0 means [DefaultInterval]) until
// ctx is done, and reloads the pair when the content of either changed
// since the last attempt. It calls onReload (when not nil) after each such
// reload with the new leaf, or the error that kept the previous pair; a
// file that cannot be read counts as a change, reported once until it
// reads again. Watch blocks: run it on a goroutine of your own.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration, onReload func(leaf *x509.Certificate, err error)) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		leaf, err, changed := r.reloadIfChanged()
		if changed && onReload != nil {
			onReload(leaf, err)
		}
	}
}

// reloadIfChanged reloads the pair when a file's content differs from the
// last attempt's; changed reports whether it tried.
func (r *Reloader) reloadIfChanged() (leaf *x509.Certificate, err error, changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	certPEM, keyPEM, err := r.read()
	if err != nil {
		var prev *unreadableError
		if errors.As(r.lastErr, &prev) {
			return nil, err, false // still unreadable: reported already
		}
		r.lastErr = err
		r.digest = [2][sha256.Size]byte{}
		return nil, err, true
	}
	if r.digest == [2][sha256.Size]byte{sha256.Sum256(certPEM), sha256.Sum256(keyPEM)} {
		return nil, nil, false
	}
	leaf, err = r.load(certPEM, keyPEM)
	return leaf, err, true
}

// unreadableError is the error of a file that could not be read.
type unreadableError struct{ err error }

func (e *unreadableError) Error() string { return "certreload: " + e.err.Error() }
func (e *unreadableError) Unwrap() error { return e.err }

// read reads both files, whose contents may be secret: an error never
// quotes them.
func (r *Reloader) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = readFile(r.certFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = readFile(r.keyFile); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &unreadableError{err} // names the path
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, &unreadableError{fmt.Errorf("read %s: %w", path, err)}
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("certreload: %s is larger than %d bytes", path, maxFileBytes)
	}
	return data, nil
}

// load parses the pair and puts it in service; r.mu is held.
func (r *Reloader) load(certPEM, keyPEM []byte) (*x509.Certificate, error) {
	r.digest = [2][sha256.Size]byte{sha256.Sum256(certPEM), sha256.Sum256(keyPEM)}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err == nil && cert.Leaf == nil {
		cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0])
	}
	if err != nil {
		// tls.X509KeyPair's errors name the PEM block types, never key
		// material.
		err = fmt.Errorf("certreload: certificate %s with key %s: %w", r.certFile, r.keyFile, err)
		r.lastErr = err
		return nil, err
	}
	r.cert.Store(&cert)
	r.lastErr = nil
	return cert.Leaf, nil
}
