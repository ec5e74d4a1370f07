// Package etcdtest runs a real etcd server inside a test process, for the
// tests of store/etcdstore and of the binary's etcd mode. It embeds etcd
// (go.etcd.io/etcd/server/v3/embed): one single-member cluster on random
// loopback ports, with its data in a directory the caller owns, logging
// nothing.
//
// A test package starts one server in TestMain and gives every test a key
// prefix of its own ([Prefix]), so tests share the server without seeing
// each other's keys:
//
//	func TestMain(m *testing.M) {
//		os.Exit(etcdtest.Main(m, &server))
//	}
//
// The server is tuned for tests: short raft ticks (so leases as short as
// one second are granted as asked), no fsync, and requests up to
// [MaxRequestBytes] (large enough for a 4 MiB delegation result).
package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// MaxRequestBytes is the largest request the server accepts: the same
// setting a production etcd needs for agentmesh (docs/DEPLOYMENT.md).
const MaxRequestBytes = 10 << 20

// Server is a running embedded etcd.
type Server struct {
	// Endpoints are the client URLs of the server ("http://127.0.0.1:port").
	Endpoints []string

	e *embed.Etcd
}

// Start starts an etcd server with its data in dir (which must exist and
// should be empty) and waits until it serves, up to 30 s.
func Start(dir string) (*Server, error) {
	return StartWith(dir, nil)
}

// Options configures [StartWith]. A nil *Options, like the zero value, is
// the plain server of [Start].
type Options struct {
	// CertFile and KeyFile, when set, make the client endpoints https://,
	// serving this PEM pair. Empty means plain http://.
	CertFile, KeyFile string

	// ClientCAFile, with CertFile, makes the server require client
	// certificates signed by the PEM CAs of the file. Empty means none.
	ClientCAFile string

	// RootPassword, when set, turns etcd's authentication on, with the
	// user "root" (role root) holding this password. Empty means no
	// authentication.
	RootPassword string

	// ClientTLS is the TLS configuration of the client StartWith uses to
	// turn authentication on, with CertFile and RootPassword: roots
	// trusting CertFile, and a client certificate when ClientCAFile asks
	// for one.
	ClientTLS *tls.Config
}

// StartWith is [Start] with the TLS and authentication of o.
func StartWith(dir string, o *Options) (*Server, error) {
	if o == nil {
		o = &Options{}
	}
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = dir
	loop := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	client := loop
	if o.CertFile != "" {
		client.Scheme = "https"
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: o.CertFile, KeyFile: o.KeyFile,
			TrustedCAFile: o.ClientCAFile, ClientCertAuth: o.ClientCAFile != ""}
	}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{loop}
	cfg.AdvertisePeerUrls = []url.URL{loop}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Election 500 ms gives a minimum lease TTL of 1 s (etcd grants
	// max(asked, ceil(1.5 × election timeout))).
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.MaxRequestBytes = MaxRequestBytes
	cfg.UnsafeNoFsync = true
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd failed while starting: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("etcdtest: etcd did not become ready within 30s")
	}
	s := &Server{e: e}
	for _, l := range e.Clients {
		s.Endpoints = append(s.Endpoints, client.Scheme+"://"+l.Addr().String())
	}
	if len(s.Endpoints) == 0 {
		e.Close()
		return nil, errors.New("etcdtest: etcd has no client listener")
	}
	if o.RootPassword != "" {
		if err := enableAuth(s.Endpoints, o.ClientTLS, o.RootPassword); err != nil {
			e.Close()
			return nil, fmt.Errorf("etcdtest: enable authentication: %w", err)
		}
	}
	return s, nil
}

// enableAuth adds the root user with password and turns authentication
// on, over a client with TLS configuration c (nil for plain).
func enableAuth(endpoints []string, c *tls.Config, password string) error {
	cc := clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop(), DialTimeout: 10 * time.Second, TLS: c}
	cli, err := clientv3.New(cc)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.RoleAdd(ctx, "root"); err != nil {
		return err
	}
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		return err
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return err
	}
	_, err = cli.AuthEnable(ctx)
	return err
}

// Close stops the server and waits for it.
func (s *Server) Close() {
	if s != nil && s.e != nil {
		s.e.Close()
	}
}

// Main starts a server for a test package, stores it in *srv, runs the
// tests and stops the server, returning the exit code for os.Exit. A
// server that does not start fails the run with exit code 1.
func Main(m *testing.M, srv **Server) int {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	*srv = s
	return m.Run()
}

var (
	prefixes   atomic.Uint64
	unsafeChar = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// Prefix returns a key prefix of its own for t, a test or anything named
// ("/test/<name>-<n>/"), so that tests sharing one server never see each
// other's keys.
func Prefix(t interface{ Name() string }) string {
	return fmt.Sprintf("/test/%s-%d/", unsafeChar.ReplaceAllString(t.Name(), "_"), prefixes.Add(1))
}
