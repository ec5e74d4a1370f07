// Command discovery is the agentmesh quick demo: it registers a handful of
// agents in a bbolt file, ranks them for a few text queries, and shows that
// the registrations survive a restart.
//
//	go run ./examples/discovery          # uses a temporary directory
//	go run ./examples/discovery -db mesh.db
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

var agents = []registry.Agent{
	{
		Name:         "finance-agent",
		DisplayName:  "Finance",
		Description:  "Looks up department budgets, cost centers and year-to-date spending.",
		Capabilities: []string{"budget", "cost-center", "spending-report"},
		Examples:     []string{"What is the Engineering budget?"},
		Endpoint:     "http://127.0.0.1:9101/task",
	},
	{
		Name:         "hr-agent",
		DisplayName:  "People Ops",
		Description:  "Answers questions about employees: managers, departments, leave balances and onboarding.",
		Capabilities: []string{"employee-directory", "leave-balance", "onboarding"},
		Endpoint:     "http://127.0.0.1:9102/task",
	},
	{
		Name:         "it-helpdesk",
		DisplayName:  "IT Helpdesk",
		Description:  "Resets passwords for Okta and Active Directory accounts and unlocks locked accounts.",
		Capabilities: []string{"password-reset", "account-unlock", "okta"},
		Protocol:     registry.ProtocolMCP,
		Endpoint:     "http://127.0.0.1:9103/mcp",
	},
	{
		Name:         "code-reviewer",
		DisplayName:  "Code Review",
		Description:  "Reviews pull requests for bugs, style problems and missing tests.",
		Capabilities: []string{"code-review", "pull-request", "static-analysis"},
		Resources:    []registry.Resource{{URI: "https://github.com/acme/*", Access: registry.AccessRead}},
		Endpoint:     "http://127.0.0.1:9104/task",
	},
	{
		Name:         "travel-agent",
		DisplayName:  "Travel Desk",
		Description:  "Books flights and hotels within the travel policy and tracks travel costs.",
		Capabilities: []string{"flight-booking", "hotel-booking", "travel-policy"},
		Endpoint:     "http://127.0.0.1:9105/task",
	},
}

var queries = []string{
	"engineering budget and cost center",
	"reset my okta password",
	"review this pull request",
	"book a flight to Berlin",
	"who is my manager",
}

func main() {
	dbPath := flag.String("db", "", "bbolt file to use (default: a new file in a temporary directory)")
	flag.Parse()
	if err := run(context.Background(), *dbPath); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dbPath string) error {
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "agentmesh-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "mesh.db")
	}

	fmt.Printf("store: %s\n\n", dbPath)
	if err := registerAll(ctx, dbPath); err != nil {
		return err
	}

	// Reopen the file, as a restarted process would, and search.
	mesh, err := agentmesh.Open(ctx, &agentmesh.Options{Path: dbPath})
	if err != nil {
		return err
	}
	defer mesh.Close()
	engine := mesh.Engine() // follows the registry
	fmt.Printf("reopened the store: %d agents indexed\n", engine.Len())

	for _, q := range queries {
		results, err := engine.Search(q, &discovery.Query{Limit: 3})
		if err != nil {
			return err
		}
		fmt.Printf("\nquery %q\n", q)
		for i, r := range results {
			fmt.Printf("  %d. %-14s score %.3f  coverage %.2f  matched %s",
				i+1, r.Agent.Name, r.Score, r.Coverage, strings.Join(r.MatchedTerms, ","))
			if len(r.MatchedCapabilities) > 0 {
				fmt.Printf("  capabilities %s", strings.Join(r.MatchedCapabilities, ","))
			}
			fmt.Println()
		}
	}

	results, err := engine.Search("review code", &discovery.Query{
		RequiredResources: []string{"https://github.com/acme/payments"},
	})
	if err != nil {
		return err
	}
	fmt.Printf("\nquery %q requiring https://github.com/acme/payments\n", "review code")
	for _, r := range results {
		fmt.Printf("  %s covers it with %s\n", r.Agent.Name, r.MatchedResources[0].URI)
	}

	_, err = engine.Search("?!", nil)
	fmt.Printf("\nquery %q: %v (code %s)\n", "?!", err, discovery.Code(err))
	return nil
}

// registerAll registers the demo agents through a mesh on the bbolt
// file, then closes it.
func registerAll(ctx context.Context, dbPath string) error {
	mesh, err := agentmesh.Open(ctx, &agentmesh.Options{Path: dbPath})
	if err != nil {
		return err
	}
	defer mesh.Close()
	reg := mesh.Registry()
	for _, a := range agents {
		got, created, err := reg.Register(ctx, a)
		if err != nil {
			return fmt.Errorf("register %s: %w", a.Name, err)
		}
		verb := "replaced"
		if created {
			verb = "registered"
		}
		fmt.Printf("%-10s %-14s (%s) %s\n", verb, got.Name, got.Protocol, got.Endpoint)
	}

	bad := registry.Agent{Name: "bad agent!", Endpoint: "ftp://example.com"}
	_, _, err = reg.Register(ctx, bad)
	fmt.Printf("refused    %q (code %s):\n  %s\n", bad.Name, registry.Code(err),
		strings.ReplaceAll(err.Error(), "\n", "\n  "))
	return nil
}
