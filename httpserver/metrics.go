package httpserver

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentmesh/agentmesh/internal/apierr"
)

// httpMetrics are the agentmesh_http_* request metrics. The route label is the
// mux pattern ("GET /v1/agents/{name}"), "unmatched" or "preflight" —
// never the raw path — so its cardinality is bounded by the route table.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	handler  http.Handler
}

func newHTTPMetrics(reg *prometheus.Registry) (*httpMetrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	requests, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentmesh_http_requests_total",
		Help: "HTTP requests served, by route pattern and status code.",
	}, []string{"route", "code"}))
	if err != nil {
		return nil, err
	}
	duration, err := registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentmesh_http_request_duration_seconds",
		Help:    "Time to serve an HTTP request, by route pattern.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"route"}))
	if err != nil {
		return nil, err
	}
	return &httpMetrics{
		requests: requests,
		duration: duration,
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
	}, nil
}

// registerOrReuse registers c, or returns the identical collector another
// server registered before.
func registerOrReuse[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

func (m *httpMetrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// MetricsTokenName is the name under which a request holding
// Options.MetricsToken appears in the request log.
const MetricsTokenName = "metrics_token"

// guardMetrics puts h, the metrics exposition, behind token
// (Options.MetricsToken): a request is served with "Authorization:
// Bearer <token>", or with a valid API token holding the admin scope.
// Anything else gets 401 unauthenticated (403 permission_denied for a
// valid token without admin). On the server's own port (w is its
// recorder) a refusal is throttled and audited like any other; on a
// listener of the host's own (MetricsHandler) it is only answered. An
// empty token leaves h open.
func (s *Server) guardMetrics(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	// A set of one token without scopes: it authenticates only here.
	metricsTokens := &tokenSet{entries: []tokenEntry{{name: MetricsTokenName, digest: sha256.Sum256([]byte(token))}}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, _ := w.(*recorder)
		tok, _ := bearerToken(r) // "" matches no token: token is not empty
		if e, ok := metricsTokens.lookup(tok); ok {
			if rec != nil {
				rec.identity, rec.authed = e.identity(), true
			}
			h.ServeHTTP(w, r)
			return
		}
		var id Identity
		var ok bool
		if rec != nil {
			if id, ok = s.authenticate(rec, r); !ok {
				return // answered (401 or 429) and audited
			}
		} else if id, ok = s.lookup(r); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentmesh"`)
			WriteError(w, http.StatusUnauthorized, apierr.CodeUnauthenticated, "send Authorization: Bearer <metrics token>")
			return
		}
		if !id.Has(ScopeAdmin) {
			const msg = "the metrics need the metrics token or a token with the admin scope"
			if rec != nil {
				s.auditAuthFailure(rec, r, id, CodePermissionDenied, "missing scope admin")
				writeError(rec, errorf(http.StatusForbidden, CodePermissionDenied, msg))
				return
			}
			WriteError(w, http.StatusForbidden, CodePermissionDenied, msg)
			return
		}
		h.ServeHTTP(w, r)
	})
}
