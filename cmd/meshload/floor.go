package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The floor of the delegation figures: what a server that does nothing
// but forward a delegation over HTTP adds on this machine. -mode floor
// measures it in the delegate mode's topology — the client and the echo
// agent in meshload's process, the hop in a process of its own — with
// net/http/httputil's ReverseProxy in the mesh's place: no registry, no
// record, no authentication, only the second HTTP hop. No mesh that
// delegates over HTTP adds less to the p50 here, or keeps more of the
// direct throughput (within the noise of a run), so a target beyond it
// measures the machine, not the mesh.

// floorProxy starts the bare reverse proxy of -mode floor in front of
// the agent at endpoint and returns the URL that reaches endpoint
// through it.
func floorProxy(ctx context.Context, endpoint string, stderr io.Writer) (via string, p *proxyProcess, err error) {
	agent, err := url.Parse(endpoint)
	if err != nil || agent.Host == "" {
		return "", nil, fmt.Errorf("-agent %q: want http://host[:port]/path", endpoint)
	}
	p, err = startProxy(ctx, agent.Scheme+"://"+agent.Host, stderr)
	if err != nil {
		return "", nil, err
	}
	return p.url + agent.RequestURI(), p, nil
}

// proxyProcess is a running meshload -mode proxy.
type proxyProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	url   string // http://127.0.0.1:PORT
}

// startProxy starts this executable as -mode proxy to upstream, its
// stderr copied to stderr, and waits for the address it listens on.
func startProxy(ctx context.Context, upstream string, stderr io.Writer) (*proxyProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the proxy: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-mode", "proxy", "-agent", upstream)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("the proxy: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("the proxy: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("the proxy: %w", err)
	}
	p := &proxyProcess{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if p.url = strings.TrimSpace(line); err != nil || !strings.HasPrefix(p.url, "http://") {
		p.close()
		return nil, fmt.Errorf("the proxy did not say where it listens (%q, %v)", line, err)
	}
	return p, nil
}

// close ends the proxy (its stdin closes) and waits for it.
func (p *proxyProcess) close() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// serveProxy runs -mode proxy: a reverse proxy to -agent (the agent's
// base URL) on a free loopback port, which it prints as a URL on stdout,
// until stdin closes or ctx ends. Its transport keeps up to 256 idle
// connections to the agent, one for each worker of any -c level, so that
// a run measures the hop and not connection set-up.
func serveProxy(ctx context.Context, cfg *config, stdin io.Reader, stdout io.Writer) (int, error) {
	upstream, err := url.Parse(cfg.agent)
	if err != nil || upstream.Scheme != "http" || upstream.Host == "" {
		return 2, fmt.Errorf("-mode proxy: -agent %q: want the agent's http://host[:port]", cfg.agent)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1, fmt.Errorf("the proxy: %w", err)
	}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if _, err := fmt.Fprintf(stdout, "http://%s\n", ln.Addr()); err != nil {
		_ = srv.Close()
		return 1, err
	}
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, stdin); close(ended) }()
	select {
	case <-ctx.Done():
	case <-ended:
	case err := <-served:
		return 1, fmt.Errorf("the proxy: %w", err)
	}
	if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return 1, err
	}
	return 0, nil
}
