package agentkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/registry"
)

// Run is the whole life of an agent process. It listens on addr (host:port;
// port 0 picks one), serves the agent on every path, registers rec with
// mesh (see [Agent.Register]) and keeps it alive, until ctx ends. Then it
// unregisters the agent, stops taking tasks, and waits up to
// Options.ShutdownTimeout for the tasks in flight (sync and async) to
// finish. It returns nil after a clean shutdown, also when ctx ends
// while the agent is being registered, else what went wrong: a listener
// or registration that failed at the start, the server stopping on its
// own, or an unfinished shutdown.
//
// An empty rec.Endpoint means http://<the listener's address>/task, with
// 127.0.0.1 for an unspecified host (":9201"): set it when the mesh
// reaches the agent by another name. A nil mesh serves the agent without
// registering it (it is registered some other way, e.g. from a YAML file).
//
// Run may be called once; the agent cannot serve again after it.
func (a *Agent) Run(ctx context.Context, addr string, mesh *client.Client, rec registry.Agent) error {
	if a == nil || a.h == nil {
		return errors.New("agentkit: Run: agent not initialised: use agentkit.New")
	}
	if a.isClosed() {
		return ErrShutdown
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("agentkit: %w", err)
	}
	if rec.Endpoint == "" {
		rec.Endpoint = endpointOf(ln.Addr())
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var reg *Registration
	var runErr error
	interrupted := false // ctx ended while the registration was on its way
	if mesh != nil {
		reg, runErr = a.Register(ctx, mesh, rec)
		interrupted = runErr != nil && ctx.Err() != nil
		if interrupted {
			runErr = nil // a shutdown, not a failure
		}
	}
	if runErr == nil && !interrupted {
		select {
		case <-ctx.Done():
		case err := <-served:
			runErr = fmt.Errorf("agentkit: serve: %w", err)
		}
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.shutdownTimeout)
	defer cancel()
	errs := []error{runErr, reg.Close(sctx)}
	if interrupted {
		// The mesh may have stored the agent before the call was
		// abandoned: take it back, or it would stay until its TTL.
		errs = append(errs, unregister(sctx, mesh, a.log, rec.Name))
	}
	if err := srv.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("agentkit: shutdown: tasks still running: %w", err))
	}
	errs = append(errs, a.Shutdown(sctx))
	return errors.Join(errs...)
}

// endpointOf is the endpoint of an agent listening on addr.
func endpointOf(addr net.Addr) string {
	host, port := "127.0.0.1", ""
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
		if !tcp.IP.IsUnspecified() {
			host = tcp.IP.String()
		}
	} else if h, p, err := net.SplitHostPort(addr.String()); err == nil {
		host, port = h, p
	}
	return "http://" + net.JoinHostPort(host, port) + "/task"
}
