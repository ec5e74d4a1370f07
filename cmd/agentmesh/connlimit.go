package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh/httpserver"
)

// connConfig is how `serve` bounds its connections and what they may hold.
type connConfig struct {
	max          int           // --max-connections
	perClient    int           // --max-connections-per-client
	readTimeout  time.Duration // --read-timeout
	metricsToken string        // --metrics-token
}

// readHeaderTimeout is how long a connection may take to send a request's
// headers, on every listener of serve.
const readHeaderTimeout = 10 * time.Second

// metricsMaxConnections caps the connections of the --metrics-addr
// listener: a scraper needs one or two.
const metricsMaxConnections = 64

// fdReserve is the file descriptors kept out of the default connection
// cap for everything else serve opens (the store, agents, the log).
const fdReserve = 512

// connFlags declares the connection flags of `serve`.
func connFlags(f *flags, cfg *connConfig) {
	f.Int(&cfg.max, "max-connections", "MESH_MAX_CONNECTIONS", defaultMaxConnections(),
		"most client connections held open at once; at the cap a new one evicts the one waiting longest for its request's headers (else the one serving a request longest); 0 means no limit (the default is lower when the open-files limit is)")
	f.Int(&cfg.perClient, "max-connections-per-client", "MESH_MAX_CONNECTIONS_PER_CLIENT", httpserver.DefaultMaxConnectionsPerClient,
		"most connections of one client address (the TCP peer; IPv6 by /64; --trusted-proxies exempt); more are closed at accept; 0 means no limit")
	f.Duration(&cfg.readTimeout, "read-timeout", "MESH_READ_TIMEOUT", 30*time.Second,
		"longest time to read a whole request, body included, from its start (headers alone: 10s); 0 means none")
	f.String(&cfg.metricsToken, "metrics-token", "MESH_METRICS_TOKEN", "",
		"bearer token GET /metrics requires (on the main port and --metrics-addr); an admin API token is also accepted; empty means /metrics is open (prefer the env var: flags show in ps)")
}

// check refuses negative caps and timeouts.
func (c connConfig) check() error {
	switch {
	case c.max < 0:
		return fmt.Errorf("--max-connections must be 0 (no limit) or more, got %d", c.max)
	case c.perClient < 0:
		return fmt.Errorf("--max-connections-per-client must be 0 (no limit) or more, got %d", c.perClient)
	case c.readTimeout < 0:
		return errors.New("--read-timeout must be 0 (none) or more")
	}
	return nil
}

// defaultMaxConnections is DefaultMaxConnections, lowered to leave
// fdReserve descriptors free when the open-files limit is lower.
func defaultMaxConnections() int {
	n := httpserver.DefaultMaxConnections
	if limit, ok := openFilesLimit(); ok && limit < uint64(n+fdReserve) {
		n = max(int(limit)-fdReserve, int(limit)/2)
	}
	return n
}

// limiters returns the connection limiters of the main listener and of
// the --metrics-addr one, and registers the main one's counts on reg.
func (c connConfig) limiters(trusted []netip.Prefix, reg prometheus.Registerer, log *slog.Logger) (api, metrics *httpserver.ConnLimiter, err error) {
	api, err = httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{
		Max: c.max, PerClient: c.perClient, Exempt: trusted, Logger: log,
	})
	if err != nil {
		return nil, nil, err
	}
	metrics, err = httpserver.NewConnLimiter(&httpserver.ConnLimitOptions{
		Max: metricsMaxConnections, PerClient: c.perClient, Exempt: trusted, Logger: log,
	})
	if err != nil {
		return nil, nil, err
	}
	err = errors.Join(
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentmesh_http_connections",
			Help: "Client connections open on the API port.",
		}, func() float64 { return float64(api.Stats().Open) })),
		reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentmesh_http_connections_refused_total",
			Help: "Connections to the API port closed at accept for their client's cap (--max-connections-per-client).",
		}, func() float64 { return float64(api.Stats().Refused) })),
		reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentmesh_http_connections_evicted_total",
			Help: "Connections to the API port closed to make room at the cap (--max-connections).",
		}, func() float64 { return float64(api.Stats().Evicted) })),
	)
	return api, metrics, err
}
