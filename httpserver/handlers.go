package httpserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
)

// routes registers the HTTP API's route table served by this package
// (docs/API.md).
func (s *Server) routes(metrics bool) {
	s.handle("GET /health", authNone, "", s.health)
	s.handle("GET /health/deep", authScope, ScopeRead, s.healthDeep)
	s.handle("GET /health/ready", authNone, "", s.healthReady)
	if metrics {
		s.handle("GET /metrics", authNone, "", func(w *recorder, r *http.Request) {
			s.metrics.handler.ServeHTTP(w, r)
		})
	}
	s.handle("POST /v1/agents", authScope, ScopeRegister, s.registerAgent)
	s.handle("GET /v1/agents", authScope, ScopeRead, s.listAgents)
	s.handle("GET /v1/agents/{name}", authScope, ScopeRead, s.getAgent)
	s.handle("DELETE /v1/agents/{name}", authScope, ScopeRegister, s.deleteAgent)
	s.handle("POST /v1/agents/{name}/heartbeat", authScope, ScopeRegister, s.heartbeat)
	s.handle("GET /v1/discover", authScope, ScopeRead, s.discoverGet)
	s.handle("POST /v1/discover", authScope, ScopeRead, s.discoverPost)
	if s.reloadFunc != nil {
		s.handle("POST /v1/admin/reload", authScope, ScopeAdmin, s.reload)
	}
	if s.audit != nil {
		s.handle("GET /v1/audit", authScope, ScopeAdmin, s.listAudit)
	}
	if s.del != nil {
		s.delegationRoutes()
	}
	s.routingRoutes()
	s.a2aRoutes()
}

// decodeBody reads and decodes the request's JSON body into dst.
func (s *Server) decodeBody(w *recorder, r *http.Request, dst any) *apiError {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			bodyBuffers.Put(buf)
		}
	}()
	body, e := readBodyInto(w, r, s.maxBody, buf)
	if e != nil {
		return e
	}
	return decodeJSON(body, dst)
}

// noBody checks that a route taking no parameters in its body got none:
// an empty body, or an empty JSON object ({}). Anything else — an unknown
// field, a malformed body — is refused as decodeBody refuses it, rather
// than ignored.
func (s *Server) noBody(w *recorder, r *http.Request) *apiError {
	body, e := readBody(w, r, s.maxBody)
	if e != nil || len(bytes.TrimSpace(body)) == 0 {
		return e
	}
	return decodeJSON(body, &struct{}{})
}

// link returns the Link header value pointing at path?q.
func (s *Server) link(path string, q url.Values) string {
	return "<" + s.publicURL + path + "?" + q.Encode() + `>; rel="next"`
}

var healthOK = []byte("{\"status\":\"ok\"}\n")

func (s *Server) health(w *recorder, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(healthOK)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(healthOK)
}

// healthReady serves GET /health/ready: 200 {"status":"ready"} once the
// mesh can answer every request, else 503 unavailable with Retry-After
// and what it waits for. GET /health stays liveness: 200 while the
// process serves.
func (s *Server) healthReady(w *recorder, r *http.Request) {
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			w.Header().Set("Retry-After", "1")
			s.fail(w, errorf(http.StatusServiceUnavailable, apierr.CodeUnavailable, "not ready: %s", err.Error()))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// DeepHealth is the body of GET /health/deep.
type DeepHealth struct {
	// Status is "ok" (HTTP 200) or "degraded" (HTTP 503: the store is
	// unreachable or the registry is not serving).
	Status string `json:"status"`
	// Store is "ok", "unreachable" or "unchecked" (no Options.StorePing).
	Store string `json:"store"`
	// Registry is "ok" or "unavailable".
	Registry string `json:"registry"`
	// Agents is the number of registered agents, stale ones included
	// (-1 when the registry cannot say).
	Agents int `json:"agents"`
	// Breakers are the circuit breakers by agent name.
	Breakers map[string]breaker.Snapshot `json:"breakers"`
	// LastReloadError is the error of the last reload when it failed (the
	// previous agents and tokens stay in service, so it does not degrade
	// the status).
	LastReloadError string `json:"lastReloadError,omitempty"`
}

func (s *Server) healthDeep(w *recorder, r *http.Request) {
	ctx := r.Context()
	out := DeepHealth{Status: "ok", Store: "unchecked", Registry: "ok", Agents: -1, Breakers: map[string]breaker.Snapshot{}}
	if s.storePing != nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.storePing(pctx)
		cancel()
		out.Store = "ok"
		if err != nil {
			out.Store, out.Status = "unreachable", "degraded"
			s.log.LogAttrs(ctx, slog.LevelWarn, "store ping failed", slog.String("request_id", w.id), slog.String("err", err.Error()))
		}
	}
	if _, err := s.reg.List(ctx, registry.ListOptions{Limit: 1}); err != nil {
		out.Registry, out.Status = "unavailable", "degraded"
		s.log.LogAttrs(ctx, slog.LevelWarn, "registry unavailable", slog.String("request_id", w.id), slog.String("err", err.Error()))
	} else if l, ok := s.reg.(interface{ Len() int }); ok {
		out.Agents = l.Len()
	}
	if s.breakers != nil {
		for name, snap := range s.breakers.States() {
			out.Breakers[name] = snap
		}
	}
	if s.reloadErr != nil {
		if err := s.reloadErr(); err != nil {
			out.LastReloadError = err.Error()
		}
	}
	status := http.StatusOK
	if out.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
}

