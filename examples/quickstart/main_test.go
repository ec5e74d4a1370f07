package main

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuickstart runs the whole tour: run fails on any outcome other than
// the expected one, so this covers every step the transcript shows.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), &out, slog.New(slog.DiscardHandler))
	require.NoError(t, err, "transcript so far:\n%s", out.String())
	for _, want := range []string{
		"401 unauthenticated",
		"201 finance",
		"1. helpdesk",
		"completed after the callback",
		"workflow_complete true",
		"422 depth_exceeded",
		"422 delegation_cycle",
		"#6 failed agent_unavailable",
		"breaker inventory open",
		"tools/call mesh_delegate",
		"password-reset    source file",
		"decision route, agent_id billing, reason confidence",
		"decision route, agent_id billing, reason session",
		"→ completed, 4 turns, agent billing",
		"decision clarify, reason low_confidence",
		"clarification_question: ",
		"decision route, agent_id password-reset, reason confidence",
		"decision fallback, agent_id general-assistant, reason low_confidence",
		"all checks passed",
	} {
		assert.Contains(t, out.String(), want)
	}
}
