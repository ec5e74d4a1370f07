package main

import (
	"bytes"
	"log"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSmoke runs the -smoke round and checks that both hooks saw it: the
// store logged the writes and the transport logged the call to the agent.
func TestSmoke(t *testing.T) {
	var out bytes.Buffer
	log.SetOutput(&out)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	t.Setenv("MESH_TOKEN", "test-token")

	require.NoError(t, run(t.Context(), "127.0.0.1:0", true), out.String())
	for _, want := range []string{
		"serving on http://127.0.0.1:",
		"store: write agent echo",
		"transport: echo http://127.0.0.1:",
		"to echo: completed",
		`smoke: registered echo`,
	} {
		assert.Contains(t, out.String(), want)
	}
	assert.NotContains(t, out.String(), "test-token", "a token from MESH_TOKEN must not be logged")
}