func (s *Server) reload(w *recorder, r *http.Request) {
	if e := s.noBody(w, r); e != nil {
		s.fail(w, e)
		return
	}
	report, err := s.reloadFunc(r.Context())
	if err != nil {
		e := errorf(http.StatusUnprocessableEntity, CodeReloadFailed, "%s", err.Error())
		e.details = report
		s.record(audit.Entry{Actor: w.identity.Name, Principal: w.identity.Principal, Action: audit.ActionReload, Outcome: audit.OutcomeFailure, Code: CodeReloadFailed,
			Details: map[string]string{"error": truncate(err.Error(), 512), "request_id": w.id}})
		s.fail(w, e)
		return
	}
	s.auditOutcome(w, audit.ActionReload, "", nil, nil)
	if report == nil {
		report = map[string]string{"status": "ok"}
	}
	writeJSON(w, http.StatusOK, report)
}

// ---- agents ----

func (s *Server) registerAgent(w *recorder, r *http.Request) {
	var a registry.Agent
	if e := s.decodeBody(w, r, &a); e != nil {
		s.fail(w, e)
		return
	}
	if a.Protocol == registry.ProtocolInProcess {
		e := fieldError("protocol", "invalid protocol: inprocess agents are registered by the program that hosts them, not over HTTP")
		s.auditOutcome(w, audit.ActionAgentRegister, a.Name, e, nil)
		s.fail(w, e)
		return
	}
	s.register(w, r, a)
}

// register registers a and answers 201 with a Location when the agent is
// new, 200 when it replaced one. The registry's write hook audits it, with
// the [audit.Origin] of r's context.
func (s *Server) register(w *recorder, r *http.Request, a registry.Agent) {
	stored, created, err := s.reg.Register(r.Context(), a)
	if err != nil {
		s.fail(w, describe(err))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", s.publicURL+"/v1/agents/"+url.PathEscape(stored.Name))
	}
	writeJSON(w, status, stored)
}

func (s *Server) listAgents(w *recorder, r *http.Request) {
	q, e := parseQuery(r.URL.RawQuery, "limit", "cursor", "label*")
	if e != nil {
		s.fail(w, e)
		return
	}
	limit, e := q.nonNegInt("limit")
	if e != nil {
		s.fail(w, e)
		return
	}
	labels, e := q.labels("label")
	if e != nil {
		s.fail(w, e)
		return
	}
	page, err := s.reg.List(r.Context(), registry.ListOptions{Limit: limit, Cursor: q.get("cursor"), Labels: labels})
	if err != nil {
		s.fail(w, describe(err))
		return
	}
	if page.NextCursor != "" {
		next := url.Values{"cursor": {page.NextCursor}}
		if q.has("limit") {
			next.Set("limit", q.get("limit"))
		}
		if ls := q["label"]; len(ls) > 0 {
			next["label"] = ls
		}
		w.Header().Set("Link", s.link("/v1/agents", next))
	}
	agents := page.Agents
	if agents == nil {
		agents = []registry.Agent{}
	}
	writeJSON(w, http.StatusOK, agents)
}

