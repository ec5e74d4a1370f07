package registry_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
)

func TestFieldErrorsDescribeTheRecord(t *testing.T) {
	a := registry.Agent{Name: "-bad", Endpoint: "ftp://x.example.com", TTLSeconds: 3}
	a.Normalize()
	err := fmt.Errorf("importing: %w", a.Validate(nil))

	fes := registry.FieldErrors(err)
	var fields []string
	for _, fe := range fes {
		fields = append(fields, fe.Field)
	}
	assert.Equal(t, []string{"name", "description", "endpoint", "ttlSeconds"}, fields, "every field error, in field order")

	code, msg, ok := apierr.Describe(err)
	require.True(t, ok)
	assert.Equal(t, apierr.CodeInvalidArgument, code, "the code of the first field error")
	assert.Equal(t, fes[0].Error()+"; "+fes[1].Error()+"; "+fes[2].Error()+"; "+fes[3].Error(), msg)
	assert.Equal(t, registry.CodeEndpointNotAllowed, apierr.Code(fes[2]))
	assert.True(t, errors.Is(err, registry.ErrInvalid))
	assert.True(t, errors.Is(err, registry.ErrEndpointNotAllowed))

	assert.Nil(t, registry.FieldErrors(registry.ErrNotFound))
	assert.Nil(t, registry.FieldErrors(nil))
}

func TestSentinelsDescribeThemselves(t *testing.T) {
	for _, tc := range []struct {
		err           error
		text          string
		code, message string
	}{
		{registry.ErrNotFound, "registry: agent not found", "not_found", "agent not found"},
		{registry.ErrManagedByFile, "registry: agent is managed by the agent directory", "managed_by_file", "agent is managed by the agent directory"},
		{registry.ErrDefaultConflict, "registry: another agent is already the default", "conflict", "another agent is already the default"},
		{registry.ErrBadCursor, "registry: invalid cursor", "invalid_argument", "invalid cursor"},
		{registry.ErrClosed, "registry: closed", "unavailable", "closed"},
	} {
		code, msg, ok := apierr.Describe(fmt.Errorf("op: %w", tc.err))
		assert.True(t, ok, tc.text)
		assert.Equal(t, tc.text, tc.err.Error())
		assert.Equal(t, tc.code, code, tc.text)
		assert.Equal(t, tc.message, msg, tc.text)
		assert.Equal(t, tc.code, registry.Code(tc.err), tc.text)
	}
	assert.Empty(t, registry.Code(errors.New("disk on fire")))
}
