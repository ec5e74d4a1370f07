package a2aserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/a2aserver"
	"github.com/agentmesh/agentmesh/registry"
)

// An A2A client, built from the mesh's Agent Card, uses the whole mesh as
// one agent: a message is delegated to the best-matching agent, the
// mesh.discover skill lists the agents, and a refused delegation is a
// failed task with its code. A real host mounts the handler behind its
// authentication, as `agentmesh serve` does.
func Example() {
	ctx := context.Background()
	m, err := agentmesh.Open(ctx, nil) // registry, discovery and delegation in memory
	if err != nil {
		panic(err)
	}
	defer m.Close()
	reg, engine, del := m.Registry(), m.Engine(), m.Delegation()

	// An agent speaking the POST /task contract.
	finance := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"result": "Engineering: 1.2M, cost center ENG-42"}`)
	}))
	defer finance.Close()
	if _, _, err := reg.Register(ctx, registry.Agent{
		Name: "finance", Description: "Budgets and cost centers per team",
		Capabilities: []string{"budget", "cost-center"}, Endpoint: finance.URL + "/task",
	}); err != nil {
		panic(err)
	}

	h, err := a2aserver.New(engine, del, nil)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle(a2acard.MeshEndpointPath, h)
	mesh := httptest.NewServer(mux)
	defer mesh.Close()

	card := a2acard.MeshCard(mesh.URL, "v1.0.0") // served at /.well-known/agent-card.json
	client, err := a2aclient.NewFromCard(ctx, &card)
	if err != nil {
		panic(err)
	}
	defer client.Destroy()
	send := func(text string, meta map[string]any) *a2a.Task {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		msg.Metadata = meta
		res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			panic(err) // a malformed or unauthorised call
		}
		return res.(*a2a.Task)
	}

	task := send("What is the budget of Engineering?", nil)
	fmt.Println(task.Status.State, task.Metadata[a2aserver.MetaTargetAgent])
	fmt.Println(task.Artifacts[0].Parts[0].Text())

	task = send("engineering budget", map[string]any{a2aserver.MetaSkill: a2acard.SkillDiscover})
	fmt.Println(task.Artifacts[0].Parts[0].Text())

	task = send("Pay Ada", map[string]any{a2aserver.MetaTarget: "payroll"})
	fmt.Println(task.Status.State, task.Status.Message.Parts[0].Text())
	// Output:
	// TASK_STATE_COMPLETED finance
	// Engineering: 1.2M, cost center ENG-42
	// 1 agent matches, best first: finance (0.11).
	// TASK_STATE_FAILED not_found: no agent named "payroll" (use the mesh.discover skill to find one)
}
