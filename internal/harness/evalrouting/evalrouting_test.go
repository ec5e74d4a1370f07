package evalrouting

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/evalharness"
	"github.com/agentmesh/agentmesh/routing"
)

func pred(gold, agent string, conf float64, ambiguous bool) Prediction {
	return Prediction{Gold: gold, Classification: routing.Classification{AgentID: agent, Confidence: conf, Ambiguous: ambiguous}}
}

var known = map[string]bool{"a": true, "b": true, DefaultAgent: true}

func TestGate(t *testing.T) {
	tests := []struct {
		p       Prediction
		clarify bool
		want    Decision
	}{
		{pred("a", "a", 0.8, false), false, RouteAgent},
		{pred("a", "a", 0.5, false), false, Fallback},
		{pred("a", "a", 0.5, false), true, Clarify},
		{pred("a", "a", 0.5, false), false, Fallback},
		{pred("a", "a", 0.9, true), false, Fallback},
		{pred("a", "a", 0.6, false), false, RouteAgent}, // equality routes (threshold 0.6 below)
		{pred("a", DefaultAgent, 0.1, false), false, RouteDefault},
		{pred("a", "", 0.9, false), false, Fallback},
		{pred("a", "zzz", 0.9, false), true, Fallback},
	}
	for i, tt := range tests {
		threshold := 0.7
		if i == 5 {
			threshold = 0.6
		}
		assert.Equal(t, tt.want, Gate(&tt.p.Classification, known, threshold, tt.clarify), "case %d", i)
	}
}

func TestScore(t *testing.T) {
	preds := []Prediction{
		pred("a", "a", 0.9, false),           // route right
		pred("a", "b", 0.9, false),           // route wrong
		pred("b", "b", 0.2, false),           // fallback: in-scope miss
		pred("b", DefaultAgent, 0.9, false),  // route default: in-scope miss
		pred(OOS, "a", 0.1, false),           // fallback: oos hit
		pred(OOS, DefaultAgent, 0.99, false), // route default: oos hit
		pred(OOS, "b", 0.95, false),          // route wrong: oos miss
		pred(OOS, "a", 0.95, true),           // ambiguous: fallback, oos hit
	}
	s := Score(preds, known, 0.5, false)
	assert.Equal(t, 8, s.Utterances)
	assert.Equal(t, 4, s.InScope)
	assert.Equal(t, 4, s.OOS)
	assert.InDelta(t, 0.25, s.InScopeAccuracy, 1e-12)
	assert.InDelta(t, 0.75, s.OOSRecall, 1e-12)
	assert.InDelta(t, 3.0/5, s.OOSPrecision, 1e-12, "5 ended at the default agent, 3 of them oos")
	assert.InDelta(t, 4.0/8, s.Accuracy, 1e-12)
	assert.InDelta(t, 2.0/4, s.Top1, 1e-12)
	assert.Equal(t, DecisionRow{RouteRight: 1, RouteWrong: 1, RouteDefault: 1, Fallback: 1}, s.Decisions.InScope)
	assert.Equal(t, DecisionRow{RouteWrong: 1, RouteDefault: 1, Fallback: 2}, s.Decisions.OOS)

	s = Score(preds, known, 0.5, true)
	assert.Equal(t, 1, s.Decisions.InScope.Clarify)
	assert.Equal(t, 2, s.Decisions.OOS.Clarify)
	assert.InDelta(t, 0.25, s.OOSRecall, 1e-12, "a clarification is not a fallback")
}

func TestPickThreshold(t *testing.T) {
	preds := []Prediction{
		pred("a", "a", 0.9, false),
		pred("a", "a", 0.8, false),
		pred("b", "b", 0.6, false),
		pred("b", "a", 0.55, false), // wrong whether routed or not
		pred(OOS, "a", 0.5, false),
		pred(OOS, "b", 0.3, false),
		pred(OOS, DefaultAgent, 0.99, false), // right at any threshold
	}
	th, acc := PickThreshold(preds, known, false)
	// Rejecting everything below 0.55 or 0.6 gets all but one right; the
	// lower interval wins, and the threshold is its midpoint.
	assert.InDelta(t, 6.0/7, acc, 1e-12)
	assert.InDelta(t, (0.5+0.55)/2, th, 1e-12, "midway between the last rejected and first routed confidence")
	assert.InDelta(t, acc, Score(preds, known, th, false).Accuracy, 1e-12)

	// Every threshold agrees with a brute-force sweep.
	for _, set := range [][]Prediction{preds, {pred("a", "a", 0.1, false)}, {pred(OOS, "a", 0.9, false)}, {pred("a", "b", 0.4, true), pred(OOS, "a", 0.4, false)}} {
		th, acc := PickThreshold(set, known, false)
		best := 0.0
		for _, t := range []float64{0, 0.05, 0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.52, 0.55, 0.57, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1.01} {
			best = max(best, Score(set, known, t, false).Accuracy)
		}
		assert.InDelta(t, best, acc, 1e-12)
		assert.InDelta(t, acc, Score(set, known, th, false).Accuracy, 1e-12)
	}
}

