package agentkit_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// meshToken is the token of the test meshes (every scope).
const meshToken = "mesh-token-7f3a9c21"

// startMesh serves a mesh over memstore, as agentmesh serve wires it
// (registry, discovery, delegation with callbacks, the HTTP API), on a
// local listener, and returns its URL. Everything stops when the test
// ends.
func startMesh(tb testing.TB) (url string) {
	tb.Helper()
	ctx := context.Background()
	store := memstore.New()
	tb.Cleanup(func() { _ = store.Close() })
	reg, err := registry.New(ctx, store, nil) // nil Policy: loopback agents allowed
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = reg.Close() })
	engine := discovery.New(nil)
	tb.Cleanup(engine.Follow(reg))
	ts := httptest.NewUnstartedServer(nil)
	url = "http://" + ts.Listener.Addr().String()
	del, err := delegation.New(ctx, reg, store, &delegation.Options{Discovery: engine, PublicURL: url,
		WaitPollInterval: 20 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = del.Close() })
	srv, err := httpserver.New(reg, engine, del, &httpserver.Options{Token: meshToken})
	if err != nil {
		tb.Fatal(err)
	}
	ts.Config.Handler = srv
	ts.Start()
	tb.Cleanup(ts.Close)
	return url
}

// meshClient is a client of the mesh at url with meshToken.
func meshClient(tb testing.TB, url string) *client.Client {
	tb.Helper()
	c, err := client.New(url, &client.Options{Token: meshToken})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// waitFor polls cond every 20 ms until it is true, failing the test
// after timeout.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delegate is mesh.Delegate, retried while the mesh does not know the
// target yet: its delegation client follows the registry a moment after
// a registration.
func delegate(tb testing.TB, mesh *client.Client, req delegation.Request) delegation.Record {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := mesh.Delegate(context.Background(), req)
		switch {
		case err == nil:
			return rec
		case !errors.Is(err, delegation.ErrNotFound) || time.Now().After(deadline):
			tb.Fatalf("delegate %q to %s: %v", req.Task, req.Target, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
