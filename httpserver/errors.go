package httpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

// Error codes of this package's own error responses. Errors of the
// library packages carry their codes themselves ([apierr.Describe]).
const (
	CodeMethodNotAllowed     = "method_not_allowed"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeRateLimited          = "rate_limited"
	CodeReloadFailed         = "reload_failed"
)

// Shared codes, for hosts that answer with [WriteError]: the same values
// as the library's errors carry.
const (
	CodePermissionDenied = apierr.CodePermissionDenied
	CodeNotFound         = apierr.CodeNotFound
	CodeConflict         = apierr.CodeConflict
	CodeUnavailable      = apierr.CodeUnavailable
)

// statusOf is the HTTP status of each code an error of the library
// carries. A described error whose code is not here (a delegation
// transport failure, say) is as internal as an undescribed one: a 500.
var statusOf = map[string]int{
	apierr.CodeInvalidArgument: http.StatusBadRequest,
	// The agent card of an import could not be fetched: the mesh's
	// upstream failed.
	a2acard.CodeCardFetchFailed:       http.StatusBadGateway,
	registry.CodeEndpointNotAllowed:   http.StatusBadRequest,
	apierr.CodeUnauthenticated:        http.StatusUnauthorized,
	apierr.CodePermissionDenied:       http.StatusForbidden,
	delegation.CodeResourceNotCovered: http.StatusForbidden,
	apierr.CodeNotFound:               http.StatusNotFound,
	delegation.CodeNoMatch:            http.StatusNotFound,
	apierr.CodeConflict:               http.StatusConflict,
	registry.CodeManagedByFile:        http.StatusConflict,
	// Depth and cycle refusals: the request is well-formed, and the mesh
	// refuses what it asks for.
	delegation.CodeDepthExceeded:   http.StatusUnprocessableEntity,
	delegation.CodeDelegationCycle: http.StatusUnprocessableEntity,
	apierr.CodeUnavailable:         http.StatusServiceUnavailable,
	routing.CodeNoDefaultAgent:     http.StatusServiceUnavailable,
	// A request cut short is answered 503 unavailable (see describe).
	apierr.CodeCanceled: http.StatusServiceUnavailable,
	apierr.CodeTimeout:  http.StatusServiceUnavailable,
}

// describe turns an error of the library into a response: the code and
// message the error describes itself with ([apierr.Describe]), the status
// of statusOf, and the details of its field errors. Anything else is a
// 500 whose cause is logged.
func describe(err error) *apiError {
	code, msg, ok := apierr.Describe(err)
	status, known := statusOf[code]
	if !ok || !known {
		return internal(err)
	}
	if code == apierr.CodeCanceled || code == apierr.CodeTimeout {
		// The API has no codes of its own for these: a request cut short
		// is unavailable, which clients retry.
		code, msg = apierr.CodeUnavailable, "the request was cancelled"
	}
	return &apiError{status: status, code: code, msg: msg, details: details(err), cause: err}
}

// FieldProblem is one entry of the details of a validation error:
// {"fields": [{"field", "rule", "code"}]}.
type FieldProblem struct {
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Code  string `json:"code"`
}

// details are the details of an error response for err: every field of
// an agent record at fault, or the one request field a query error names.
func details(err error) any {
	if fes := registry.FieldErrors(err); len(fes) > 0 {
		problems := make([]FieldProblem, len(fes))
		for i, f := range fes {
			problems[i] = FieldProblem{Field: f.Field, Rule: f.Rule, Code: f.Code()}
		}
		return map[string]any{"fields": problems}
	}
	switch {
	case errors.Is(err, discovery.ErrEmptyQuery):
		return map[string]string{"field": "query"}
	case errors.Is(err, registry.ErrBadCursor):
		return map[string]string{"field": "cursor"}
	}
	return nil
}

// ErrorResponse is the JSON body of every error response:
// {"error": "<human message>", "code": "<machine code>", "details"?: …}.
// Clients decode it to branch on Code.
type ErrorResponse struct {
	Error   string `json:"error"`
	Code    string `json:"code"`
	Details any    `json:"details,omitempty"`
}

// apiError is an error on its way to becoming an error response.
type apiError struct {
	status  int
	code    string
	msg     string
	details any
	// cause is logged for 5xx responses and never sent.
	cause error
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, apierr.CodeInvalidArgument, format, args...)
}

// fieldError is a 400 invalid_argument naming the offending field.
func fieldError(field, format string, args ...any) *apiError {
	e := badRequest(format, args...)
	if field != "" {
		e.details = map[string]string{"field": field}
	}
	return e
}

// CodeForStatus is the error code of a response status, for errors that
// come with a status only: a plain-text error of a handler mounted on the
// server, or (in the client package) a reply without our JSON body, such
// as a proxy's 502.
func CodeForStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return apierr.CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusConflict:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodePayloadTooLarge
	case http.StatusUnsupportedMediaType:
		return CodeUnsupportedMediaType
	case http.StatusTooManyRequests:
		return CodeRateLimited
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return CodeUnavailable
	}
	if status >= 500 {
		return apierr.CodeInternal
	}
	return apierr.CodeInvalidArgument
}

func internal(cause error) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: apierr.CodeInternal, msg: "internal error", cause: cause}
}

// writeJSON encodes v once and writes it with status. Encoding failures are
// programming errors (every body type here encodes); they become a 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"internal error","code":"internal"}`)
		status = http.StatusInternalServerError
	}
	writeJSONBytes(w, status, append(b, '\n'))
}

// writeResult answers a handler's outcome: v as JSON with 200 or, when
// err is not nil, the error response toAPI makes of err (describe, or the
// route's own mapping such as agentError).
func (s *Server) writeResult(w *recorder, v any, err error, toAPI func(error) *apiError) {
	if err != nil {
		s.fail(w, toAPI(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// writeJSONBytes writes b, a JSON document, as the response.
func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// WriteError writes an [ErrorResponse] with status, code and msg, for a
// host that answers next to the server (another listener, a route of its
// own) in the same shape. msg must be safe to show.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg, Code: code})
}

// writeError writes e as an ErrorResponse. A 5xx never carries internal
// error text: its message is fixed and the details hold the request id,
// under which the cause is logged.
func writeError(w *recorder, e *apiError) {
	body := ErrorResponse{Error: e.msg, Code: e.code, Details: e.details}
	if e.status >= 500 {
		body.Details = map[string]string{"requestId": w.id}
		if e.status == http.StatusInternalServerError {
			body.Error = "internal error"
		}
	}
	writeJSON(w, e.status, body)
}
