package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
)

// An MCP client, connected in memory, lists the mesh's tools and asks
// mesh_discover for an agent. A real host serves the same server on stdio
// (srv.Run(ctx, &mcp.StdioTransport{})) or over HTTP (HTTPHandler).
func Example() {
	ctx := context.Background()
	mesh, err := agentmesh.Open(ctx, nil) // registry, discovery and delegation in memory
	if err != nil {
		panic(err)
	}
	defer mesh.Close()
	reg, engine, del := mesh.Registry(), mesh.Engine(), mesh.Delegation()

	for _, a := range []registry.Agent{
		{Name: "finance", Description: "Budgets and cost centers per team", Capabilities: []string{"budget", "cost-center"}, Endpoint: "https://finance.example.com/task"},
		{Name: "hr", Description: "Employee records and org charts", Capabilities: []string{"employees"}, Endpoint: "https://hr.example.com/task"},
	} {
		if _, _, err := reg.Register(ctx, a); err != nil {
			panic(err)
		}
	}

	srv, err := mcpserver.New(reg, engine, del, nil)
	if err != nil {
		panic(err)
	}
	clientTransport, serverTransport := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverTransport, nil)
	if err != nil {
		panic(err)
	}
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "v1.0.0"}, nil)
	cs, err := client.Connect(ctx, clientTransport, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		panic(err)
	}
	for _, t := range tools.Tools {
		fmt.Printf("%s (read-only: %v)\n", t.Name, t.Annotations.ReadOnlyHint)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      mcpserver.ToolDiscover,
		Arguments: map[string]any{"query": "budget of the engineering team"},
	})
	if err != nil {
		panic(err) // a protocol error; tool failures are res.IsError
	}
	var found mcpserver.DiscoverResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &found); err != nil {
		panic(err)
	}
	for _, m := range found.Results {
		fmt.Printf("%s matched %v via %v\n", m.Agent.Name, m.MatchedTerms, m.MatchedCapabilities)
	}

	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: map[string]any{"targetName": "payroll", "task": "Pay Ada"}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// mesh_delegate (read-only: false)
	// mesh_discover (read-only: true)
	// mesh_get_delegation (read-only: true)
	// mesh_list_agents (read-only: true)
	// mesh_register (read-only: false)
	// mesh_unregister (read-only: false)
	// finance matched [budget team] via [budget]
	// true not_found: no agent named "payroll" (use mesh_discover or mesh_list_agents to find one)
}
