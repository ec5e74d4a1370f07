package audit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

func TestRegistryEntry(t *testing.T) {
	ctx := audit.WithOrigin(context.Background(), audit.Origin{Actor: "ci", RequestID: "r1"})
	finance := registry.Agent{Name: "finance", Endpoint: "https://agents.example.com/f?token=x", TTLSeconds: 30}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		w    registry.Write
		want audit.Entry
	}{
		{"registered", ctx, registry.Write{Op: registry.OpRegister, Agent: finance, Created: true},
			audit.Entry{Actor: "ci", Action: audit.ActionAgentRegister, Target: "finance", Outcome: audit.OutcomeSuccess,
				Details: map[string]string{"created": "true", "request_id": "r1"}}},
		{"through mcp", audit.WithVia(ctx, "mcp"), registry.Write{Op: registry.OpDelete, Agent: finance},
			audit.Entry{Actor: "ci", Action: audit.ActionAgentUnregister, Target: "finance", Outcome: audit.OutcomeSuccess,
				Details: map[string]string{"via": "mcp", "request_id": "r1"}}},
		{"not found", context.Background(), registry.Write{Op: registry.OpDelete, Agent: registry.Agent{Name: "x"}, Err: registry.ErrNotFound},
			audit.Entry{Action: audit.ActionAgentUnregister, Target: "x", Outcome: audit.OutcomeDenied, Code: registry.CodeNotFound,
				Details: map[string]string{}}},
		{"store failure", ctx, registry.Write{Op: registry.OpRegister, Agent: finance, Err: errors.New("disk full")},
			audit.Entry{Actor: "ci", Action: audit.ActionAgentRegister, Target: "finance", Outcome: audit.OutcomeFailure, Code: "internal",
				Details: map[string]string{"request_id": "r1"}}},
		{"closed", ctx, registry.Write{Op: registry.OpRegister, Agent: finance, Err: registry.ErrClosed},
			audit.Entry{Actor: "ci", Action: audit.ActionAgentRegister, Target: "finance", Outcome: audit.OutcomeFailure, Code: "unavailable",
				Details: map[string]string{"request_id": "r1"}}},
		{"expired", context.Background(), registry.Write{Op: registry.OpExpire, Agent: finance},
			audit.Entry{Action: audit.ActionAgentExpire, Target: "finance", Outcome: audit.OutcomeSuccess,
				Details: map[string]string{"ttl_seconds": "30"}}},
		{"file agent", context.Background(), registry.Write{Op: registry.OpRegister, Agent: finance, File: true},
			audit.Entry{Action: audit.ActionAgentRegister, Target: "finance", Outcome: audit.OutcomeSuccess,
				Details: map[string]string{"via": "file", "created": "false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, audit.RegistryEntry(tc.ctx, tc.w))
		})
	}
}

// A refused endpoint names the endpoint's host, never its path or query.
func TestRegistryEntryRefusedEndpoint(t *testing.T) {
	a := registry.Agent{Name: "f", Description: "d", Capabilities: []string{"c"}, Endpoint: "http://127.0.0.1:9/x?token=s"}
	a.Normalize()
	err := a.Validate(nil) // loopback is allowed without a policy
	if err != nil {
		t.Fatal(err)
	}
	strict, err := netguard.NewPolicy(netguard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Validate(strict)
	if !errors.Is(err, registry.ErrEndpointNotAllowed) {
		t.Fatalf("Validate = %v, want an endpoint refusal", err)
	}
	e := audit.RegistryEntry(context.Background(), registry.Write{Op: registry.OpRegister, Agent: a, Err: err})
	assert.Equal(t, audit.OutcomeDenied, e.Outcome)
	assert.Equal(t, registry.CodeEndpointNotAllowed, e.Code)
	assert.Equal(t, "127.0.0.1:9", e.Details["endpoint_host"])
}
