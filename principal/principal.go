package principal

import "context"

// Default is the principal of records that name none (written before the
// mesh knew principals, or by a caller without one), and of the single
// all-scope token (MESH_TOKEN).
const Default = "default"

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the principal; several credentials may share it
	// (a token and its successor, during a rotation). Empty means
	// [Default].
	Name string
	// Admin is true for a caller that may act on every principal's
	// records.
	Admin bool
}

// Owns reports whether p may act on what owner owns: p is an admin, or
// owner is p's name. An empty owner is [Default], as is an empty name.
func (p Principal) Owns(owner string) bool {
	return p.Admin || Of(p.Name) == Of(owner)
}

// Of returns the principal an owner field names: owner, or [Default]
// when it is empty.
func Of(owner string) string {
	if owner == "" {
		return Default
	}
	return owner
}

type contextKey struct{}

// NewContext returns a copy of ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, contextKey{}, p)
}

// FromContext returns the principal ctx carries; ok is false when it
// carries none (the caller is not restricted).
func FromContext(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(contextKey{}).(Principal)
	return p, ok
}

// Allowed reports whether the caller ctx carries may act on what owner
// owns: true when ctx carries no principal, else [Principal.Owns].
func Allowed(ctx context.Context, owner string) bool {
	p, ok := FromContext(ctx)
	return !ok || p.Owns(owner)
}

// Filter returns the principal whose records a listing for ctx's caller
// may show: "" (every principal's) for a caller without a principal and
// for an admin, else the caller's name ([Default] when it is empty).
func Filter(ctx context.Context) string {
	p, ok := FromContext(ctx)
	if !ok || p.Admin {
		return ""
	}
	return Of(p.Name)
}
