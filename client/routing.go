package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

// Route routes one message through the server's orchestrator (POST
// /v1/request, scope route) and returns its response: the answering
// agent's reply, or a clarification question. The server records the
// token that created a session, and only that token (or an admin's) sees
// it afterwards. req.RequestID is not sent: the server makes its own.
//
// Errors: routing.ErrInvalidRequest, routing.ErrNoDefaultAgent (nothing
// could take the message and no default agent is registered),
// routing.ErrUnavailable (no agent could take it now; [Error.RetryAfter]
// says when to try again). Route is not retried unless the connection
// could not be made.
func (c *Client) Route(ctx context.Context, req routing.Request) (routing.Response, error) {
	var resp routing.Response
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/request", body: req, retry: retryDial, route: routeRequest}, &resp)
	return resp, err
}

// sessionPath is the path of the session id.
func sessionPath(id string) string { return "/v1/sessions/" + url.PathEscape(id) }

// Session returns the session id, its turns included (GET
// /v1/sessions/{id}). A session of another token is reported like a
// missing one: session.ErrNotFound.
func (c *Client) Session(ctx context.Context, id string) (session.Session, error) {
	var s session.Session
	_, err := c.do(ctx, call{method: http.MethodGet, path: sessionPath(id), route: routeSessions}, &s)
	return s, err
}

// ResumeSession continues the session id in a new active session for the
// same user (POST /v1/sessions/{id}/resume) and returns the new session.
// It is not retried unless the connection could not be made.
func (c *Client) ResumeSession(ctx context.Context, id string) (session.Session, error) {
	var s session.Session
	_, err := c.do(ctx, call{method: http.MethodPost, path: sessionPath(id) + "/resume", retry: retryDial, route: routeSessions}, &s)
	return s, err
}

// CloseSession closes the session id as abandoned (DELETE
// /v1/sessions/{id}) and returns it. A session already closed is
// session.ErrNotActive, which is also what a retry reports when an
// attempt that got no reply had closed it.
func (c *Client) CloseSession(ctx context.Context, id string) (session.Session, error) {
	var s session.Session
	_, err := c.do(ctx, call{method: http.MethodDelete, path: sessionPath(id), route: routeSessions}, &s)
	return s, err
}
