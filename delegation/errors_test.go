package delegation_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
)

// The errors of the package describe themselves: the code Code reports and
// the text of Error without the "delegation: " prefix.
func TestErrorsDescribeThemselves(t *testing.T) {
	e := newEnv(t, &delegation.Options{Discovery: discovery.New(nil)})
	_, noTask := e.c.Delegate(context.Background(), delegation.Request{Target: "x"})
	_, noAgent := e.c.Delegate(context.Background(), delegation.Request{Target: "ghost", Task: "t"})
	_, noMatch := e.c.Delegate(context.Background(), delegation.Request{Query: "zzzqqq", Task: "t"})
	_, noRecord := e.c.Get(context.Background(), "nope")
	closed := &delegation.TransportError{Code: delegation.CodeCanceled, Message: "mcp transport closed", Err: delegation.ErrClosed}
	for _, tc := range []struct {
		name          string
		err           error
		code, message string
	}{
		{"sentinel", delegation.ErrFinal, "conflict", "already final"},
		{"closed", fmt.Errorf("store: %w", delegation.ErrClosed), "unavailable", "closed"},
		{"detail", noTask, "invalid_argument", "invalid request: task is required"},
		// The detail says it all: the sentinel's words do not lead it.
		{"detail with a name", noAgent, "not_found", `no agent named "ghost" is registered`},
		{"no match", noMatch, "no_match", `no agent matches "zzzqqq"`},
		{"no record", noRecord, "not_found", `no delegation with id "nope"`},
		{"transport", &delegation.TransportError{Code: "agent_error", Status: 500, Message: "agent returned 500: boom"},
			"agent_error", "agent returned 500: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, ok := apierr.Describe(tc.err)
			require.True(t, ok)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.message, msg)
			assert.Equal(t, tc.code, delegation.Code(tc.err))
		})
	}
	// Code keeps to this package: a closed transport's error is the
	// client's unavailable, and a context's error or another package's
	// has no code here.
	assert.Equal(t, "unavailable", delegation.Code(closed))
	assert.Empty(t, delegation.Code(context.Canceled))
	assert.Empty(t, delegation.Code(apierr.New("other", "not_found", "not found")))
	assert.Empty(t, delegation.Code(errors.New("delegation: not found")))
}

// A query the discovery engine refuses is ErrInvalid described with the
// engine's words, and still matches the engine's error.
func TestInvalidQueryKeepsItsCause(t *testing.T) {
	e := newEnv(t, &delegation.Options{Discovery: refusingSearcher{}})
	_, err := e.c.Delegate(context.Background(), delegation.Request{Query: "q", Task: "t"})
	require.ErrorIs(t, err, delegation.ErrInvalid)
	require.ErrorIs(t, err, discovery.ErrInvalidQuery)
	assert.Equal(t, "invalid_argument", delegation.Code(err))
	assert.Equal(t, "invalid_argument", discovery.Code(err))
	code, msg, _ := apierr.Describe(err)
	assert.Equal(t, "invalid_argument", code)
	assert.Equal(t, "invalid request: discovery: invalid query: too long", msg)
	assert.Equal(t, "delegation: "+msg, err.Error())
}

// refusingSearcher refuses every query.
type refusingSearcher struct{}

func (refusingSearcher) Search(string, *discovery.Query) ([]discovery.Result, error) {
	return nil, fmt.Errorf("%w: too long", discovery.ErrInvalidQuery)
}
