package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/apierr"
)

// CodeUnavailable is the code of a tool that cannot run now, for hosts'
// errors: the same value as the library's errors carry.
const CodeUnavailable = apierr.CodeUnavailable

// toolError is a failure of a tool of this package, on its way to
// becoming an isError result whose text is "<code>: <message>". It
// describes itself ([apierr.Described]), as the library's errors do.
type toolError struct {
	code string
	msg  string
}

func (e *toolError) Error() string { return e.code + ": " + e.msg }

// Describe returns the code and the message.
func (e *toolError) Describe() (code, message string) { return e.code, e.msg }

func invalidArg(format string, args ...any) *toolError {
	return &toolError{code: apierr.CodeInvalidArgument, msg: fmt.Sprintf(format, args...)}
}

// errInternal is the tool error of a failure no error describes (a store
// failure, a bug): its text is logged, never shown.
var errInternal = &toolError{apierr.CodeInternal, "internal error (logged by the server)"}

// classify returns the tool error of err: its code and message as it
// describes itself ([apierr.Describe]), or errInternal. Every code is an
// isError result; there is no status to choose.
func classify(err error) (e *toolError, internal bool) {
	if code, msg, ok := apierr.Describe(err); ok && code != apierr.CodeInternal {
		return &toolError{code, msg}, false
	}
	return errInternal, true
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
