// Package jsonvalue deep-copies values of the shape encoding/json decodes
// into an any: maps of string to any, slices of any, and immutable scalars
// (strings, numbers, booleans, nil). Records that carry caller-supplied
// JSON (session workflow state, delegation responses) are copied with it
// so that stores and callers never share a mutable map.
//
// It also writes JSON strings byte for byte as encoding/json does
// ([AppendString]), for the encoders that build a response by appending
// (discovery's results, the MCP stdio transport's frames).
package jsonvalue

import (
	"maps"
	"slices"
)

// CloneMap deep-copies m, keeping nil apart from empty.
func CloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	m = maps.Clone(m)
	for k, v := range m {
		m[k] = Clone(v)
	}
	return m
}

// Clone deep-copies the maps and slices of v, at every depth, keeping nil
// apart from empty; other values are returned as they are.
func Clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return CloneMap(v)
	case []any:
		if v == nil {
			return v
		}
		s := slices.Clone(v)
		for i, e := range s {
			s[i] = Clone(e)
		}
		return s
	}
	return v
}
