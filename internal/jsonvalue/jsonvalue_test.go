package jsonvalue

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCloneIsDeep(t *testing.T) {
	orig := map[string]any{
		"n": 1.5, "s": "x", "null": nil,
		"list":   []any{map[string]any{"k": "v"}, []any{"a"}},
		"nested": map[string]any{"inner": []any{1.0}},
		"empty":  map[string]any{}, "nilmap": map[string]any(nil), "nillist": []any(nil),
	}
	c := CloneMap(orig)
	assert.Equal(t, orig, c)
	c["list"].([]any)[0].(map[string]any)["k"] = "changed"
	c["list"].([]any)[1].([]any)[0] = "changed"
	c["nested"].(map[string]any)["inner"].([]any)[0] = 2.0
	c["empty"].(map[string]any)["new"] = true
	assert.Equal(t, "v", orig["list"].([]any)[0].(map[string]any)["k"])
	assert.Equal(t, "a", orig["list"].([]any)[1].([]any)[0])
	assert.Equal(t, 1.0, orig["nested"].(map[string]any)["inner"].([]any)[0])
	assert.Empty(t, orig["empty"])
	assert.Nil(t, c["nilmap"].(map[string]any), "nil stays nil")
	assert.Nil(t, c["nillist"].([]any))
	assert.NotNil(t, c["empty"].(map[string]any), "empty stays empty")
	assert.Nil(t, CloneMap(nil))
}
