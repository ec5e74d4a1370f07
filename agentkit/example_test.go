package agentkit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/agentkit"
	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// Example runs an agent against a mesh: Run registers it, the mesh
// delegates a task to it (sending the agent's token), and when Run's ctx
// ends the agent is unregistered.
func Example() {
	meshURL := startMesh(exampleTB{})
	mesh, err := client.New(meshURL, &client.Options{Token: meshToken})
	if err != nil {
		log.Fatal(err)
	}

	agent, err := agentkit.New(func(ctx context.Context, t agentkit.Task) (agentkit.Reply, error) {
		return agentkit.Reply{Result: fmt.Sprintf("%s (%d words)", strings.ToUpper(t.Task), len(strings.Fields(t.Task)))}, nil
	}, &agentkit.Options{Token: "agent-secret"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- agent.Run(ctx, "127.0.0.1:0", mesh, registry.Agent{
			Name:         "shout",
			Description:  "Shouts the task back and counts its words.",
			Capabilities: []string{"shout", "word count"},
			TTLSeconds:   30,
		})
	}()
	// Run registers the agent once it listens; the mesh delegates to it
	// a moment after that.
	var rec delegation.Record
	for {
		rec, err = mesh.Delegate(context.Background(), delegation.Request{Target: "shout", Task: "hello there mesh"})
		if !errors.Is(err, delegation.ErrNotFound) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Status, string(rec.Result))

	stop()
	fmt.Println("run:", <-ran)
	_, err = mesh.Agent(context.Background(), "shout")
	fmt.Println("unregistered:", errors.Is(err, registry.ErrNotFound))
	// Output:
	// completed "HELLO THERE MESH (3 words)"
	// run: <nil>
	// unregistered: true
}

// exampleTB is the testing.TB of startMesh in an Example: failures are
// fatal, and the mesh lives until the test binary exits.
type exampleTB struct{ testing.TB }

func (exampleTB) Helper()                           {}
func (exampleTB) Cleanup(func())                    {}
func (exampleTB) Fatal(args ...any)                 { log.Fatal(args...) }
func (exampleTB) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
