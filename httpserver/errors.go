package httpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error codes this package puts in the "code" field of its own error
// responses. Errors of the library packages keep their codes
// ([registry.Code], [discovery.Code], [delegation.Code]).
const (
	CodeInvalidArgument      = "invalid_argument"
	CodeUnauthenticated      = "unauthenticated"
	CodePermissionDenied     = "permission_denied"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeConflict             = "conflict"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeRateLimited          = "rate_limited"
	CodeReloadFailed         = "reload_failed"
	CodeInternal             = "internal"
	CodeUnavailable          = "unavailable"
)

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
	return errorf(http.StatusBadRequest, CodeInvalidArgument, format, args...)
}

// fieldError is a 400 invalid_argument naming the offending field.
func fieldError(field, format string, args ...any) *apiError {
	e := badRequest(format, args...)
	if field != "" {
		e.details = map[string]string{"field": field}
	}
	return e
}

// codeForStatus is the error code of a response status, for errors that
// come with a status only.
func codeForStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return CodeUnauthenticated
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
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	if status >= 500 {
		return CodeInternal
	}
	return CodeInvalidArgument
}

func internal(cause error) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: CodeInternal, msg: "internal error", cause: cause}
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
