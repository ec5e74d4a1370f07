package httpserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

// Router routes a message through the orchestrator pipeline (classify,
// gate, dispatch; docs/API.md#how-a-message-is-routed):
// *routing.Router implements it. The context of Handle carries the
// caller's [Identity] ([IdentityFrom]).
type Router interface {
	Handle(ctx context.Context, req routing.Request) (routing.Response, error)
}

// Sessions is what the session routes need from the session manager:
// *session.Manager implements it. It applies the ownership rules to the
// principal the context carries: a session is visible (GET, resume,
// DELETE) only to the principal that created it and to admins; for
// anyone else it does not exist (404), so its existence is not revealed.
type Sessions interface {
	Get(ctx context.Context, id string) (session.Session, error)
	Resume(ctx context.Context, id, userID string) (session.Session, error)
	CloseSession(ctx context.Context, id string, status session.Status) (session.Session, error)
}

func (s *Server) routingRoutes() {
	if s.router != nil {
		s.handle("POST /v1/request", authScope, ScopeRoute, s.routeRequest)
	}
	if s.sessions != nil {
		s.handle("GET /v1/sessions/{id}", authScope, ScopeRoute, s.getSession)
		s.handle("POST /v1/sessions/{id}/resume", authScope, ScopeRoute, s.resumeSession)
		s.handle("DELETE /v1/sessions/{id}", authScope, ScopeRoute, s.deleteSession)
	}
}

func (s *Server) routeRequest(w *recorder, r *http.Request) {
	var req routing.Request
	if e := s.decodeBody(w, r, &req); e != nil {
		s.fail(w, e)
		return
	}
	resp, err := s.router.Handle(r.Context(), req)
	if err != nil {
		s.fail(w, routingError(w, err))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// routingError maps an error of the Router to a response, with a
// Retry-After when no agent could take the request.
func routingError(w http.ResponseWriter, err error) *apiError {
	if errors.Is(err, routing.ErrUnavailable) {
		ra := routing.DefaultRetryAfter
		var ue *routing.UnavailableError
		switch {
		case errors.As(err, &ue) && ue.RetryAfter > 0:
			ra = ue.RetryAfter
		case errors.Is(err, routing.ErrNotReady):
			ra = time.Second // the first model is a training away
		}
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, int64((ra+time.Second-1)/time.Second)), 10))
	}
	return describe(err)
}

// ownedSession returns the session {id} if the caller may see it: it was
// created by the caller's principal, or the caller is an admin. Otherwise,
// and when the session does not exist or has expired, it writes 404.
func (s *Server) ownedSession(w *recorder, r *http.Request) (session.Session, bool) {
	sess, err := s.sessions.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, sessionError(err))
		return session.Session{}, false
	}
	return sess, true
}

// sessionError maps an error of the session manager to a response.
// Another user's session is not found: its existence is not revealed.
func sessionError(err error) *apiError {
	if errors.Is(err, session.ErrForbidden) {
		err = session.ErrNotFound
	}
	return describe(err)
}

func (s *Server) getSession(w *recorder, r *http.Request) {
	sess, ok := s.ownedSession(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// resumeSession continues a session in a new active one, carrying its
// history and state, closes the prior one completed (docs/API.md#sessions)
// and returns the new session.
func (s *Server) resumeSession(w *recorder, r *http.Request) {
	if e := s.noBody(w, r); e != nil {
		s.fail(w, e)
		return
	}
	sess, ok := s.ownedSession(w, r)
	if !ok {
		return
	}
	fresh, err := s.sessions.Resume(r.Context(), sess.ID, sess.UserID)
	s.writeResult(w, fresh, err, sessionError)
}

// deleteSession closes a session abandoned and returns it; a closed one
// gives 409 conflict.
func (s *Server) deleteSession(w *recorder, r *http.Request) {
	sess, ok := s.ownedSession(w, r)
	if !ok {
		return
	}
	closed, err := s.sessions.CloseSession(r.Context(), sess.ID, session.StatusAbandoned)
	s.writeResult(w, closed, err, sessionError)
}
