package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

// BreakerStates reports the circuit breakers by agent name:
// *breaker.Set implements it.
type BreakerStates interface {
	States() map[string]breaker.Snapshot
}

// AuditStats reports what the audit log lost: *audit.Recorder implements
// it.
type AuditStats interface {
	// Dropped is the number of entries dropped because the queue was full.
	Dropped() uint64
	// Failed is the number of entries the store refused.
	Failed() uint64
}

// DefaultSessionsCacheFor is how long a count of active sessions is
// reused when Options.SessionsCacheFor is 0.
const DefaultSessionsCacheFor = 5 * time.Second

// Options configures [New]. A nil *Options, like the zero value of every
// field, means the documented default. New copies it.
type Options struct {
	// Breakers is read at every scrape for agentmesh_breaker_state. Nil
	// means no breaker series.
	Breakers BreakerStates

	// Sessions counts the active sessions for agentmesh_sessions_active
	// (a store implementing session.ActiveCounter). Nil means the gauge
	// reads 0.
	Sessions session.ActiveCounter

	// SessionsCacheFor is how long a count of Sessions is reused, so that
	// scrapes in quick succession do not each ask the store. ≤ 0 means
	// DefaultSessionsCacheFor (5 s).
	SessionsCacheFor time.Duration

	// Audit, if set, adds agentmesh_audit_dropped_total and
	// agentmesh_audit_write_failures_total.
	Audit AuditStats

	// Logger receives failures to count sessions (Warn). Nil means
	// discard.
	Logger *slog.Logger
}

// Metrics is the metric set of the mesh (docs/OPERATIONS.md#metrics),
// besides the HTTP metrics of httpserver: delegations, dispatches,
// discovery, breakers, routing decisions, agents and sessions. It is fed
// through the hooks the library packages offer — pass
// [Metrics.ObserveRecord] as delegation.Options.OnRecord,
// [Metrics.ObserveDecision] as routing.RouterOptions.OnDecision, the
// searcher of [Metrics.Searcher] to the front-ends, and call
// [Metrics.Follow] with the registry — and reads breaker states and the
// session count when scraped.
//
// The agent label takes the names of registered agents only, so its
// cardinality is bounded by the registry; the series of an agent are
// deleted when it is unregistered (a delegation finishing right after may
// bring one back until the next removal).
//
// A Metrics is safe for concurrent use. Use [New]; the zero Metrics is not
// usable.
type Metrics struct {
	discover       prometheus.Histogram
	delegations    *prometheus.CounterVec
	dispatch       *prometheus.HistogramVec
	dispatchErrors *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	agents         *prometheus.GaugeVec

	breakers BreakerStates
	sessions session.ActiveCounter
	cacheFor time.Duration
	log      *slog.Logger

	mu        sync.Mutex
	following bool
	sources   map[string]registry.Source // agent name → its source, when following

	sessMu    sync.Mutex
	sessCount float64
	sessAt    time.Time
}

// Label values of agentmesh_routing_decisions_total besides the decisions
// route, clarify and fallback: a request that failed (no agent
// available, a session store error…).
const DecisionError = "error"

// New returns the metric set registered on reg (required). It fails if
// reg already has collectors of the same names.
func New(reg prometheus.Registerer, opts *Options) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil Registerer")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	m := &Metrics{
		discover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentmesh_discover_duration_seconds",
			Help:    "Time to rank agents for a discovery query.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		delegations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_delegations_total",
			Help: "Delegations by target agent and status: each reaching accepted (async) and each reaching a final status (completed, failed, timeout, canceled).",
		}, []string{"agent", "status"}),
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentmesh_dispatch_duration_seconds",
			Help:    "Time from a delegation's start to the agent's answer (all attempts and retries), or to its acceptance for an async one; refusals without a call are not observed.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"agent"}),
		dispatchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_dispatch_errors_total",
			Help: "Delegations that ended failed or timeout, by target agent and error code.",
		}, []string{"agent", "code"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_routing_decisions_total",
			Help: "Routed requests by decision: route, clarify, fallback, or error for a request that failed.",
		}, []string{"decision"}),
		agents: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentmesh_agents",
			Help: "Registered agents by source: api (registered through the API or the library) or file (the agent directory).",
		}, []string{"source"}),
		breakers: o.Breakers,
		sessions: o.Sessions,
		cacheFor: o.SessionsCacheFor,
		log:      o.Logger,
	}
	if m.cacheFor <= 0 {
		m.cacheFor = DefaultSessionsCacheFor
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []routing.Action{routing.ActionRoute, routing.ActionClarify, routing.ActionFallback, DecisionError} {
		m.decisions.WithLabelValues(string(d))
	}
	for _, s := range []registry.Source{registry.SourceAPI, registry.SourceFile} {
		m.agents.WithLabelValues(string(s))
	}
	cs := []prometheus.Collector{
		m.discover, m.delegations, m.dispatch, m.dispatchErrors, m.decisions, m.agents,
		breakerCollector{m},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentmesh_sessions_active",
			Help: "Active routing sessions (one per user at most), counted by the store.",
		}, m.activeSessions),
	}
	if o.Audit != nil {
		cs = append(cs,
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentmesh_audit_dropped_total",
				Help: "Audit entries dropped because the audit queue was full.",
			}, func() float64 { return float64(o.Audit.Dropped()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentmesh_audit_write_failures_total",
				Help: "Audit entries lost because the store refused them.",
			}, func() float64 { return float64(o.Audit.Failed()) }),
		)
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}

