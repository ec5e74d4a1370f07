package delegation

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/jsonlimit"
)

// Outcome is an async agent's report (the callback of the POST /task
// contract): the JSON body it POSTs to its callback URL.
type Outcome struct {
	// Status is "completed" or "failed".
	Status Status `json:"status"`
	// Result is the result value (any JSON), for a completed delegation.
	Result json.RawMessage `json:"result,omitempty"`
	// Error describes the failure, for a failed delegation.
	Error string `json:"error,omitempty"`
	// WorkflowComplete and WorkflowState end a routed conversation or
	// set its state, as next to the result of a 200 reply.
	WorkflowComplete bool           `json:"workflowComplete,omitempty"`
	WorkflowState    map[string]any `json:"workflowState,omitempty"`
}

// maxCallbackBody caps a callback's body: a result of MaxResultBytes plus
// room for the rest of the object.
const maxCallbackBody = MaxResultBytes + 64<<10

// maxCallbackError caps the error text of a callback kept on the record.
const maxCallbackError = 4 << 10

// newSecret returns a callback secret (26 base32 characters: 130 random
// bits) and its SHA-256, the only form that is stored.
func newSecret() (secret string, hash []byte) {
	secret = rand.Text()
	h := sha256.Sum256([]byte(secret))
	return secret, h[:]
}

// secretMatches compares secret with a stored hash in constant time.
func secretMatches(hash []byte, secret string) bool {
	if len(hash) != sha256.Size || secret == "" {
		return false
	}
	h := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(h[:], hash) == 1
}

// callbackURL is the URL an agent reports to after answering 202.
func (c *Client) callbackURL(id, secret string) string {
	return c.publicURL + "/v1/delegations/" + id + "/result?token=" + secret
}

// Callback applies an agent's report to the delegation with the given
// id (async, or synchronous and answered 202), authenticated by the
// callback secret of its URL, and returns the record, now final. Errors:
// [ErrUnauthenticated] for a wrong or missing secret; one wrapping
// [ErrNotFound]; [ErrInvalid] for a status other than completed or
// failed; [ErrFinal] when the record is already
// final — including a callback that arrives after the async deadline,
// which makes the record timeout (a late callback never overturns timeout
// or canceled); [ErrClosed]. A result over MaxResultBytes fails the
// delegation with code response_too_large.
func (c *Client) Callback(ctx context.Context, id, secret string, out Outcome) (Record, error) {
	if secret == "" {
		return Record{}, ErrUnauthenticated
	}
	return c.complete(ctx, id, secret, false, out, "")
}

// complete finalises a running or accepted record from a report. trusted
// skips the secret check (the caller authenticated the request another
// way); code forces the failure code (response_too_large).
func (c *Client) complete(ctx context.Context, id, secret string, trusted bool, out Outcome, code string) (Record, error) {
	if !c.enter() {
		return Record{}, ErrClosed
	}
	defer c.leave()
	if out.Status != StatusCompleted && out.Status != StatusFailed {
		return Record{}, apierr.Errorf(ErrInvalid, "status must be %q or %q", StatusCompleted, StatusFailed)
	}
	if len(out.Result) > 0 && !json.Valid(out.Result) {
		return Record{}, apierr.Errorf(ErrInvalid, "result is not valid JSON")
	}
	switch {
	case code != "":
	case len(out.Result) > MaxResultBytes:
		out = Outcome{Status: StatusFailed}
		code = CodeResponseTooLarge
	case out.Status == StatusFailed:
		code = CodeAgentError
	}
	errText := out.Error
	switch {
	case code == CodeResponseTooLarge:
		errText = fmt.Sprintf("callback result is over the limit of %d bytes", MaxResultBytes)
	case out.Status == StatusFailed && errText == "":
		errText = "the agent reported a failure"
	}
	if len(errText) > maxCallbackError {
		errText = strings.ToValidUTF8(errText[:maxCallbackError], "")
	}
	if err := c.claimFlight(ctx, id, secret, trusted); err != nil {
		return Record{}, err
	}
	now := c.now()
	var late bool
	rec, err := c.update(ctx, id, func(cur *Record) (*Record, error) {
		late = false
		switch {
		case !trusted && !secretMatches(cur.SecretHash, secret):
			return nil, ErrUnauthenticated
		case cur.Status.Final():
			return nil, apierr.Errorf(ErrFinal, "delegation %s is %s", id, cur.Status)
		case cur.Status == StatusRunning && !cur.Async && len(cur.SecretHash) == 0:
			// No callback URL was sent (not an http agent): only its
			// reply ends it.
			return nil, apierr.Errorf(ErrConflict, "delegation %s is synchronous and still running", id)
		}
		next := *cur
		if cur.Status == StatusAccepted && cur.Deadline != nil && now.After(*cur.Deadline) {
			late = true
			finalize(&next, StatusTimeout, CodeTimeout, "no callback before the deadline", now)
			return &next, nil
		}
		if out.Status == StatusCompleted && code == "" {
			next.Result = out.Result
			if out.WorkflowComplete || out.WorkflowState != nil {
				next.Response = &AgentResponse{Content: resultText(out.Result), WorkflowComplete: out.WorkflowComplete, WorkflowState: out.WorkflowState}
			}
			finalize(&next, StatusCompleted, "", "", now)
		} else {
			next.Result = nil
			if code != CodeResponseTooLarge {
				next.Result = out.Result
			}
			finalize(&next, StatusFailed, code, errText, now)
		}
		next.Attempts = max(next.Attempts, 1)
		return &next, nil
	})
	if err != nil {
		return Record{}, err
	}
	c.finished(rec)
	if late {
		return rec.Public(), apierr.Errorf(ErrFinal, "delegation %s timed out before the callback", id)
	}
	return rec.Public(), nil
}