func TestReadUtterances(t *testing.T) {
	us, err := ReadUtterances(strings.NewReader(`{"text": "hi", "intent": "greet"}

{"text": "bye", "label": "oos"}
`), "f.jsonl")
	require.NoError(t, err)
	assert.Equal(t, []Utterance{{"hi", "greet", "f.jsonl", 1}, {"bye", "oos", "f.jsonl", 3}}, us)

	for in, want := range map[string]string{
		"":                "f.jsonl: no utterances",
		`{"text": "x"}`:   `f.jsonl:1: utterance has no "intent"`,
		`{"intent": "x"}`: `f.jsonl:1: utterance has no "text"`,
		"{\"text\": \"x\", \"intent\": \"y\"}\n[1]": "f.jsonl:2: invalid JSON",
	} {
		_, err := ReadUtterances(strings.NewReader(in), "f.jsonl")
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want)
		assert.True(t, errors.Is(err, evalharness.ErrData), in)
	}
}

func TestAgentsAndDomains(t *testing.T) {
	train := []Utterance{{Text: "b1", Label: "b"}, {Text: "a1", Label: "a"}, {Text: "o1", Label: OOS}, {Text: "a2", Label: "a"}}
	agents := Agents(train, true)
	require.Len(t, agents, 3)
	assert.Equal(t, "a", agents[0].Name)
	assert.Equal(t, []string{"a1", "a2"}, agents[0].Examples)
	assert.Equal(t, DefaultAgent, agents[2].Name)
	assert.True(t, agents[2].IsDefault)
	assert.Equal(t, []string{"o1"}, agents[2].Examples)
	assert.Empty(t, Agents(train, false)[2].Examples)

	assert.NoError(t, CheckLabels(agents, []Utterance{{Label: "a"}, {Label: OOS}}))
	assert.ErrorContains(t, CheckLabels(agents, []Utterance{{Label: "c", File: "t", Line: 4}}), `t:4: label "c" is not in the training file`)

	d, err := ToDomains(train, map[string]string{"a": "x", "b": "x"})
	require.NoError(t, err)
	assert.Equal(t, []string{"x", "x", OOS, "x"}, []string{d[0].Label, d[1].Label, d[2].Label, d[3].Label})
	_, err = ToDomains(train, map[string]string{"a": "x"})
	assert.ErrorContains(t, err, `intent "b" has no domain`)
}

func TestEvaluate(t *testing.T) {
	var train, test []Utterance
	for _, s := range []struct{ label, text string }{
		{"weather", "what is the weather in paris"}, {"weather", "will it rain tomorrow"},
		{"weather", "weather forecast for berlin"}, {"weather", "is it going to snow"},
		{"timer", "set a timer for 10 minutes"}, {"timer", "start a 5 minute timer"},
		{"timer", "cancel my timer"}, {"timer", "set a countdown"},
		{OOS, "tell me a joke"},
	} {
		train = append(train, Utterance{Text: s.text, Label: s.label})
	}
	test = []Utterance{{Text: "weather in rome", Label: "weather"}, {Text: "set a timer", Label: "timer"}, {Text: "capital of peru", Label: OOS}}
	rep, err := Evaluate(context.Background(), Config{Train: train, Test: test, OOSExamples: true})
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Agents)
	assert.Equal(t, "test", rep.ThresholdFrom)
	assert.Nil(t, rep.Val)
	assert.Equal(t, 3, rep.Test.Utterances)
	assert.Positive(t, rep.Features)

	rep, err = Evaluate(context.Background(), Config{Train: train, Val: test, Test: test})
	require.NoError(t, err)
	assert.Equal(t, "val", rep.ThresholdFrom)
	require.NotNil(t, rep.Val)
	assert.Equal(t, rep.Test, *rep.Val)

	_, err = Evaluate(context.Background(), Config{Train: train, Test: []Utterance{{Text: "x", Label: "nope"}}})
	assert.ErrorContains(t, err, `label "nope"`)
}
