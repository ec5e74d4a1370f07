package audit

import (
	"context"
	"strconv"

	"github.com/agentmesh/agentmesh/session"
)

// ActionSessionClose: a routing session ended. Target is the agent it
// was routed to, Code its status (completed, abandoned, error or
// expired), Actor the token of the request that ended it (empty when the
// mesh did: an expiry); Details has the session id, the turn count, the
// duration in milliseconds and the request's id — never the user's id.
const ActionSessionClose = "session.close"

// SessionEntry returns the audit entry of a session that ended, with the
// actor the context's [Origin] carries. A session closed with status
// error is a failure; every other end a success.
func SessionEntry(ctx context.Context, e session.CloseEvent) Entry {
	o := OriginFrom(ctx)
	out := Entry{
		Actor:     o.Actor,
		Principal: o.Principal,
		Action:    ActionSessionClose,
		Target:    e.ActiveAgent,
		Outcome:   OutcomeSuccess,
		Code:      string(e.Status),
		Details: map[string]string{
			"session_id":  e.SessionID,
			"turns":       strconv.Itoa(e.Turns),
			"duration_ms": strconv.FormatInt(e.Duration().Milliseconds(), 10),
		},
	}
	if o.RequestID != "" {
		out.Details["request_id"] = o.RequestID
	}
	if e.Status == session.StatusError {
		out.Outcome = OutcomeFailure
	}
	return out
}

// SessionClosed records the [SessionEntry] of e: it is a
// session.Options.OnClose.
func (r *Recorder) SessionClosed(ctx context.Context, e session.CloseEvent) {
	if r == nil {
		return
	}
	r.Record(SessionEntry(ctx, e))
}
