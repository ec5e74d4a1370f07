// Command customserver builds an agentmesh HTTP server on agentmesh.Open
// with a Store of its own (memstore, logging every write) and a transport
// hook (the http transport, logging every call to an agent).
// The token is $MESH_TOKEN, else generated; -smoke registers, discovers and
// delegates through the server's own API, then exits.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// loggingStore is a registry.Store and a delegation.Store: memstore, logging writes.
type loggingStore struct{ *memstore.Store }

func (s loggingStore) UpdateAgent(ctx context.Context, name string, fn func(*registry.Agent) (*registry.Agent, error)) error {
	log.Printf("store: write agent %s", name)
	return s.Store.UpdateAgent(ctx, name, fn)
}

func (s loggingStore) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	for _, r := range recs {
		log.Printf("store: write delegation %s to %s: %s", r.ID, r.TargetAgent, r.Status)
	}
	return s.Store.PutDelegations(ctx, recs)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	smoke := flag.Bool("smoke", false, "register an agent, discover it and delegate to it through this server's API, then exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, *smoke); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr string, smoke bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	stock := delegation.NewHTTPTransport(nil) // nil client: no endpoint policy at dial time
	logged := func(ctx context.Context, a registry.Agent, m delegation.Message) (delegation.Reply, error) {
		start := time.Now()
		reply, err := stock.Send(ctx, a, m)
		log.Printf("transport: %s %s took %v, err %v", a.Name, a.Endpoint, time.Since(start).Round(time.Microsecond), err)
		return reply, err
	}
	store := loggingStore{memstore.New()}
	defer store.Close() // Open leaves a store of the caller's to the caller
	mesh, err := agentmesh.Open(ctx, &agentmesh.Options{
		Store:      store,
		PublicURL:  base, // async callbacks come back here
		Transports: map[registry.Protocol]delegation.Transport{registry.ProtocolHTTP: delegation.TransportFunc(logged)},
		// A nil Policy: loopback agents allowed.
	})
	if err != nil {
		return err
	}
	defer mesh.Close()
	token := os.Getenv("MESH_TOKEN")
	if token == "" {
		token = httpserver.GenerateToken()
		log.Printf("no MESH_TOKEN: generated the token %s", token)
	}
	api, err := httpserver.New(mesh.Registry(), mesh.Engine(), mesh.Delegation(), &httpserver.Options{Token: token})
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Shutdown(context.Background())
	log.Printf("serving on %s", base)
	if smoke {
		return smokeRound(ctx, base, token)
	}
	<-ctx.Done()
	return nil
}