// Follow keeps agentmesh_agents current from dir's events (counts kept as
// they change, never a listing per scrape), limits agentmesh_breaker_state
// to registered agents, and deletes an agent's series when it is
// unregistered. Call it once; the returned function stops following.
func (m *Metrics) Follow(dir registry.Subscriber) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	snapshot, cancel := dir.Subscribe(m.apply)
	m.following = true
	m.sources = make(map[string]registry.Source, len(snapshot))
	counts := map[registry.Source]int{}
	for _, a := range snapshot {
		s := sourceOf(a)
		m.sources[a.Name] = s
		counts[s]++
	}
	for s, n := range counts {
		m.agents.WithLabelValues(string(s)).Set(float64(n))
	}
	return cancel
}

// sourceOf returns a's source label: api when the record has none.
func sourceOf(a registry.Agent) registry.Source {
	if a.Source == "" {
		return registry.SourceAPI
	}
	return a.Source
}

// apply follows one registry event. Subscribe calls it in commit order,
// never concurrently, outside the registry's locks.
func (m *Metrics) apply(ev registry.Event) {
	name := ev.Agent.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	old, known := m.sources[name]
	switch ev.Type {
	case registry.EventPut, registry.EventHeartbeat:
		s := sourceOf(ev.Agent)
		if known && old == s {
			return
		}
		if known {
			m.agents.WithLabelValues(string(old)).Dec()
		}
		m.agents.WithLabelValues(string(s)).Inc()
		m.sources[name] = s
	case registry.EventDelete:
		if !known {
			return
		}
		m.agents.WithLabelValues(string(old)).Dec()
		delete(m.sources, name)
		labels := prometheus.Labels{"agent": name}
		m.delegations.DeletePartialMatch(labels)
		m.dispatch.DeletePartialMatch(labels)
		m.dispatchErrors.DeletePartialMatch(labels)
	}
}

// registered reports whether name is a registered agent (always true
// when not following a registry).
func (m *Metrics) registered(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.following {
		return true
	}
	_, ok := m.sources[name]
	return ok
}

// ObserveRecord counts a delegation record that reached accepted or a
// final status: use it as delegation.Options.OnRecord.
func (m *Metrics) ObserveRecord(rec delegation.Record) {
	agent := rec.TargetAgent
	m.delegations.WithLabelValues(agent, string(rec.Status)).Inc()
	// The dispatch is over when the agent answered: at acceptance for an
	// async delegation (Deadline is set from then on), at the end for a
	// synchronous one. A refusal without a call has no attempts.
	if rec.Attempts > 0 && (rec.Status == delegation.StatusAccepted || rec.Status.Final() && rec.Deadline == nil) {
		m.dispatch.WithLabelValues(agent).Observe(rec.UpdatedAt.Sub(rec.CreatedAt).Seconds())
	}
	if rec.Status == delegation.StatusFailed || rec.Status == delegation.StatusTimeout {
		code := rec.Code
		if code == "" {
			code = string(rec.Status)
		}
		m.dispatchErrors.WithLabelValues(agent, code).Inc()
	}
}

// ObserveDecision counts a routed request: use it as
// routing.RouterOptions.OnDecision.
func (m *Metrics) ObserveDecision(_ context.Context, resp routing.Response, err error) {
	d := string(resp.Decision)
	if err != nil || d == "" {
		d = DecisionError
	}
	m.decisions.WithLabelValues(d).Inc()
}

// Searcher returns s with every search timed into
// agentmesh_discover_duration_seconds. When s also has AppendSearchJSON
// (a [discovery.JSONSearcher], as *discovery.Engine), so does the result, timed the
// same way, so a front-end's fast path is kept.
func (m *Metrics) Searcher(s discovery.Searcher) discovery.Searcher {
	t := timedSearcher{s: s, h: m.discover}
	if js, ok := s.(discovery.JSONSearcher); ok {
		return timedJSONSearcher{timedSearcher: t, js: js}
	}
	return t
}

type timedSearcher struct {
	s discovery.Searcher
	h prometheus.Histogram
}

func (t timedSearcher) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	start := time.Now()
	res, err := t.s.Search(query, q)
	t.h.Observe(time.Since(start).Seconds())
	return res, err
}

type timedJSONSearcher struct {
	timedSearcher
	js discovery.JSONSearcher
}

func (t timedJSONSearcher) AppendSearchJSON(dst []byte, query string, q *discovery.Query) ([]byte, error) {
	start := time.Now()
	out, err := t.js.AppendSearchJSON(dst, query, q)
	t.h.Observe(time.Since(start).Seconds())
	return out, err
}

// activeSessions is the value of agentmesh_sessions_active.
func (m *Metrics) activeSessions() float64 {
	if m.sessions == nil {
		return 0
	}
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	if !m.sessAt.IsZero() && time.Since(m.sessAt) < m.cacheFor {
		return m.sessCount
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := m.sessions.CountActiveSessions(ctx)
	if err != nil {
		m.log.Warn("metrics: counting active sessions failed", "err", err)
		return m.sessCount // the last count
	}
	m.sessCount, m.sessAt = float64(n), time.Now()
	return m.sessCount
}

// breakerCollector reports agentmesh_breaker_state at scrape time.
type breakerCollector struct{ m *Metrics }

var breakerDesc = prometheus.NewDesc("agentmesh_breaker_state",
	"Circuit breaker state by agent: 0 closed, 1 open, 2 half-open.", []string{"agent"}, nil)

func (c breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerDesc }

func (c breakerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.m.breakers == nil {
		return
	}
	for name, snap := range c.m.breakers.States() {
		if !c.m.registered(name) {
			continue // an unregistered agent's breaker: no series
		}
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(snap.State), name)
	}
}
