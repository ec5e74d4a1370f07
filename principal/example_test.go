package principal_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/principal"
)

// A front-end attaches the authenticated caller to the request's context;
// the core packages ask whether it may act on a record's owner.
func Example() {
	ctx := principal.NewContext(context.Background(), principal.Principal{Name: "team-a"})
	fmt.Println(principal.Allowed(ctx, "team-a"))
	fmt.Println(principal.Allowed(ctx, "team-b"))
	fmt.Println(principal.Allowed(ctx, "")) // owner-less records are default's

	admin := principal.NewContext(context.Background(), principal.Principal{Name: "ops", Admin: true})
	fmt.Println(principal.Allowed(admin, "team-b"))

	// No principal: the mesh itself, or a library caller without auth.
	fmt.Println(principal.Allowed(context.Background(), "team-b"))
	// Output:
	// true
	// false
	// false
	// true
	// true
}
