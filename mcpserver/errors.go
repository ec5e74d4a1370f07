package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// Error codes this package puts at the start of error results, besides the
// codes of the library packages (registry.Code, discovery.Code,
// delegation.Code, and the Code of a failed delegation record).
const (
	CodeInvalidArgument  = "invalid_argument"
	CodePermissionDenied = "permission_denied"
	CodeUnavailable      = "unavailable"
	CodeCanceled         = "canceled"
	CodeTimeout          = "timeout"
	CodeInternal         = "internal"
)

// toolError is a domain failure on its way to becoming an isError result
// whose text is "<code>: <message>".
type toolError struct {
	code string
	msg  string
}

func (e *toolError) Error() string { return e.code + ": " + e.msg }

func invalidArg(format string, args ...any) *toolError {
	return &toolError{code: CodeInvalidArgument, msg: fmt.Sprintf(format, args...)}
}

// classify maps an error of the library packages to a tool error with its
// SPEC code and a message safe to show. An error no package claims (a
// store failure, a bug) becomes code internal with a fixed message; its
// text is logged by the caller, never shown.
func classify(err error) (e *toolError, internal bool) {
	var te *toolError
	if errors.As(err, &te) {
		return te, false
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &toolError{CodeCanceled, "the request was canceled"}, false
	case errors.Is(err, context.DeadlineExceeded):
		return &toolError{CodeTimeout, "the request timed out"}, false
	case errors.Is(err, registry.ErrClosed), errors.Is(err, delegation.ErrClosed):
		return &toolError{CodeUnavailable, "the mesh is shutting down; try again later"}, false
	case errors.Is(err, registry.ErrBadCursor):
		return invalidArg("cursor: not a cursor this server issued; start again without one"), false
	}
	if msg, ok := fieldErrors(err); ok {
		return &toolError{registry.Code(err), msg}, false
	}
	// An error that carries its own code (another mesh's reply, as the
	// client package reports it) keeps that code and its message.
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && coded.ErrorCode() != "" {
		return &toolError{coded.ErrorCode(), err.Error()}, false
	}
	if code := registry.Code(err); code != "" {
		return &toolError{code, trimPrefix(err)}, false
	}
	if code := discovery.Code(err); code != "" {
		return &toolError{code, "query: " + trimPrefix(err)}, false
	}
	if code := delegation.Code(err); code != "" {
		return &toolError{code, trimPrefix(err)}, false
	}
	return &toolError{CodeInternal, "internal error (logged by the server)"}, true
}

// fieldErrors joins the messages of every registry.FieldError in err, so a
// registration reports all its problems at once.
func fieldErrors(err error) (string, bool) {
	var msgs []string
	var collect func(error)
	collect = func(err error) {
		switch x := err.(type) {
		case *registry.FieldError:
			msgs = append(msgs, x.Field+": "+x.Rule)
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				collect(e)
			}
		default:
			if u := errors.Unwrap(err); u != nil {
				collect(u)
			}
		}
	}
	collect(err)
	if len(msgs) == 0 {
		return "", false
	}
	return strings.Join(msgs, "; "), true
}

// trimPrefix returns err's text without the "<package>: " prefix of the
// library's sentinel errors, which means nothing to a model.
func trimPrefix(err error) string {
	msg := err.Error()
	for _, p := range []string{"registry: ", "discovery: ", "delegation: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// delegationFailure is the isError result of a delegation that ran and did
// not complete: its text starts with the record's code, then the JSON of
// the record, so a model can act on it; its structured content is the
// record, which validates against the tool's output schema.
func delegationFailure(rec delegation.Record, out any) *mcp.CallToolResult {
	code, msg := rec.Failure()
	b, _ := json.Marshal(out)
	text := fmt.Sprintf("%s: delegation %s to %q %s: %s\n%s", code, rec.ID, rec.TargetAgent, rec.Status, msg, b)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
