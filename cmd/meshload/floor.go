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
// record, no authentication, only the second HTTP hop. Its added p50 and
// throughput ratio bound from below what any mesh that delegates over
// HTTP can reach here, so a target under it measures the machine, not
// the mesh.

// runFloor runs -mode floor: at each -c level a direct run, then the same
// requests through a bare reverse proxy (meshload -mode proxy, started
// as a child process), compared as -mode delegate compares the mesh.
func runFloor(ctx context.Context, cfg *config, emit func(*Report)) (int, error) {
	endpoint, stop, err := startAgent(cfg)
	if err != nil {
		return 1, err
	}
	defer stop()
	agent, err := url.Parse(endpoint)
	if err != nil || agent.Host == "" {
		return 2, fmt.Errorf("-agent %q: want http://host[:port]/path", endpoint)
	}
	proxy, err := startProxy(ctx, agent.Scheme+"://"+agent.Host)
	if err != nil {
		return 1, err
	}
	defer proxy.close()
	via := proxy.url + agent.RequestURI()
	t := &httpTarget{timeout: cfg.timeout}
	for range cfg.repeat {
		for _, c := range cfg.concurrency {
			if ctx.Err() != nil {
				return 0, interrupted(ctx)
			}
			ct := *t
			ct.concurrency = c
			p := plan{concurrency: c, count: cfg.n, duration: cfg.duration, warmup: cfg.warmup}
			direct := runLoad(ctx, p, ct.directOp(endpoint, cfg.task))
			direct.Mode, direct.Target = "direct", "POST "+endpoint
			emit(direct)
			r := runLoad(ctx, p, ct.directOp(via, cfg.task))
			r.Mode, r.Target = "floor", fmt.Sprintf("POST %s (a bare reverse proxy to %s)", via, endpoint)
			compare(r, direct)
			emit(r)
		}
	}
	return 0, interrupted(ctx)
}

// proxyProcess is a running meshload -mode proxy.
type proxyProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	url   string // http://127.0.0.1:PORT
}

// startProxy starts this executable as -mode proxy to upstream and waits
// for the address it listens on.
func startProxy(ctx context.Context, upstream string) (*proxyProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the proxy: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-mode", "proxy", "-agent", upstream)
	cmd.Stderr = os.Stderr
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
// until stdin closes or ctx ends. Its transport keeps as many idle
// connections to the agent as a mesh does, so that a run measures the
// hop and not connection set-up.
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
