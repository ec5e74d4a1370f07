package httpserver

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/audit"
)

// Audit is where the server records audit entries and what GET
// /v1/audit reads: *audit.Recorder implements it. Record must not block.
type Audit interface {
	Record(e audit.Entry)
	List(ctx context.Context, q audit.Query) ([]audit.Entry, error)
}

// record writes e to the audit log, if there is one.
func (s *Server) record(e audit.Entry) {
	if s.audit != nil {
		s.audit.Record(e)
	}
}

// auditOutcome records what a request did to target: success when e is
// nil, else the outcome and code of e (denied for a 4xx, failure for a
// 5xx). The actor is the request's token, with its principal.
func (s *Server) auditOutcome(w *recorder, action, target string, e *apiError, details map[string]string) {
	if s.audit == nil {
		return
	}
	entry := audit.Entry{
		Actor:     w.identity.Name,
		Principal: w.identity.Principal,
		Action:    action,
		Target:    truncate(target, 128),
		Outcome:   audit.OutcomeSuccess,
		Details:   details,
	}
	if e != nil {
		entry.Outcome, entry.Code = audit.OutcomeDenied, e.code
		if e.status >= 500 {
			entry.Outcome = audit.OutcomeFailure
		}
	}
	if entry.Details == nil {
		entry.Details = map[string]string{}
	}
	entry.Details["request_id"] = w.id
	s.record(entry)
}

// auditAuthFailure records a refused authentication or authorisation.
// id is the token's identity when the token was valid but lacked the
// scope, else the zero Identity. Repeated failures (same client, token, route, code
// and reason) are counted into one entry a minute: see authAuditor.
func (s *Server) auditAuthFailure(w *recorder, r *http.Request, id Identity, code, reason string) {
	if s.audit == nil {
		return
	}
	route := w.route
	if route == "" || route == routeUnmatched {
		route = r.Method + " " + truncate(r.URL.Path, 128)
	}
	s.authAudit.failure(authKey{actor: id.Name, principal: id.Principal, client: w.clientAddr(r), code: code, reason: reason, route: route}, w.id)
}

// listAudit serves GET /v1/audit?limit&since&cursor (scope admin): audit
// entries newest first. limit defaults to audit.DefaultListLimit and is
// capped at audit.MaxListLimit; since (RFC 3339) keeps the entries at or
// after it; the next page is in the Link header.
func (s *Server) listAudit(w *recorder, r *http.Request) {
	q, e := parseQuery(r.URL.RawQuery, "limit", "since", "cursor")
	if e != nil {
		s.fail(w, e)
		return
	}
	var aq audit.Query
	if aq.Limit, e = q.limit(audit.DefaultListLimit, audit.MaxListLimit); e != nil {
		s.fail(w, e)
		return
	}
	if q.has("since") {
		t, err := time.Parse(time.RFC3339Nano, q.get("since"))
		if err != nil {
			s.fail(w, fieldError("since", "invalid since: must be an RFC 3339 time such as 2025-01-02T15:04:05Z"))
			return
		}
		aq.Since = t
	}
	if q.has("cursor") {
		c := q.get("cursor")
		if c == "" || len(c) > audit.MaxIDLen {
			s.fail(w, fieldError("cursor", "invalid cursor: use the cursor of a Link header"))
			return
		}
		aq.Before = c
	}
	entries, err := s.audit.List(r.Context(), aq)
	if err != nil {
		s.fail(w, describe(err))
		return
	}
	if entries == nil {
		entries = []audit.Entry{}
	}
	if len(entries) == aq.Limit {
		next := url.Values{"cursor": {entries[len(entries)-1].ID}, "limit": {strconv.Itoa(aq.Limit)}}
		if q.has("since") {
			next.Set("since", q.get("since"))
		}
		w.Header().Set("Link", s.link("/v1/audit", next))
	}
	writeJSON(w, http.StatusOK, entries)
}
