package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Delegations is what the server needs from the delegation client:
// *delegation.Client implements it. The context of Delegate carries the
// caller's [Identity] ([IdentityFrom]).
type Delegations interface {
	Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error)
	Get(ctx context.Context, id string) (delegation.Record, error)
	List(ctx context.Context, f delegation.ListFilter) ([]delegation.Record, error)
	Wait(ctx context.Context, id string) (delegation.Record, error)
	Cancel(ctx context.Context, id string) (delegation.Record, error)
	// CallbackHandler serves POST /v1/delegations/{id}/result; trusted
	// reports whether the request was authenticated by the server.
	CallbackHandler(trusted func(r *http.Request) bool) http.Handler
}

func (s *Server) delegationRoutes() {
	s.handle("POST /v1/delegate", authScope, ScopeDelegate, s.delegate)
	s.handle("GET /v1/delegations", authScope, ScopeRead, s.listDelegations)
	s.handle("GET /v1/delegations/{id}", authScope, ScopeRead, s.getDelegation)
	s.handle("POST /v1/delegations/{id}/cancel", authScope, ScopeDelegate, s.cancelDelegation)
	// The callback is authenticated by its single-use secret (?token=),
	// which the delegation package checks. Only the delegation's own
	// secret reports its result: a caller's token, whatever its scopes,
	// could forge another caller's outcome.
	cb := s.del.CallbackHandler(nil)
	s.handle("POST /v1/delegations/{id}/result", authCallback, "", func(w *recorder, r *http.Request) {
		cb.ServeHTTP(w, r)
	})
}

// delegateBody is the body of POST /v1/delegate (the seed's field names).
type delegateBody struct {
	TargetName     string         `json:"targetName"`
	Query          string         `json:"query"`
	Task           string         `json:"task"`
	Context        map[string]any `json:"context"`
	Resources      resourceList   `json:"resources"`
	SourceAgent    string         `json:"sourceAgent"`
	Async          bool           `json:"async"`
	TimeoutMs      int64          `json:"timeoutMs"`
	AsyncTimeoutMs int64          `json:"asyncTimeoutMs"`
}

// DelegateResponse is the body of a 200 reply to POST /v1/delegate: the
// seed's fields (id, targetAgent, success, status, result, error,
// latencyMs) plus the machine-readable code (docs/API.md#errors) and a
// few record fields. Success is true for a completed delegation and for an
// accepted async one.
type DelegateResponse struct {
	ID          string                    `json:"id"`
	TargetAgent string                    `json:"targetAgent"`
	SourceAgent string                    `json:"sourceAgent,omitempty"`
	Success     bool                      `json:"success"`
	Status      delegation.Status         `json:"status"`
	Result      json.RawMessage           `json:"result,omitempty"`
	Error       string                    `json:"error,omitempty"`
	Code        string                    `json:"code,omitempty"`
	LatencyMs   int64                     `json:"latencyMs"`
	Attempts    int                       `json:"attempts"`
	NeedsInput  bool                      `json:"needsInput,omitempty"`
	Response    *delegation.AgentResponse `json:"response,omitempty"`
	Deadline    *time.Time                `json:"deadline,omitempty"`
}

func (s *Server) delegate(w *recorder, r *http.Request) {
	var b delegateBody
	if e := s.decodeBody(w, r, &b); e != nil {
		s.fail(w, e)
		return
	}
	maxMs := delegation.MaxTimeout.Milliseconds()
	if b.TimeoutMs < 0 || b.TimeoutMs > maxMs {
		s.fail(w, fieldError("timeoutMs", "invalid timeoutMs: must be between 1 and %d (0 means the default)", maxMs))
		return
	}
	maxAsync := delegation.MaxAsyncTimeout.Milliseconds()
	if b.AsyncTimeoutMs < 0 || b.AsyncTimeoutMs > maxAsync {
		s.fail(w, fieldError("asyncTimeoutMs", "invalid asyncTimeoutMs: must be between 1 and %d (0 means the default)", maxAsync))
		return
	}
	// The caller rides in the context, for hooks that audit delegations.
	rec, err := s.del.Delegate(r.Context(), delegation.Request{
		Target:       b.TargetName,
		Query:        b.Query,
		Resources:    b.Resources,
		Task:         b.Task,
		Context:      b.Context,
		SourceAgent:  b.SourceAgent,
		Async:        b.Async,
		Timeout:      time.Duration(b.TimeoutMs) * time.Millisecond,
		AsyncTimeout: time.Duration(b.AsyncTimeoutMs) * time.Millisecond,
	})
	if err != nil {
		s.fail(w, describe(err))
		return
	}
	writeJSON(w, http.StatusOK, NewDelegateResponse(rec))
}

