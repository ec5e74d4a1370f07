package a2acard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/netguard"
)

func Example() {
	// An A2A agent publishing its card.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"name": "Weather Agent", "description": "Forecasts the weather.", "version": "2.1.0",
			"supportedInterfaces": [{"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
			"skills": [{"id": "forecast", "name": "Forecast", "tags": ["weather"], "examples": ["Rain in Oslo?"]}]}`)
	}))
	defer ts.Close()

	// The mesh's SSRF-safe client; this policy allows the test server's
	// loopback address.
	policy, _ := netguard.NewPolicy(netguard.Options{AllowPrivate: true})
	cardURL := ts.URL + "/.well-known/agent-card.json"
	card, err := a2acard.Fetch(context.Background(), policy.NewClient(nil), cardURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	agent, err := a2acard.ToAgent(card, cardURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(agent.Name, agent.Protocol)
	fmt.Println(agent.Capabilities, agent.Examples)
	fmt.Println(agent.Endpoint == ts.URL+"/rpc")
	// Output:
	// weather-agent a2a
	// [Forecast weather] [Rain in Oslo?]
	// true
}

func ExampleMeshCard() {
	card := a2acard.MeshCard("https://mesh.example", "1.0.0")
	fmt.Println(card.SupportedInterfaces[0].URL, card.SupportedInterfaces[0].ProtocolBinding)
	for _, s := range card.Skills {
		fmt.Println(s.ID)
	}
	// Output:
	// https://mesh.example/a2a JSONRPC
	// mesh.discover
	// mesh.delegate
}
