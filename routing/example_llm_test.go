package routing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

// ExampleLLM classifies a message with a model behind an OpenAI-compatible
// endpoint (here a stand-in that always picks "billing"), with the lexical
// classifier as the per-request fallback.
func ExampleLLM() {
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A real endpoint is constrained by the request's json_schema to
		// the candidate ids; this one answers the same every time.
		content := `{"agent_id":"billing","confidence":0.92,"ambiguous":false,` +
			`"intent_summary":"The user wants a refund for a double charge.",` +
			`"detected_language":"en","entities":[{"name":"order","value":"A-17"}]}`
		reply, _ := json.Marshal(map[string]any{
			"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}}},
		})
		w.Header().Set("Content-Type", "application/json")
		io.Copy(io.Discard, r.Body)
		w.Write(reply)
	}))
	defer endpoint.Close()

	agents := []registry.Agent{
		{Name: "billing", DisplayName: "Billing", Description: "Invoices and refunds.",
			Examples: []string{"I was charged twice"}},
		{Name: "general", Description: "Anything else.", IsDefault: true,
			Examples: []string{"hello"}},
	}
	lexical := routing.NewLexical(nil)
	defer lexical.Close()
	if err := lexical.Reset(context.Background(), agents); err != nil {
		fmt.Println(err)
		return
	}

	llm, err := routing.NewLLM(&routing.LLMOptions{
		BaseURL:  endpoint.URL + "/v1", // e.g. https://api.openai.com/v1
		Model:    "gpt-4o-mini",
		APIKey:   "sk-example", // from AGENTMESH_LLM_API_KEY
		Fallback: lexical,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer llm.Close()
	if err := llm.Reset(agents); err != nil { // or llm.Follow(reg)
		fmt.Println(err)
		return
	}

	c, err := llm.Classify(context.Background(), "I was charged twice for order A-17, please refund one")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.AgentID, c.Confidence, c.DetectedLanguage)
	fmt.Println(c.IntentSummary)
	fmt.Println(c.Entities["order"])
	// Output:
	// billing 0.92 en
	// The user wants a refund for a double charge.
	// A-17
}
