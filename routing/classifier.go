package routing

import (
	"context"

	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Classifier picks the agent that should handle a user's message
// (docs/API.md#how-a-message-is-routed). Implementations must be safe for
// concurrent use, and must return promptly once ctx is done.
//
// Classify returns the agent it would route text to with a confidence in
// [0, 1]; the confidence gate ([Gate]) decides what to do with it. An
// AgentID that is not a registered agent is allowed (the gate falls back to
// the default agent); a classifier that cannot answer at all returns an
// error, such as [ErrNoAgents].
type Classifier interface {
	Classify(ctx context.Context, text string) (Classification, error)
}

// Classification is a classifier's answer for one message.
//
// Its JSON form is a superset of the classification object of the
// POST /v1/request reply (intent, confidence, language,
// entities), with the seed's snake_case names: IntentSummary is "intent"
// and DetectedLanguage is "language"; AgentID, Ambiguous and Candidates
// add what the classifier picked, which the reply's own agent_id may not
// show after a fallback.
type Classification struct {
	// AgentID is the name of the agent the classifier picked. It may be
	// the default agent (the gate routes to it).
	AgentID string `json:"agent_id"`
	// Confidence is the classifier's confidence in AgentID, in [0, 1].
	// For the lexical classifier it is calibrated: among messages like the
	// agents' examples, about that fraction of those given a confidence c
	// go to the right agent, so a gate threshold of 0.7 means "at least
	// 70% likely right".
	Confidence float64 `json:"confidence"`
	// Ambiguous is set when the runner-up scored almost as high as
	// AgentID: the message fits more than one agent. The gate does not
	// route an ambiguous message on confidence alone.
	Ambiguous bool `json:"ambiguous"`
	// IntentSummary says in one line what the message seems to ask for.
	IntentSummary string `json:"intent"`
	// DetectedLanguage is the ISO 639-1 code of the message's language
	// ("en" when unsure).
	DetectedLanguage string `json:"language"`
	// Entities are values found in the message, for the target agent.
	// Never nil in a result of this package's classifiers.
	Entities map[string]any `json:"entities"`
	// Candidates are the best agents, best first (AgentID first), with
	// their share of the classifier's probability mass. The gate and
	// clarification can use the runner-up. May be empty.
	Candidates []Candidate `json:"candidates,omitempty"`
}

// Candidate is one agent a message could go to.
type Candidate struct {
	AgentID string `json:"agent_id"`
	// Score is the agent's share of the probability over all candidate
	// agents (the scores of all agents sum to 1). It is not calibrated:
	// compare scores with each other, and Confidence with thresholds.
	Score float64 `json:"score"`
}

// Errors returned by the classifiers of this package. Both have code
// unavailable and describe themselves ([apierr.Describe]).
var (
	// ErrNoAgents: there is no agent to route to — no candidate and no
	// default agent (or all of them are stale).
	ErrNoAgents = apierr.New(pkg, apierr.CodeUnavailable, "no agents to classify against")
	// ErrNotReady: the classifier has agents it has not learned yet (it is
	// training its first model). The router answers it as unavailable, to
	// be retried in a second, rather than falling back. errors.Is
	// reports it as [ErrUnavailable] too.
	ErrNotReady = apierr.Errorf(ErrUnavailable, "the classifier is still learning the agents")
	// ErrClosed: the classifier was closed.
	ErrClosed = apierr.New(pkg, apierr.CodeUnavailable, "classifier closed")
)

// pkg is the package name the errors of this package carry.
const pkg = "routing"
