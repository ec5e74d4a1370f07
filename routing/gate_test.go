package routing

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
)

func gateAgent(name string, threshold float64, clarify bool) *registry.Agent {
	th := threshold
	return &registry.Agent{Name: name, ConfidenceThreshold: &th, ClarificationRequired: clarify}
}

func TestGate(t *testing.T) {
	def := &registry.Agent{Name: "helpdesk", IsDefault: true}
	// A default agent whose stored threshold is not 0 still has threshold 0.
	th := 0.9
	defWithThreshold := &registry.Agent{Name: "helpdesk", IsDefault: true, ConfidenceThreshold: &th}
	finance := gateAgent("finance", 0.7, false)
	hr := gateAgent("hr", 0.7, true)
	unset := &registry.Agent{Name: "legal"} // threshold unset: 0.7
	zero := gateAgent("zero", 0, false)

	type want struct {
		action Action
		reason Reason
		agent  string
		detail string // substring
		err    error
	}
	tests := []struct {
		name    string
		cls     Classification
		agent   *registry.Agent
		def     string
		clarify bool
		want    want
	}{
		// Rule 1: unknown agent → fallback (the seed said route).
		{"unknown agent falls back", Classification{AgentID: "ghost", Confidence: 0.99}, nil, "helpdesk", true,
			want{ActionFallback, ReasonUnknownAgent, "helpdesk", "Unknown agent_id 'ghost', routing to default", nil}},
		{"empty agent id is unknown", Classification{Confidence: 0}, nil, "helpdesk", true,
			want{ActionFallback, ReasonUnknownAgent, "helpdesk", "Unknown agent_id ''", nil}},
		{"unknown agent without default", Classification{AgentID: "ghost", Confidence: 0.99}, nil, "", true,
			want{ActionFallback, ReasonUnknownAgent, "", "no default agent", ErrNoDefaultAgent}},
		// Rule 2: the default agent routes, whatever the confidence.
		{"default agent routes at 0", Classification{AgentID: "helpdesk", Confidence: 0}, def, "helpdesk", true,
			want{ActionRoute, ReasonDefaultAgent, "helpdesk", "Default agent", nil}},
		{"default agent routes when ambiguous", Classification{AgentID: "helpdesk", Confidence: 0.1, Ambiguous: true}, def, "helpdesk", true,
			want{ActionRoute, ReasonDefaultAgent, "helpdesk", "Default agent", nil}},
		{"default agent threshold forced to 0", Classification{AgentID: "helpdesk", Confidence: 0.5}, defWithThreshold, "helpdesk", false,
			want{ActionRoute, ReasonDefaultAgent, "helpdesk", "Default agent", nil}},
		// Rule 3: confidence ≥ threshold and not ambiguous.
		{"above threshold routes", Classification{AgentID: "finance", Confidence: 0.85}, finance, "helpdesk", true,
			want{ActionRoute, ReasonConfidence, "finance", "Confidence 0.85 >= threshold 0.7", nil}},
		{"equality routes", Classification{AgentID: "finance", Confidence: 0.7}, finance, "helpdesk", true,
			want{ActionRoute, ReasonConfidence, "finance", "Confidence 0.7 >= threshold 0.7", nil}},
		{"confidence 1 routes", Classification{AgentID: "finance", Confidence: 1}, finance, "", false,
			want{ActionRoute, ReasonConfidence, "finance", "Confidence 1 >= threshold 0.7", nil}},
		{"unset threshold is 0.7", Classification{AgentID: "legal", Confidence: 0.7}, unset, "helpdesk", true,
			want{ActionRoute, ReasonConfidence, "legal", "threshold 0.7", nil}},
		{"unset threshold below", Classification{AgentID: "legal", Confidence: 0.69}, unset, "helpdesk", true,
			want{ActionFallback, ReasonLowConfidence, "helpdesk", "Below threshold 0.7", nil}},
		{"threshold 0 routes at 0", Classification{AgentID: "zero", Confidence: 0}, zero, "", true,
			want{ActionRoute, ReasonConfidence, "zero", "Confidence 0 >= threshold 0", nil}},
		{"route needs no default", Classification{AgentID: "finance", Confidence: 0.9}, finance, "", true,
			want{ActionRoute, ReasonConfidence, "finance", "", nil}},
		// Rule 4: clarificationRequired and enabled → clarify.
		{"below threshold clarifies", Classification{AgentID: "hr", Confidence: 0.69}, hr, "helpdesk", true,
			want{ActionClarify, ReasonLowConfidence, "hr", "Below threshold 0.7, clarification required", nil}},
		{"just below threshold clarifies", Classification{AgentID: "hr", Confidence: 0.6999999}, hr, "helpdesk", true,
			want{ActionClarify, ReasonLowConfidence, "hr", "Below threshold 0.7", nil}},
		{"ambiguous at 1.0 clarifies", Classification{AgentID: "hr", Confidence: 1, Ambiguous: true}, hr, "helpdesk", true,
			want{ActionClarify, ReasonAmbiguous, "hr", "Ambiguous match (confidence 1, threshold 0.7), clarification required", nil}},
		{"ambiguous and low is low confidence", Classification{AgentID: "hr", Confidence: 0.3, Ambiguous: true}, hr, "helpdesk", true,
			want{ActionClarify, ReasonLowConfidence, "hr", "Below threshold 0.7", nil}},
		{"clarify needs no default", Classification{AgentID: "hr", Confidence: 0.2}, hr, "", true,
			want{ActionClarify, ReasonLowConfidence, "hr", "", nil}},
		{"above threshold with clarification routes", Classification{AgentID: "hr", Confidence: 0.7}, hr, "helpdesk", true,
			want{ActionRoute, ReasonConfidence, "hr", "", nil}},
		// Rule 5: otherwise fallback.
		{"clarification disabled falls back", Classification{AgentID: "hr", Confidence: 0.5}, hr, "helpdesk", false,
			want{ActionFallback, ReasonLowConfidence, "helpdesk", "Below threshold 0.7, falling back to default", nil}},
		{"not clarificationRequired falls back", Classification{AgentID: "finance", Confidence: 0.5}, finance, "helpdesk", true,
			want{ActionFallback, ReasonLowConfidence, "helpdesk", "Below threshold 0.7, falling back to default", nil}},
		{"ambiguous falls back", Classification{AgentID: "finance", Confidence: 0.95, Ambiguous: true}, finance, "helpdesk", true,
			want{ActionFallback, ReasonAmbiguous, "helpdesk", "Ambiguous match (confidence 0.95, threshold 0.7), falling back to default", nil}},
		{"fallback without default", Classification{AgentID: "finance", Confidence: 0.5}, finance, "", true,
			want{ActionFallback, ReasonLowConfidence, "", "no default agent", ErrNoDefaultAgent}},
		{"ambiguous without default", Classification{AgentID: "finance", Confidence: 0.9, Ambiguous: true}, finance, "", false,
			want{ActionFallback, ReasonAmbiguous, "", "no default agent", ErrNoDefaultAgent}},
		{"clarification disabled without default", Classification{AgentID: "hr", Confidence: 0.5}, hr, "", false,
			want{ActionFallback, ReasonLowConfidence, "", "", ErrNoDefaultAgent}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Gate(GateInput{Classification: tc.cls, Agent: tc.agent, Default: tc.def, Clarification: tc.clarify})
			if tc.want.err != nil {
				require.ErrorIs(t, err, tc.want.err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want.action, d.Action)
			assert.Equal(t, tc.want.reason, d.Reason)
			assert.Equal(t, tc.want.agent, d.Agent)
			assert.Contains(t, d.Detail, tc.want.detail)
		})
	}
}

// TestGateUnknownIDIsBounded checks that a classifier's agent id is quoted
// and cut in the reason text.
func TestGateUnknownIDIsBounded(t *testing.T) {
	d, err := Gate(GateInput{Classification: Classification{AgentID: strings.Repeat("x", 500) + "'\n"}, Default: "d"})
	require.NoError(t, err)
	assert.Less(t, len(d.Detail), 200)
	assert.NotContains(t, d.Detail, "\n")
}

// TestGateIsPure checks that the gate neither mutates nor depends on
// anything but its input.
func TestGateIsPure(t *testing.T) {
	a := gateAgent("hr", 0.7, true)
	in := GateInput{Classification: Classification{AgentID: "hr", Confidence: 0.5, Entities: map[string]any{"k": "v"}}, Agent: a, Default: "d", Clarification: true}
	d1, err1 := Gate(in)
	d2, err2 := Gate(in)
	assert.Equal(t, d1, d2)
	assert.Equal(t, err1, err2)
	assert.Equal(t, 0.7, *a.ConfidenceThreshold)
	assert.Equal(t, map[string]any{"k": "v"}, in.Classification.Entities)
}
