package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoggerRedacts checks that both log formats mask personal data and
// bearer tokens (docs/OPERATIONS.md#logs).
func TestLoggerRedacts(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, "info", format, "json")
		require.NoError(t, err)
		log.Info("agent ops@example.com failed", "error", "header Bearer abc.def", "card", "4111-1111-1111-1111")
		out := buf.String()
		assert.NotContains(t, out, "ops@example.com", format)
		assert.NotContains(t, out, "abc.def", format)
		assert.NotContains(t, out, "4111", format)
		assert.Contains(t, out, "[email]", format)
	}
	_, err := newLogger(&bytes.Buffer{}, "info", "xml", "json")
	assert.ErrorContains(t, err, "--log-format")
	_, err = newLogger(&bytes.Buffer{}, "loud", "json", "json")
	assert.ErrorContains(t, err, "--log-level")
}