// NewDelegateResponse is the reply to POST /v1/delegate for rec.
func NewDelegateResponse(rec delegation.Record) DelegateResponse {
	return DelegateResponse{
		ID:          rec.ID,
		TargetAgent: rec.TargetAgent,
		SourceAgent: rec.SourceAgent,
		Success:     rec.Status == delegation.StatusCompleted || rec.Status == delegation.StatusAccepted,
		Status:      rec.Status,
		Result:      rec.Result,
		Error:       rec.Error,
		Code:        rec.Code,
		LatencyMs:   rec.LatencyMs,
		Attempts:    rec.Attempts,
		NeedsInput:  rec.NeedsInput,
		Response:    rec.Response,
		Deadline:    rec.Deadline,
	}
}

func (s *Server) listDelegations(w *recorder, r *http.Request) {
	q, e := parseQuery(r.URL.RawQuery, "limit", "offset", "status", "target")
	if e != nil {
		s.fail(w, e)
		return
	}
	limit, e := q.limit(delegation.DefaultListLimit, delegation.MaxListLimit)
	if e != nil {
		s.fail(w, e)
		return
	}
	offset, e := q.nonNegInt("offset")
	if e != nil {
		s.fail(w, e)
		return
	}
	status := delegation.Status(q.get("status"))
	if status != "" && !status.Valid() {
		s.fail(w, fieldError("status", "invalid status: must be one of pending, running, accepted, completed, failed, timeout, canceled"))
		return
	}
	recs, err := s.del.List(r.Context(), delegation.ListFilter{Status: status, Target: q.get("target"), Limit: limit, Offset: offset})
	if err != nil {
		s.fail(w, describe(err))
		return
	}
	if len(recs) == limit {
		next := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset + limit)}}
		if status != "" {
			next.Set("status", string(status))
		}
		if t := q.get("target"); t != "" {
			next.Set("target", t)
		}
		w.Header().Set("Link", s.link("/v1/delegations", next))
	}
	if recs == nil {
		recs = []delegation.Record{}
	}
	writeJSON(w, http.StatusOK, recs)
}

// delegationID reads the {id} path segment. Ids are UUIDs; anything
// longer than any id could be is not looked up.
func delegationID(r *http.Request) (string, *apiError) {
	id := r.PathValue("id")
	if id == "" || len(id) > 128 {
		return "", errorf(http.StatusNotFound, apierr.CodeNotFound, "no delegation with this id")
	}
	return id, nil
}

func (s *Server) getDelegation(w *recorder, r *http.Request) {
	id, e := delegationID(r)
	if e != nil {
		s.fail(w, e)
		return
	}
	q, e := parseQuery(r.URL.RawQuery, "wait")
	if e != nil {
		s.fail(w, e)
		return
	}
	wait, e := q.duration("wait")
	if e != nil {
		s.fail(w, e)
		return
	}
	ctx := r.Context()
	var (
		rec delegation.Record
		err error
	)
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, min(wait, MaxWait))
		rec, err = s.del.Wait(wctx, id)
		cancel()
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			// The wait is over: return the record as it is now.
			if rec.ID == "" {
				rec, err = s.del.Get(ctx, id)
			} else {
				err = nil
			}
		}
	} else {
		rec, err = s.del.Get(ctx, id)
	}
	s.writeResult(w, rec, err, describe)
}

func (s *Server) cancelDelegation(w *recorder, r *http.Request) {
	id, e := delegationID(r)
	if e == nil {
		e = s.noBody(w, r)
	}
	if e != nil {
		s.fail(w, e)
		return
	}
	rec, err := s.del.Cancel(r.Context(), id)
	s.writeResult(w, rec, err, describe)
}
