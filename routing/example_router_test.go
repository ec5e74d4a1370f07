package routing_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// keywords is a toy classifier: the first keyword found in the text picks
// its agent; anything else goes to the default agent with low confidence.
type keywords []struct {
	word string
	cls  routing.Classification
}

func (k keywords) Classify(_ context.Context, text string) (routing.Classification, error) {
	for _, kw := range k {
		if strings.Contains(strings.ToLower(text), kw.word) {
			return kw.cls, nil
		}
	}
	return routing.Classification{AgentID: "helpdesk", Confidence: 0.2, DetectedLanguage: "en"}, nil
}

// A router over in-process agents: a conversation is routed, continues in
// its session, and a vague message gets a clarification question whose
// answer is classified together with it.
func ExampleRouter() {
	ctx := context.Background()
	store := memstore.New()
	reg, _ := registry.New(ctx, store, nil)
	defer reg.Close()
	sessions, _ := session.NewManager(store, nil)
	defer sessions.Close()
	del, _ := delegation.New(ctx, reg, store, nil)
	defer del.Close()

	// Three agents answered by Go functions; the helpdesk is the default.
	for _, a := range []registry.Agent{
		{Name: "helpdesk", Description: "General help", IsDefault: true},
		{Name: "finance", Description: "Budgets and cost centers"},
		{Name: "hr", DisplayName: "HR", Description: "Leave and payroll", ClarificationRequired: true},
	} {
		a.Protocol = registry.ProtocolInProcess
		if _, _, err := reg.Register(ctx, a); err != nil {
			fmt.Println(err)
			return
		}
		name := a.Name
		del.Handle(name, func(_ context.Context, t delegation.Task) (any, error) {
			return name + " got: " + t.Task, nil
		})
	}

	classifier := keywords{
		{"budget", routing.Classification{AgentID: "finance", Confidence: 0.9, DetectedLanguage: "en"}},
		{"payroll", routing.Classification{AgentID: "hr", Confidence: 0.9, DetectedLanguage: "en"}},
		{"leave", routing.Classification{AgentID: "hr", Confidence: 0.4, DetectedLanguage: "en"}},
	}
	router, err := routing.New(classifier, reg, del, sessions, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer router.Close()

	for _, msg := range []struct{ user, input string }{
		{"alice", "What is the budget for Engineering?"},
		{"alice", "And for Sales?"}, // same session: no classification
		{"bob", "Question about leave"},
		{"bob", "It is about my payroll"}, // classified with the question's input
		{"", "Hello!"},                    // anonymous: the default agent
	} {
		resp, err := router.Handle(ctx, routing.Request{Input: msg.input, UserID: msg.user})
		if err != nil {
			fmt.Println(err)
			return
		}
		if resp.Decision == routing.ActionClarify {
			fmt.Printf("%s: %s (%s) → %s\n", resp.Decision, resp.SuggestedAgent, resp.Reason, resp.ClarificationQuestion)
			continue
		}
		fmt.Printf("%s: %s (%s) → %s\n", resp.Decision, resp.AgentID, resp.Reason, resp.Response)
	}
	// Output:
	// route: finance (confidence) → finance got: What is the budget for Engineering?
	// route: finance (session) → finance got: And for Sales?
	// clarify: hr (low_confidence) → Is your request about HR (Leave and payroll)? Could you tell me a bit more about what you need?
	// route: hr (confidence) → hr got: Question about leave It is about my payroll
	// route: helpdesk (default_agent) → helpdesk got: Hello!
}
