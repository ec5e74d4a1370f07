package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
)

// TestTooManyItems: the limits MaxItems gives are the ones Validate
// applies, and TooManyItems is the error Validate returns for a field
// over one, word for word.
func TestTooManyItems(t *testing.T) {
	for field, over := range map[string]func(a *registry.Agent, n int){
		"capabilities": func(a *registry.Agent, n int) { a.Capabilities = make([]string, n) },
		"examples":     func(a *registry.Agent, n int) { a.Examples = make([]string, n) },
		"resources":    func(a *registry.Agent, n int) { a.Resources = make([]registry.Resource, n) },
		"labels": func(a *registry.Agent, n int) {
			a.Labels = map[string]string{}
			for i := range n {
				a.Labels["k"+strings.Repeat("a", i%60)+string(rune('a'+i/60))] = "v"
			}
		},
	} {
		max, ok := registry.MaxItems(field)
		require.True(t, ok, field)
		a := registry.Agent{Name: "a", Description: "d", Endpoint: "https://agents.example.com/task"}
		over(&a, max+1)
		a.Normalize()
		var want *registry.FieldError
		require.ErrorAs(t, registry.TooManyItems(field, max+1), &want)
		found := false
		for _, fe := range registry.FieldErrors(a.Validate(nil)) {
			if fe.Field == field && fe.Rule == want.Rule {
				found = true
			}
		}
		assert.True(t, found, "%s: Validate says %v, TooManyItems %v", field, a.Validate(nil), want)
		assert.True(t, errors.Is(want, registry.ErrInvalid), field)
	}
	_, ok := registry.MaxItems("name")
	assert.False(t, ok)
}