// agentName reads and checks the {name} path segment.
func agentName(r *http.Request) (string, *apiError) {
	name := r.PathValue("name")
	if !registry.ValidName(name) {
		return "", fieldError("name", "invalid name: must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
	}
	return name, nil
}

// agentError is the response to err on a route of the agent {name}, whose
// not-found message speaks of the name in the path.
func agentError(err error) *apiError {
	e := describe(err)
	if errors.Is(err, registry.ErrNotFound) {
		e.msg = "no agent is registered under this name"
	}
	return e
}

func (s *Server) getAgent(w *recorder, r *http.Request) {
	name, e := agentName(r)
	if e != nil {
		s.fail(w, e)
		return
	}
	a, err := s.reg.Get(r.Context(), name)
	s.writeResult(w, a, err, agentError)
}

func (s *Server) deleteAgent(w *recorder, r *http.Request) {
	name, e := agentName(r)
	if e != nil {
		s.fail(w, e)
		return
	}
	if err := s.reg.Delete(r.Context(), name); err != nil {
		s.fail(w, agentError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) heartbeat(w *recorder, r *http.Request) {
	name, e := agentName(r)
	if e == nil {
		e = s.noBody(w, r)
	}
	if e != nil {
		s.fail(w, e)
		return
	}
	a, err := s.reg.Heartbeat(r.Context(), name)
	s.writeResult(w, a, err, agentError)
}

// ---- discovery ----

func (s *Server) discoverGet(w *recorder, r *http.Request) {
	q, e := parseQuery(r.URL.RawQuery, "query", "limit", "minScore", "scorer", "label*", "protocol", "resources", "includeUnavailable")
	if e != nil {
		s.fail(w, e)
		return
	}
	if !q.has("query") {
		s.fail(w, fieldError("query", "the query parameter is required"))
		return
	}
	var dq discovery.Query
	var err *apiError
	if dq.Limit, err = q.nonNegInt("limit"); err != nil {
		s.fail(w, err)
		return
	}
	if dq.MinScore, err = q.float("minScore"); err != nil {
		s.fail(w, err)
		return
	}
	if dq.Labels, err = q.labels("label"); err != nil {
		s.fail(w, err)
		return
	}
	if dq.IncludeUnavailable, err = q.bool("includeUnavailable"); err != nil {
		s.fail(w, err)
		return
	}
	dq.Scorer = discovery.Scorer(q.get("scorer"))
	dq.Protocol = registry.Protocol(q.get("protocol"))
	if q.has("resources") {
		var rl resourceList
		if err := rl.decode([]byte(q.get("resources")), "resources"); err != nil {
			s.fail(w, jsonError(err))
			return
		}
		dq.RequiredResources = rl
	}
	s.discover(w, q.get("query"), &dq)
}

// discoverBody is the body of POST /v1/discover, with the seed's field
// names.
type discoverBody struct {
	Query              string               `json:"query"`
	Limit              int                  `json:"limit"`
	MinScore           float64              `json:"minScore"`
	Scorer             string               `json:"scorer"`
	Labels             map[string]string    `json:"labels"`
	Protocol           string               `json:"protocol"`
	RequiredResources  requiredResourceList `json:"requiredResources"`
	Resources          resourceList         `json:"resources"`
	IncludeUnavailable bool                 `json:"includeUnavailable"`
}

func (s *Server) discoverPost(w *recorder, r *http.Request) {
	var b discoverBody
	if e := s.decodeBody(w, r, &b); e != nil {
		s.fail(w, e)
		return
	}
	if b.Limit < 0 {
		s.fail(w, fieldError("limit", "invalid limit: must be a non-negative integer"))
		return
	}
	dq := discovery.Query{
		Limit:              b.Limit,
		MinScore:           b.MinScore,
		Scorer:             discovery.Scorer(b.Scorer),
		Labels:             b.Labels,
		Protocol:           registry.Protocol(b.Protocol),
		RequiredResources:  append(append([]string(nil), b.RequiredResources...), b.Resources...),
		IncludeUnavailable: b.IncludeUnavailable,
	}
	s.discover(w, b.Query, &dq)
}

func (s *Server) discover(w *recorder, query string, q *discovery.Query) {
	switch q.Protocol {
	case "", registry.ProtocolHTTP, registry.ProtocolMCP, registry.ProtocolA2A, registry.ProtocolInProcess:
	default:
		s.fail(w, fieldError("protocol", "invalid protocol: must be one of http, mcp, a2a, inprocess"))
		return
	}
	if js, ok := s.search.(discovery.JSONSearcher); ok {
		buf := replyBuffers.Get().(*[]byte)
		defer replyBuffers.Put(buf)
		b, err := js.AppendSearchJSON((*buf)[:0], query, q)
		if err != nil {
			s.fail(w, describe(err))
			return
		}
		b = append(b, '\n')
		*buf = b
		writeJSONBytes(w, http.StatusOK, b)
		return
	}
	res, err := s.search.Search(query, q)
	if err != nil {
		s.fail(w, describe(err))
		return
	}
	if res == nil {
		res = []discovery.Result{}
	}
	writeJSON(w, http.StatusOK, res)
}

// replyBuffers recycles the buffers discovery replies are encoded in.
var replyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// PingStore returns an Options.StorePing for an agent store: it reads one
// agent that need not exist, so any answer from the store — the agent or
// "not found" — means it is reachable.
func PingStore(s registry.Store) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := s.GetAgent(ctx, "agentmesh-health-probe")
		if err == nil || errors.Is(err, registry.ErrNotFound) {
			return nil
		}
		return err
	}
}
