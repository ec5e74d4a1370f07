package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
)

// mesh_discover and mesh_delegate by query refuse a query longer than
// discovery.MaxQueryRunes characters with invalid_argument (their input
// schemas say so), the bound the HTTP API has; one at the limit is
// searched.
func TestDiscoveryQueryLengthLimit(t *testing.T) {
	e := newEnv(t, nil)
	e.register("finance", "Budgets and cost centers.", "budget")
	atLimit := "budget" + strings.Repeat(" ", discovery.MaxQueryRunes-len("budget"))

	var out mcpserver.DiscoverResult
	ok(t, e.call("mesh_discover", map[string]any{"query": atLimit}), &out)
	if assert.Len(t, out.Results, 1) {
		assert.Equal(t, "finance", out.Results[0].Agent.Name)
	}

	for _, tool := range []string{"mesh_discover", "mesh_delegate"} {
		args := map[string]any{"query": atLimit + "x"}
		if tool == "mesh_delegate" {
			args["task"] = "t"
		}
		txt := fails(t, e.call(tool, args), "invalid_argument")
		assert.Contains(t, txt, "more than 10000", tool) // the input schema's maxLength
	}
}