// claimFlight prepares a callback for a synchronous delegation this
// client has in flight, whose agent may report before its 202 reply is
// read: it makes the running record, which may still be queued for the
// group commit, durable so the callback finds it in the store, and marks
// the flight so that the delegation settles through the store (where the
// first final status wins) instead of over the callback's outcome. A
// flight that already settled here is final: ErrFinal, after the secret
// check, since its final record may not be in the store yet. Other ids
// are left to the store.
func (c *Client) claimFlight(ctx context.Context, id, secret string, trusted bool) error {
	c.liveMu.Lock()
	f := c.live[id]
	if f == nil || f.rec.Async || len(f.rec.SecretHash) == 0 {
		c.liveMu.Unlock()
		return nil
	}
	if !trusted && !secretMatches(f.rec.SecretHash, secret) {
		c.liveMu.Unlock()
		return ErrUnauthenticated
	}
	if s := f.rec.Status; s.Final() {
		c.liveMu.Unlock()
		return apierr.Errorf(ErrFinal, "delegation %s is %s", id, s)
	}
	f.calledBack = true
	c.liveMu.Unlock()
	return c.commit.flush(ctx)
}

// authenticate checks a callback's secret against the stored record,
// without changing it: the answer to a callback whose body is bad.
func (c *Client) authenticate(ctx context.Context, id, secret string, trusted bool) error {
	rec, err := c.store.GetDelegation(ctx, id)
	switch {
	case err != nil:
		return err
	case !trusted && !secretMatches(rec.SecretHash, secret):
		return ErrUnauthenticated
	}
	return nil
}

// CallbackHandler returns the handler of POST /v1/delegations/{id}/result
// (the callback of the POST /task contract), for the HTTP front-end to mount with that pattern (the id is
// read with r.PathValue("id"), or else from the path's
// ".../delegations/<id>/result" segments).
//
// The request is authenticated by the secret in its "token" query
// parameter or, when trusted is non-nil and returns true for the request,
// by the front-end (the mesh's bearer token, say). Replies: 200
// {"id","status"} once the record is final; 401 wrong or missing secret;
// 404 unknown id; 409 already final (also for a callback after the
// deadline: the record becomes timeout); 400 a body that is not a JSON
// object with status "completed" or "failed"; 413 a body over the result
// cap (the delegation fails with code response_too_large); 503 after the
// client is shut down. Errors are JSON {"error","code"} and never carry
// internal error text.
func (c *Client) CallbackHandler(trusted func(r *http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
			return
		}
		if c.inert() {
			writeCallbackError(w, ErrClosed)
			return
		}
		id := r.PathValue("id")
		if id == "" {
			id = idFromPath(r.URL.Path)
		}
		secret := r.URL.Query().Get("token")
		isTrusted := trusted != nil && trusted(r)
		if secret == "" && !isTrusted {
			writeError(w, http.StatusUnauthorized, CodeUnauthenticated, "missing callback token")
			return
		}
		if id == "" {
			writeError(w, http.StatusNotFound, CodeNotFound, "unknown delegation")
			return
		}
		ctx := r.Context()
		out, err := decodeOutcome(http.MaxBytesReader(w, r.Body, maxCallbackBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			_, err = c.complete(ctx, id, secret, isTrusted, Outcome{Status: StatusFailed}, CodeResponseTooLarge)
			if err == nil {
				writeError(w, http.StatusRequestEntityTooLarge, CodeResponseTooLarge,
					fmt.Sprintf("callback body is over the limit of %d bytes", maxCallbackBody))
				return
			}
		case err != nil:
			if aerr := c.authenticate(ctx, id, secret, isTrusted); aerr != nil {
				err = aerr
			}
		default:
			var rec Record
			rec, err = c.complete(ctx, id, secret, isTrusted, out, "")
			if err == nil {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, "{\"id\":%q,\"status\":%q}\n", rec.ID, rec.Status)
				return
			}
		}
		writeCallbackError(w, err)
	})
}

