package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
)

// pprofConfig is --pprof-addr and --pprof-allow-public: Go's runtime
// profiles (net/http/pprof) on a listener of their own, off by default
// (docs/OPERATIONS.md#profiling).
type pprofConfig struct {
	addr        string
	allowPublic bool
}

func pprofFlags(f *flags, c *pprofConfig) {
	f.String(&c.addr, "pprof-addr", "MESH_PPROF_ADDR", "", "serve Go's runtime profiles (/debug/pprof/) on this address, without authentication; a loopback address (127.0.0.1:6060, localhost:6060, [::1]:6060) unless --pprof-allow-public; empty means off")
	f.Bool(&c.allowPublic, "pprof-allow-public", "MESH_PPROF_ALLOW_PUBLIC", false, "let --pprof-addr listen on a non-loopback address (anyone who reaches it can read the process's memory profile and stacks)")
}

// errPprofPublic is check's error for a non-loopback --pprof-addr.
var errPprofPublic = errors.New("--pprof-addr must be a loopback address (127.0.0.1, [::1] or localhost): the profiles need no token and show the process's stacks and memory; add --pprof-allow-public to listen elsewhere")

// check refuses an address that would expose the profiles beyond this
// host unless the operator asked for it: the host must be "localhost" or
// a loopback IP. An empty host (":6060") listens on every interface, and a
// host name other than localhost may resolve anywhere, so both count as
// public.
func (c pprofConfig) check() error {
	if c.addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr: %w", err)
	}
	if c.allowPublic || isLoopbackHost(host) {
		return nil
	}
	return errPprofPublic
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pprofHandler serves net/http/pprof's index and profiles under
// /debug/pprof/, and nothing else.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startPprof listens on c.addr and serves the profiles until stop is
// called; with no address it does nothing. The listener's address is
// logged as "pprof listening". The listener is checked again once bound:
// a "localhost" that resolved to a non-loopback address is refused too.
func startPprof(c pprofConfig, log *slog.Logger) (stop func(context.Context), err error) {
	if c.addr == "" {
		return func(context.Context) {}, nil
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !c.allowPublic && !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, errPprofPublic
	}
	// No ReadTimeout or WriteTimeout: /debug/pprof/profile?seconds=30
	// writes after 30 s.
	hs := &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = hs.Serve(ln) }()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func(ctx context.Context) {
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
	}, nil
}
