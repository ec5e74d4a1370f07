package routing_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// lexExampleAgents are a help desk's agents: two specialists that learn from
// examples, one that has only a description and capabilities, and a
// default agent for everything else.
func lexExampleAgents() []registry.Agent {
	return []registry.Agent{
		{
			Name: "password-reset", DisplayName: "Password Reset",
			Description:  "Resets passwords and unlocks Okta and AD accounts.",
			Capabilities: []string{"password", "account-unlock", "okta"},
			Examples: []string{"I forgot my password", "reset my okta login", "my account is locked",
				"I can't log in to my laptop", "unlock my AD account", "change my password please"},
			Endpoint: "https://pw.example.com/task",
		},
		{
			Name: "payroll", DisplayName: "Payroll",
			Description: "Answers questions about salary, payslips, tax forms and direct deposit.",
			Examples: []string{"when is payday", "I need my W-2", "my paycheck is wrong",
				"update my direct deposit account", "where can I see my payslip", "how much tax was withheld"},
			Endpoint: "https://payroll.example.com/task",
		},
		{
			Name: "travel", DisplayName: "Travel Desk",
			Description:  "Books business flights, hotels and rental cars, and handles travel expenses.",
			Capabilities: []string{"flights", "hotels", "car-rental", "travel-expenses"},
			Endpoint:     "https://travel.example.com/task",
		},
		{
			Name: "helpdesk", IsDefault: true, Description: "General IT help desk.",
			Endpoint: "https://help.example.com/task",
		},
	}
}

// Standalone use: train on a set of agents, then classify messages.
func ExampleLexical() {
	ctx := context.Background()
	lex := routing.NewLexical(nil)
	defer lex.Close()
	if err := lex.Reset(ctx, lexExampleAgents()); err != nil {
		fmt.Println(err)
		return
	}
	for _, msg := range []string{
		"I forgot my Okta password again",
		"my last paycheck was wrong",
		"book me a hotel in Berlin",
		"what's the weather like today?",
	} {
		c, err := lex.Classify(ctx, msg)
		if err != nil {
			fmt.Println(err)
			return
		}
		// The gate routes when Confidence reaches the agent's threshold
		// (0.7 by default) and the message is not Ambiguous.
		fmt.Printf("%-33q %-14s %.1f\n", msg, c.AgentID, c.Confidence)
	}
	// Output:
	// "I forgot my Okta password again" password-reset 1.0
	// "my last paycheck was wrong"      payroll        1.0
	// "book me a hotel in Berlin"       travel         0.5
	// "what's the weather like today?"  payroll        0.2
}

// In a server: follow the registry, so registrations are learned in the
// background while requests are classified with the current model.
func ExampleLexical_Follow() {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	for _, a := range lexExampleAgents()[:2] {
		if _, _, err := reg.Register(ctx, a); err != nil {
			fmt.Println(err)
			return
		}
	}

	lex := routing.NewLexical(nil)
	defer lex.Close() // stops the background trainer
	stop := lex.Follow(reg)
	defer stop()

	c, _ := lex.Classify(ctx, "can you book a flight to Paris")
	fmt.Println("before:", c.AgentID)

	if _, _, err := reg.Register(ctx, lexExampleAgents()[2]); err != nil {
		fmt.Println(err)
		return
	}
	// The new agent is learned in the background; Sync waits for it.
	if err := lex.Sync(ctx); err != nil {
		fmt.Println(err)
		return
	}
	c, _ = lex.Classify(ctx, "can you book a flight to Paris")
	fmt.Println("after:", c.AgentID)
	// Output:
	// before: password-reset
	// after: travel
}