func writeCallbackError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		writeError(w, http.StatusUnauthorized, CodeUnauthenticated, "wrong callback token")
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "unknown delegation")
	case errors.Is(err, ErrFinal), errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, CodeConflict, message(err))
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, apierr.CodeInvalidArgument, message(err))
	case errors.Is(err, ErrClosed):
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the mesh is shutting down")
	default:
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
	}
}

// message is the message err describes itself with (one of this
// package's errors: safe to show).
func message(err error) string {
	_, msg, _ := apierr.Describe(err)
	return msg
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{msg, code})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// idFromPath extracts <id> from a path ending in /delegations/<id>/result.
func idFromPath(p string) string {
	p = strings.TrimSuffix(p, "/")
	rest, ok := strings.CutSuffix(p, "/result")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 || !strings.HasSuffix(rest[:i], "/delegations") {
		return ""
	}
	return rest[i+1:]
}

// decodeOutcome reads a callback body: one JSON object whose "status" is
// a string; "result" is any JSON value; "error" a string (another JSON
// value is kept as its JSON text). Unknown keys are ignored, so agents may
// send more than the contract asks. A body nested more than
// jsonlimit.MaxDepth deep is refused before it is decoded.
func decodeOutcome(r io.Reader) (Outcome, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return Outcome{}, err
	}
	var raw struct {
		Status           *string          `json:"status"`
		Result           json.RawMessage  `json:"result"`
		Error            *json.RawMessage `json:"error"`
		WorkflowComplete *bool            `json:"workflowComplete"`
		WorkflowState    map[string]any   `json:"workflowState"`
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return Outcome{}, apierr.Errorf(ErrInvalid, "the body must be a JSON object")
	}
	if jsonlimit.CheckDepth(body, jsonlimit.MaxDepth) != nil {
		return Outcome{}, apierr.Errorf(ErrInvalid, "the body nests arrays and objects more than %d deep", jsonlimit.MaxDepth)
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Outcome{}, apierr.Errorf(ErrInvalid, "the body is not valid JSON")
	}
	if raw.Status == nil {
		return Outcome{}, apierr.Errorf(ErrInvalid, "status is required")
	}
	out := Outcome{Status: Status(*raw.Status)}
	if out.Status != StatusCompleted && out.Status != StatusFailed {
		return Outcome{}, apierr.Errorf(ErrInvalid, "status must be %q or %q", StatusCompleted, StatusFailed)
	}
	if len(raw.Result) > 0 && !bytes.Equal(raw.Result, []byte("null")) {
		out.Result = raw.Result
	}
	out.WorkflowComplete = raw.WorkflowComplete != nil && *raw.WorkflowComplete
	out.WorkflowState = raw.WorkflowState
	if raw.Error != nil {
		var s string
		if json.Unmarshal(*raw.Error, &s) == nil {
			out.Error = s
		} else if !bytes.Equal(*raw.Error, []byte("null")) {
			out.Error = string(*raw.Error)
		}
	}
	if !utf8.ValidString(out.Error) {
		out.Error = strings.ToValidUTF8(out.Error, "\uFFFD")
	}
	return out, nil
}

// taskHash is the first 8 bytes of the task's SHA-256, in hex: what the
// logs carry instead of the task text.
func taskHash(task string) string {
	h := sha256.Sum256([]byte(task))
	return hex.EncodeToString(h[:8])
}
