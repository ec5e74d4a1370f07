package delegation_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
)

// TestDecodeOutcomeDepth: a callback body nested more than 64 deep is
// refused before it is decoded; one at the limit is decoded.
func TestDecodeOutcomeDepth(t *testing.T) {
	nest := func(depth int) string {
		return strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat("}", depth)
	}
	_, err := delegation.DecodeOutcome(strings.NewReader(`{"status":"completed","result":` + nest(64) + `}`))
	require.ErrorIs(t, err, delegation.ErrInvalid)
	assert.Contains(t, err.Error(), "more than 64 deep")

	out, err := delegation.DecodeOutcome(strings.NewReader(`{"status":"completed","workflowState":` + nest(63) + `}`))
	require.NoError(t, err)
	assert.NotNil(t, out.WorkflowState)
}
