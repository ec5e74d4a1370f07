package discovery_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// Standalone use: no registry, no store. Put agents, then search.
func Example() {
	e := discovery.New(nil)
	e.Put(registry.Agent{Name: "finance-agent", Description: "Budget reports and cost analysis", Capabilities: []string{"budgeting", "cost-center"}})
	e.Put(registry.Agent{Name: "hr-agent", Description: "Employee records, hiring and team budgets"})
	e.Put(registry.Agent{Name: "travel-agent", Description: "Books flights and hotels"})

	results, err := e.Search("Get the budget and cost center for Engineering", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Printf("%s %.2f %v\n", r.Agent.Name, r.Score, r.MatchedTerms)
	}
	// Output:
	// finance-agent 0.26 [budget cost center]
	// hr-agent 0.04 [budget]
}

// Filtering by label and required resource; the results are the same
// records, without their auth token.
func ExampleEngine_Search_filters() {
	e := discovery.New(nil)
	e.Put(registry.Agent{
		Name: "dev-vm1", Description: "Code review and debugging",
		Resources: []registry.Resource{{URI: "file://vm1.example.com/home/projects/*"}},
		Labels:    map[string]string{"team": "platform"},
		Auth:      &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"},
	})
	e.Put(registry.Agent{
		Name: "dev-vm2", Description: "Code review and testing",
		Resources: []registry.Resource{{URI: "file://vm2.example.com/home/projects/*"}},
		Labels:    map[string]string{"team": "platform"},
	})

	results, _ := e.Search("code review", &discovery.Query{
		Labels:            map[string]string{"team": "platform"},
		RequiredResources: []string{"file://vm1.example.com/home/projects/agentlens"},
	})
	for _, r := range results {
		fmt.Println(r.Agent.Name, r.MatchedResources[0].URI, r.Agent.Auth.Token == "")
	}
	// Output:
	// dev-vm1 file://vm1.example.com/home/projects/* true
}

// An empty query is an invalid argument.
func ExampleCode() {
	e := discovery.New(nil)
	_, err := e.Search("?!", nil)
	fmt.Println(err)
	fmt.Println(discovery.Code(err))
	// Output:
	// discovery: empty query: the query has no letters or digits
	// invalid_argument
}
