package storetest

// Options tells the suite about the store under test. A nil *Options means
// the zero value: every field at its documented default.
type Options struct {
	// ErrClosed is the store's closed sentinel. When set and the store has a
	// Close() error method, the suite checks that calls after Close fail with
	// an error wrapping it. When nil, the suite checks only that they fail.
	ErrClosed error
}

// closer is the optional Close method of a store.
type closer interface{ Close() error }

// nilIfEmpty returns nil for an empty slice, so nil and empty compare equal.
func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

// nilIfEmptyMap returns nil for an empty map, so nil and empty compare equal.
func nilIfEmptyMap[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}
