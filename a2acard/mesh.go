package a2acard

import (
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Skill ids of the mesh's own card.
const (
	SkillDiscover = "mesh.discover"
	SkillDelegate = "mesh.delegate"
)

// MeshEndpointPath is the path, under the public URL, of the mesh's A2A
// JSON-RPC endpoint as its card declares it.
const MeshEndpointPath = "/a2a"

// MeshCard returns the mesh's own Agent Card, served at
// /.well-known/agent-card.json, so that A2A clients can use the mesh as
// one agent: its skills are discovery ([SkillDiscover]) and delegation
// ([SkillDelegate]), its one interface is JSON-RPC at publicURL +
// [MeshEndpointPath] (a relative URL when publicURL is empty), and it
// declares bearer-token authentication (the mesh's API tokens). version is
// the mesh's version.
func MeshCard(publicURL, version string) a2a.AgentCard {
	endpoint := strings.TrimRight(publicURL, "/") + MeshEndpointPath
	return a2a.AgentCard{
		Name: "agentmesh",
		Description: "A registry and router of AI agents: it finds the agent best suited to a task " +
			"among the agents registered with it, and delegates the task to that agent.",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(endpoint, a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{},
		DefaultInputModes:   []string{"text/plain"},
		DefaultOutputModes:  []string{"text/plain", "application/json"},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"meshToken": a2a.HTTPAuthSecurityScheme{
				Scheme:      "Bearer",
				Description: "An agentmesh API token (scopes read and delegate).",
			},
		},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"meshToken": {}}},
		Skills: []a2a.AgentSkill{
			{
				ID:          SkillDiscover,
				Name:        "Discover agents",
				Description: "Finds the registered agents that can handle a task described in plain language, ranked by relevance, with their capabilities.",
				Tags:        []string{"discovery", "search", "agents", "registry"},
				Examples: []string{
					"Which agent can review a pull request?",
					"Find agents that handle invoices",
				},
			},
			{
				ID:          SkillDelegate,
				Name:        "Delegate a task",
				Description: "Sends a task to the best-matching registered agent (or to a named one) and returns its result.",
				Tags:        []string{"delegation", "routing", "agents"},
				Examples: []string{
					"Summarise this incident report",
					"Ask the finance agent for the Q3 budget",
				},
			},
		},
		Version: version,
	}
}
