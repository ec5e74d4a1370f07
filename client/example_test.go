package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// Example registers an agent with a running mesh, discovers it and
// delegates a task to it, all through the HTTP API. The mesh (registry,
// discovery engine, delegation client and HTTP server) and the agent run
// in the example, each on its own httptest listener.
func Example() {
	ctx := context.Background()

	// The agent: answers POST /task with {"result": …}.
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var t struct{ Task string }
		_ = json.NewDecoder(r.Body).Decode(&t)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": "budget of Engineering: 1.2M (asked: " + t.Task + ")"})
	}))
	defer agent.Close()

	// The mesh, as agentmesh serve wires it (in memory).
	stop, url := startMesh(ctx, "example-token")
	defer stop()

	// The client.
	c, err := client.New(url, &client.Options{Token: "example-token"})
	if err != nil {
		log.Fatal(err)
	}
	_, created, err := c.Register(ctx, registry.Agent{
		Name:         "finance",
		Description:  "Budgets and cost centers of every department.",
		Capabilities: []string{"budget", "cost centers"},
		Endpoint:     agent.URL + "/task",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("registered finance, new:", created)

	results, err := c.Search(ctx, "budget for engineering", &discovery.Query{Limit: 3})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Println("discovered", r.Agent.Name, "matching", r.MatchedTerms)
	}

	rec, err := c.Delegate(ctx, delegation.Request{Target: results[0].Agent.Name, Task: "Budget of Engineering?"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("delegation", rec.Status+":", string(rec.Result))

	_, err = c.Delegate(ctx, delegation.Request{Target: "payroll", Task: "Salaries?"})
	fmt.Println("payroll is unknown:", errors.Is(err, delegation.ErrNotFound))
	// Output:
	// registered finance, new: true
	// discovered finance matching [budget]
	// delegation completed: "budget of Engineering: 1.2M (asked: Budget of Engineering?)"
	// payroll is unknown: true
}

// startMesh serves a mesh over memstore on a local listener and returns
// a function that stops it, and its URL.
func startMesh(ctx context.Context, token string) (stop func(), url string) {
	store := memstore.New()
	reg, err := registry.New(ctx, store, nil) // nil Policy: loopback agents allowed
	if err != nil {
		log.Fatal(err)
	}
	engine := discovery.New(nil)
	unfollow := engine.Follow(reg)
	ts := httptest.NewUnstartedServer(nil) // listening; its URL is needed before the handler
	url = "http://" + ts.Listener.Addr().String()
	del, err := delegation.New(ctx, reg, store, &delegation.Options{Discovery: engine, PublicURL: url})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := httpserver.New(reg, engine, del, &httpserver.Options{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	ts.Config.Handler = srv
	ts.Start()
	return func() {
		ts.Close()
		_ = del.Close()
		unfollow()
		_ = reg.Close()
		_ = store.Close()
	}, url
}
