// Command agents-go is a complete agent written with package agentkit:
// it registers with a mesh, keeps its TTL alive, answers each task with
// the task upper-cased and its word count, refuses calls without its
// token, and unregisters on SIGINT or SIGTERM. examples/agents-python
// and examples/agents-typescript are the same agent in those languages;
// cmd/agentmesh's TestExampleAgents runs all three against agentmesh
// serve. docs/AGENTS.md is the contract.
//
//	MESH_URL=http://localhost:8766 MESH_TOKEN=… AGENT_TOKEN=… go run ./examples/agents-go
//
// The environment: MESH_URL (default http://localhost:8766), MESH_TOKEN
// (the mesh token it registers with), AGENT_NAME (shout-go), AGENT_ADDR
// (localhost:9201; port 0 picks one), AGENT_ENDPOINT (the URL the mesh
// calls; default http://<AGENT_ADDR>/task), AGENT_TOKEN (the bearer token
// the mesh must send; empty accepts any call), AGENT_TTL (seconds, 15)
// and AGENT_ASYNC=1 (answer 202 and call back).
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentmesh/agentmesh/agentkit"
	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/registry"
)

// shout is the agent: what it computes from the task.
func shout(_ context.Context, t agentkit.Task) (agentkit.Reply, error) {
	return agentkit.Reply{Result: fmt.Sprintf("%s (%d words, go)", strings.ToUpper(t.Task), len(strings.Fields(t.Task)))}, nil
}

func main() {
	ttl, err := strconv.Atoi(env("AGENT_TTL", "15"))
	if err != nil {
		log.Fatalf("AGENT_TTL: %v", err)
	}
	mesh, err := client.New(env("MESH_URL", "http://localhost:8766"), &client.Options{Token: os.Getenv("MESH_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	agent, err := agentkit.New(shout, &agentkit.Options{
		Token:  os.Getenv("AGENT_TOKEN"),
		Async:  os.Getenv("AGENT_ASYNC") == "1",
		Logger: slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = agent.Run(ctx, env("AGENT_ADDR", "localhost:9201"), mesh, registry.Agent{
		Name:         env("AGENT_NAME", "shout-go"),
		Description:  "Shouts the task back, upper-cased, with its word count.",
		Capabilities: []string{"shout", "uppercase", "word count"},
		Examples:     []string{"shout this please", "how many words is this"},
		Endpoint:     os.Getenv("AGENT_ENDPOINT"),
		TTLSeconds:   ttl,
	})
	if err != nil {
		log.Fatal(err)
	}
}

// env is the environment variable k, or def when it is unset or empty.
func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
