package routing

import (
	"fmt"
	"strconv"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
)

// Action is what the router does with a message: the "decision" of the
// POST /v1/request reply.
type Action string

// The actions of the confidence gate ([Gate]).
const (
	// ActionRoute dispatches to the classified agent (or, for a session
	// bypass, the session's agent).
	ActionRoute Action = "route"
	// ActionClarify asks the user a question instead of dispatching.
	ActionClarify Action = "clarify"
	// ActionFallback dispatches to the default agent.
	ActionFallback Action = "fallback"
)

// Reason says why the router took its decision: a short, stable,
// machine-friendly code (the reply's "reason"). [Decision.Detail] carries
// the human text (the reply's "routing.reason"), worded like the seed
// orchestrator's reasons so that clients matching on them keep working.
type Reason string

// The reasons of a [Decision].
const (
	// ReasonSession: an active session's agent took the message without
	// classification (session bypass).
	ReasonSession Reason = "session"
	// ReasonUnknownAgent: the classifier named no registered, live agent
	// (gate rule 1).
	ReasonUnknownAgent Reason = "unknown_agent"
	// ReasonDefaultAgent: the classifier picked the default agent (gate
	// rule 2).
	ReasonDefaultAgent Reason = "default_agent"
	// ReasonConfidence: the confidence reached the agent's threshold and
	// the classification was not ambiguous (gate rule 3).
	ReasonConfidence Reason = "confidence"
	// ReasonLowConfidence: the confidence was below the agent's threshold
	// (gate rules 4 and 5).
	ReasonLowConfidence Reason = "low_confidence"
	// ReasonAmbiguous: the confidence reached the threshold but the
	// message fits more than one agent (gate rules 4 and 5).
	ReasonAmbiguous Reason = "ambiguous"
	// ReasonClarificationUnresolved: the message answering a clarification
	// question, classified with the original input, still did not clear
	// the gate, so it went to the default agent.
	ReasonClarificationUnresolved Reason = "clarification_unresolved"
	// ReasonClassifierError: the classifier failed; the message went to
	// the default agent.
	ReasonClassifierError Reason = "classifier_error"
	// ReasonAgentUnavailable: the chosen agent's circuit breaker was open
	// (or it was stale), so the message went to the default agent.
	ReasonAgentUnavailable Reason = "agent_unavailable"
	// ReasonDispatchFailed: dispatching to the chosen agent failed, so the
	// message went to the default agent.
	ReasonDispatchFailed Reason = "dispatch_failed"
)

// Decision is the outcome of the gate, and of the router's later steps.
type Decision struct {
	// Action is route, clarify or fallback.
	Action Action
	// Reason is the machine-friendly code.
	Reason Reason
	// Detail is a human-readable explanation, without user text.
	Detail string
	// Agent is the agent to dispatch to: the classified agent for route,
	// the default agent for fallback (empty when there is none), and the
	// agent the clarification question is about for clarify.
	Agent string
}

// CodeNoDefaultAgent is the code of [ErrNoDefaultAgent].
const CodeNoDefaultAgent = "no_default_agent"

// ErrNoDefaultAgent is returned when a message has to go to the default
// agent (gate rules 1 and 5, or a classifier failure) and no default agent
// is registered. Its code is [CodeNoDefaultAgent]; front-ends answer it
// with HTTP 503.
var ErrNoDefaultAgent = apierr.New(pkg, CodeNoDefaultAgent, "no default agent registered")

// GateInput is everything the gate looks at.
type GateInput struct {
	// Classification is the classifier's answer.
	Classification Classification
	// Agent is the registered, live agent named by
	// Classification.AgentID; nil when there is none (the classifier
	// named an unknown, removed or stale agent, or no agent at all).
	Agent *registry.Agent
	// Default is the name of the default agent, "" when none is
	// registered.
	Default string
	// Clarification enables gate rule 4 (ask instead of falling back).
	Clarification bool
}

// Gate is the confidence gate, a pure function. Its rules, in
// order:
//
//  1. Agent is nil (unknown agent_id) → fallback to the default.
//  2. Agent is the default agent → route.
//  3. confidence ≥ Agent.Threshold() and not ambiguous → route (equality
//     routes).
//  4. Agent.ClarificationRequired and in.Clarification → clarify.
//  5. Otherwise → fallback to the default.
//
// When rule 1 or 5 applies and in.Default is empty, Gate returns the
// fallback decision it would have taken (Agent empty) and
// [ErrNoDefaultAgent].
func Gate(in GateInput) (Decision, error) {
	c := in.Classification
	a := in.Agent
	switch {
	case a == nil:
		d := Decision{
			Action: ActionFallback,
			Reason: ReasonUnknownAgent,
			Detail: fmt.Sprintf("Unknown agent_id %s, routing to default", quoteID(c.AgentID)),
			Agent:  in.Default,
		}
		return noDefault(d, in.Default)
	case a.IsDefault || a.Name == in.Default:
		return Decision{
			Action: ActionRoute,
			Reason: ReasonDefaultAgent,
			Detail: fmt.Sprintf("Default agent %s", quoteID(a.Name)),
			Agent:  a.Name,
		}, nil
	}
	th := a.Threshold()
	if c.Confidence >= th && !c.Ambiguous {
		return Decision{
			Action: ActionRoute,
			Reason: ReasonConfidence,
			Detail: fmt.Sprintf("Confidence %s >= threshold %s", formatNum(c.Confidence), formatNum(th)),
			Agent:  a.Name,
		}, nil
	}
	reason, why := ReasonLowConfidence, "Below threshold "+formatNum(th)
	if c.Confidence >= th { // so ambiguous
		reason, why = ReasonAmbiguous, fmt.Sprintf("Ambiguous match (confidence %s, threshold %s)", formatNum(c.Confidence), formatNum(th))
	}
	if a.ClarificationRequired && in.Clarification {
		return Decision{
			Action: ActionClarify,
			Reason: reason,
			Detail: why + ", clarification required",
			Agent:  a.Name,
		}, nil
	}
	d := Decision{
		Action: ActionFallback,
		Reason: reason,
		Detail: why + ", falling back to default",
		Agent:  in.Default,
	}
	return noDefault(d, in.Default)
}

// noDefault returns d, or d and ErrNoDefaultAgent when there is no default
// agent to fall back to.
func noDefault(d Decision, def string) (Decision, error) {
	if def == "" {
		d.Detail += " (no default agent registered)"
		return d, ErrNoDefaultAgent
	}
	return d, nil
}

// formatNum prints a number the way the seed's reasons did (JavaScript
// style: 0.7, 1, 0.85).
func formatNum(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// quoteID quotes an agent id for a reason text, in the seed's
// single-quoted form, bounding its length: a classifier's agent id is not
// trusted.
func quoteID(id string) string {
	const maxLen = 128
	if len(id) > maxLen {
		id = id[:maxLen] + "…"
	}
	q := strconv.Quote(id)
	return "'" + q[1:len(q)-1] + "'"
}
