package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/a2aserver"
	"github.com/agentmesh/agentmesh/httpserver"
)

// mountA2A serves the mesh as one A2A agent at /a2a (the endpoint its
// Agent Card names; docs/API.md#a2a), behind the HTTP server's authentication: any
// valid token reaches it, and each operation needs its scope (read to
// discover and read tasks, delegate to delegate and cancel). Tasks belong
// to the principal of the token that created them.
func mountA2A(srv *httpserver.Server, m *mesh, log *slog.Logger) error {
	h, err := a2aserver.New(m.searcher(), m.delegator(), &a2aserver.Options{
		Logger: log,
		Authorize: func(ctx context.Context, op string) error {
			id, ok := httpserver.IdentityFrom(ctx)
			if !ok {
				return errors.New("no authenticated caller")
			}
			scope := httpserver.Scope(a2aserver.RequiredScope(op))
			if scope != "" && !id.Has(scope) {
				m.obs.toolRefused(ctx, "a2a "+op, scope)
				return fmt.Errorf("token %q lacks the %s scope", id.Name, scope)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	return srv.Handle(a2acard.MeshEndpointPath, h, "")
}
