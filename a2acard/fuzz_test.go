package a2acard_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/registry"
)

// FuzzToAgent checks that any decodable card maps without panicking, and
// that a mapped record always passes the registry's validation.
func FuzzToAgent(f *testing.F) {
	f.Add(validCard, "https://weather.example/.well-known/agent-card.json")
	f.Add(legacyCard, "https://old.example/card")
	f.Add(`{"name":"\u00ff\u0000 x","description":"","skills":[{"name":"   ","tags":[""," a "]}],"supportedInterfaces":[{"url":"//h/p","protocolBinding":"JSONRPC"}]}`, "http://h/")
	f.Add(`{"name":"a","supportedInterfaces":[{"url":"rel","protocolBinding":"JSONRPC"}]}`, "::bad")
	f.Fuzz(func(t *testing.T, body, cardURL string) {
		card, err := a2acard.Parse([]byte(body))
		if err != nil {
			return
		}
		a, err := a2acard.ToAgent(card, cardURL)
		if err != nil {
			return
		}
		b, err2 := a2acard.ToAgent(card, cardURL)
		if err2 != nil || a.Name != b.Name || a.Endpoint != b.Endpoint || a.Description != b.Description {
			t.Fatalf("ToAgent is not deterministic")
		}
		if len(a.Endpoint) > registry.MaxEndpointLen {
			return // the registry refuses it with a clear error
		}
		a.Normalize()
		if err := a.Validate(nil); err != nil {
			if registry.Code(err) == "endpoint_not_allowed" {
				return
			}
			t.Fatalf("mapped agent %+v is invalid: %v", a, err)
		}
	})
}
