// Package evalrouting measures how well a routing classifier and the
// confidence gate route labelled utterances, the way Larson et al. (2019)
// evaluate intent classifiers with out-of-scope queries (CLINC150): one
// agent per label learns from the training utterances, a default agent
// stands for out-of-scope ("oos"), a confidence threshold is picked on a
// validation file (the "oos-threshold" scheme), and the test file is
// scored with it: in-scope accuracy, out-of-scope recall and the gate's
// decisions. It backs "agentmesh eval routing" and the routing package's
// quality tests.
package evalrouting

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/evalharness"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

// OOS is the label of out-of-scope utterances.
const OOS = "oos"

// DefaultAgent is the name of the default agent that stands for OOS.
const DefaultAgent = "oos-default"

// Utterance is one labelled message.
type Utterance struct {
	Text  string
	Label string
	File  string
	Line  int
}

// utteranceLine is one line of an utterance file; "label" is accepted for
// "intent".
type utteranceLine struct {
	Text   string `json:"text"`
	Intent string `json:"intent"`
	Label  string `json:"label"`
}

// LoadUtterances reads a file of JSON Lines {"text", "intent"} (as
// CLINC150's). Blank lines are skipped. Errors about the content are
// *evalharness.DataError values naming the file and line.
func LoadUtterances(path string) ([]Utterance, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadUtterances(f, path)
}

// ReadUtterances reads utterances from r; file names r in errors.
func ReadUtterances(r io.Reader, file string) ([]Utterance, error) {
	var out []Utterance
	err := evalharness.EachLine(r, file, func(line int, data []byte) error {
		var u utteranceLine
		if err := json.Unmarshal(data, &u); err != nil {
			return &evalharness.DataError{File: file, Line: line, Msg: "invalid JSON: " + err.Error()}
		}
		label := cmp.Or(u.Intent, u.Label)
		switch {
		case strings.TrimSpace(u.Text) == "":
			return &evalharness.DataError{File: file, Line: line, Msg: `utterance has no "text"`}
		case label == "":
			return &evalharness.DataError{File: file, Line: line, Msg: `utterance has no "intent"`}
		}
		out = append(out, Utterance{Text: u.Text, Label: label, File: file, Line: line})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &evalharness.DataError{File: file, Msg: "no utterances"}
	}
	return out, nil
}

// LoadDomains reads a JSON object mapping each intent to its domain (as
// CLINC150's domains.json).
func LoadDomains(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &evalharness.DataError{File: path, Msg: "want a JSON object of intent → domain: " + err.Error()}
	}
	if len(m) == 0 {
		return nil, &evalharness.DataError{File: path, Msg: "no domains"}
	}
	return m, nil
}

// ToDomains relabels utterances with the domain of their intent; OOS stays
// OOS. An intent missing from domains is an error naming its line.
func ToDomains(us []Utterance, domains map[string]string) ([]Utterance, error) {
	out := make([]Utterance, len(us))
	for i, u := range us {
		if u.Label != OOS {
			d, ok := domains[u.Label]
			if !ok {
				return nil, &evalharness.DataError{File: u.File, Line: u.Line, Msg: fmt.Sprintf("intent %q has no domain", u.Label)}
			}
			u.Label = d
		}
		out[i] = u
	}
	return out, nil
}

// Agents builds the agents of an evaluation from training utterances: one
// agent per in-scope label, named after it, whose examples are its
// utterances (nothing else: no description or capabilities), and the
// default agent [DefaultAgent], whose examples are the OOS utterances when
// oosExamples is set and who has none otherwise (the paper's pure
// oos-threshold scheme). Agents are in name order, the default last.
func Agents(train []Utterance, oosExamples bool) []registry.Agent {
	byLabel := make(map[string][]string)
	for _, u := range train {
		byLabel[u.Label] = append(byLabel[u.Label], u.Text)
	}
	labels := make([]string, 0, len(byLabel))
	for l := range byLabel {
		if l != OOS {
			labels = append(labels, l)
		}
	}
	slices.Sort(labels)
	agents := make([]registry.Agent, 0, len(labels)+1)
	for _, l := range labels {
		agents = append(agents, registry.Agent{Name: l, Examples: byLabel[l]})
	}
	def := registry.Agent{Name: DefaultAgent, IsDefault: true, Description: "Out-of-scope requests"}
	if oosExamples {
		def.Examples = byLabel[OOS]
	}
	return append(agents, def)
}

// CheckLabels reports the first utterance of us whose label is not one of
// the agents (nor OOS).
func CheckLabels(agents []registry.Agent, us []Utterance) error {
	known := make(map[string]bool, len(agents))
	for _, a := range agents {
		known[a.Name] = true
	}
	for _, u := range us {
		if u.Label != OOS && !known[u.Label] {
			return &evalharness.DataError{File: u.File, Line: u.Line, Msg: fmt.Sprintf("label %q is not in the training file", u.Label)}
		}
	}
	return nil
}

// Prediction is a classifier's answer for one utterance.
type Prediction struct {
	Gold string
	routing.Classification
}

// Classify runs every utterance through c, and returns the predictions and
// the time spent in c.
func Classify(ctx context.Context, c routing.Classifier, us []Utterance) ([]Prediction, time.Duration, error) {
	out := make([]Prediction, len(us))
	var spent time.Duration
	for i, u := range us {
		start := time.Now()
		cl, err := c.Classify(ctx, u.Text)
		spent += time.Since(start)
		if err != nil {
			return nil, spent, fmt.Errorf("%s:%d: %w", u.File, u.Line, err)
		}
		out[i] = Prediction{Gold: u.Label, Classification: cl}
	}
	return out, spent, nil
}

// Decision is what the confidence gate did with a prediction.
type Decision int

// Decisions of the confidence gate (docs/API.md#the-confidence-gate), with
// "route" split by where it went.
const (
	// RouteAgent: routed to the classifier's specialist agent (rule 3).
	RouteAgent Decision = iota
	// RouteDefault: the classifier picked the default agent (rule 2).
	RouteDefault
	// Clarify: below threshold (or ambiguous) and the agent asks (rule 4).
	Clarify
	// Fallback: unknown agent (rule 1), or below threshold or ambiguous
	// (rule 5).
	Fallback
)

// Gate applies the rules of the confidence gate
// (docs/API.md#the-confidence-gate), in order: (1) an unknown agent falls
// back; (2) the default agent routes; (3) confidence at or above the
// threshold, not ambiguous, routes; (4) an agent that asks for
// clarification clarifies; (5) anything else falls back. It uses one
// threshold for every specialist agent; clarify says whether agents ask
// for clarification (rule 4).
func Gate(p *routing.Classification, known map[string]bool, threshold float64, clarify bool) Decision {
	switch {
	case !known[p.AgentID]:
		return Fallback
	case p.AgentID == DefaultAgent:
		return RouteDefault
	case p.Confidence >= threshold && !p.Ambiguous:
		return RouteAgent
	case clarify:
		return Clarify
	}
	return Fallback
}

// outcome is the label a decision amounts to: the agent routed to, OOS
// for the default agent, "" for a clarification.
func outcome(p *Prediction, d Decision) string {
	switch d {
	case RouteAgent:
		return p.AgentID
	case Clarify:
		return ""
	}
	return OOS
}

// Scores are the results on one file at one threshold.
type Scores struct {
	Utterances int `json:"utterances"`
	InScope    int `json:"inScope"`
	OOS        int `json:"oos"`
	// Accuracy over every utterance: an in-scope one counts when routed to
	// its agent, an OOS one when it ends at the default agent.
	Accuracy float64 `json:"accuracy"`
	// InScopeAccuracy: in-scope utterances routed to their agent.
	InScopeAccuracy float64 `json:"inScopeAccuracy"`
	// OOSRecall: OOS utterances that ended at the default agent.
	OOSRecall float64 `json:"oosRecall"`
	// OOSPrecision: of the utterances that ended at the default agent, the
	// OOS ones (0 when none did).
	OOSPrecision float64 `json:"oosPrecision"`
	// Top1: in-scope utterances whose top agent was right, whatever the
	// gate did (the classifier's raw accuracy).
	Top1 float64 `json:"top1"`
	// Decisions counts the gate's decisions for in-scope and for OOS
	// utterances.
	Decisions DecisionCounts `json:"decisions"`
}

// DecisionCounts splits decisions by the kind of utterance.
type DecisionCounts struct {
	InScope DecisionRow `json:"inScope"`
	OOS     DecisionRow `json:"oos"`
}

// DecisionRow counts the gate's decisions; routes to a specialist are
// split into right and wrong agent.
type DecisionRow struct {
	RouteRight   int `json:"routeRight"`
	RouteWrong   int `json:"routeWrong"`
	RouteDefault int `json:"routeDefault"`
	Clarify      int `json:"clarify"`
	Fallback     int `json:"fallback"`
}

// Score gates every prediction at threshold and scores the outcomes.
func Score(preds []Prediction, known map[string]bool, threshold float64, clarify bool) Scores {
	var s Scores
	var correct, inRight, oosRight, toDefault, top1 int
	for i := range preds {
		p := &preds[i]
		d := Gate(&p.Classification, known, threshold, clarify)
		got := outcome(p, d)
		row := &s.Decisions.InScope
		if p.Gold == OOS {
			row = &s.Decisions.OOS
			s.OOS++
		} else {
			s.InScope++
			if p.AgentID == p.Gold {
				top1++
			}
		}
		switch d {
		case RouteAgent:
			if got == p.Gold {
				row.RouteRight++
			} else {
				row.RouteWrong++
			}
		case RouteDefault:
			row.RouteDefault++
		case Clarify:
			row.Clarify++
		case Fallback:
			row.Fallback++
		}
		if got == OOS {
			toDefault++
		}
		if got == p.Gold {
			correct++
			if p.Gold == OOS {
				oosRight++
			} else {
				inRight++
			}
		}
	}
	s.Utterances = len(preds)
	s.Accuracy = ratio(correct, len(preds))
	s.InScopeAccuracy = ratio(inRight, s.InScope)
	s.OOSRecall = ratio(oosRight, s.OOS)
	s.OOSPrecision = ratio(oosRight, toDefault)
	s.Top1 = ratio(top1, s.InScope)
	return s
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// PickThreshold returns the threshold that maximises Accuracy over preds
// (every utterance counts once), with that accuracy. Among the confidence
// values that do equally well it takes the lowest interval, and returns
// its midpoint, so the threshold sits between two observed confidences.
func PickThreshold(preds []Prediction, known map[string]bool, clarify bool) (threshold, accuracy float64) {
	confs := make([]float64, 0, len(preds)+2)
	confs = append(confs, 0)
	for i := range preds {
		confs = append(confs, preds[i].Confidence)
	}
	slices.Sort(confs)
	confs = slices.Compact(confs)
	// Thresholds sit at the observed confidences (route iff conf ≥ t),
	// and one above them all; evaluate each.
	cands := append(slices.Clone(confs), confs[len(confs)-1]+1e-9)
	// For speed, sort predictions by confidence and sweep.
	type item struct {
		conf               float64
		atDefault, onRight int // contribution when routed vs not
	}
	items := make([]item, 0, len(preds))
	base := 0 // correct outcomes that do not depend on the threshold
	for i := range preds {
		p := &preds[i]
		routed := Gate(&p.Classification, known, 0, clarify) == RouteAgent // routable at some threshold
		if !routed {
			if outcome(p, Gate(&p.Classification, known, 0, clarify)) == p.Gold {
				base++
			}
			continue
		}
		it := item{conf: p.Confidence}
		if p.AgentID == p.Gold {
			it.onRight = 1
		}
		below := Gate(&p.Classification, known, 2, clarify) // not routed on confidence
		if outcome(p, below) == p.Gold {
			it.atDefault = 1
		}
		items = append(items, it)
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.conf, b.conf) })
	// At threshold t: items with conf < t score atDefault, others onRight.
	routedRight := 0
	for _, it := range items {
		routedRight += it.onRight
	}
	bestAcc, bestIdx := -1.0, 0
	j, belowDefault, belowRight := 0, 0, 0
	for ci, t := range cands {
		for j < len(items) && items[j].conf < t {
			belowDefault += items[j].atDefault
			belowRight += items[j].onRight
			j++
		}
		acc := ratio(base+belowDefault+routedRight-belowRight, len(preds))
		if acc > bestAcc {
			bestAcc, bestIdx = acc, ci
		}
	}
	t := cands[bestIdx]
	if bestIdx > 0 && bestIdx < len(confs) {
		t = (cands[bestIdx-1] + cands[bestIdx]) / 2
	}
	return t, bestAcc
}

// Known returns the set of agent names.
func Known(agents []registry.Agent) map[string]bool {
	m := make(map[string]bool, len(agents))
	for _, a := range agents {
		m[a.Name] = true
	}
	return m
}

// Config is one evaluation.
type Config struct {
	// Train builds the agents (see [Agents]); Test is scored. Val picks
	// the threshold; when it is empty the threshold is picked on Test
	// (optimistic: say so when reporting).
	Train, Val, Test []Utterance
	// OOSExamples gives the OOS training utterances to the default agent
	// as examples (see [Agents]).
	OOSExamples bool
	// Lexical configures the classifier; nil means defaults.
	Lexical *routing.LexicalOptions
}

// Report is the outcome of [Evaluate].
type Report struct {
	Agents          int    `json:"agents"` // including the default agent
	TrainUtterances int    `json:"trainUtterances"`
	OOSExamples     bool   `json:"oosExamples"`
	ThresholdFrom   string `json:"thresholdFrom"` // "val" or "test"
	// Threshold is the picked confidence threshold, and PickAccuracy the
	// accuracy it reached on the file it was picked on.
	Threshold    float64 `json:"threshold"`
	PickAccuracy float64 `json:"pickAccuracy"`
	// Val is the validation file's scores at Threshold (nil without one).
	Val *Scores `json:"val,omitempty"`
	// Test is the test file's scores at Threshold; TestAtDefault at the
	// registry's default threshold (0.7), as agents that set none get.
	Test          Scores `json:"test"`
	TestAtDefault Scores `json:"testAtDefaultThreshold"`
	// TrainTime is the time to train the classifier; ClassifyTime the mean
	// time to classify one utterance.
	TrainTime    time.Duration       `json:"trainTimeNs"`
	ClassifyTime time.Duration       `json:"classifyTimeNs"`
	Model        routing.LexicalInfo `json:"-"`
	Features     int                 `json:"features"`
}

// Evaluate trains the lexical classifier on cfg.Train, picks the threshold
// and scores cfg.Test.
func Evaluate(ctx context.Context, cfg Config) (Report, error) {
	agents := Agents(cfg.Train, cfg.OOSExamples)
	for _, us := range [][]Utterance{cfg.Val, cfg.Test} {
		if err := CheckLabels(agents, us); err != nil {
			return Report{}, err
		}
	}
	known := Known(agents)
	lex := routing.NewLexical(cfg.Lexical)
	defer lex.Close()
	start := time.Now()
	if err := lex.Reset(ctx, agents); err != nil {
		return Report{}, err
	}
	rep := Report{Agents: len(agents), TrainUtterances: len(cfg.Train), OOSExamples: cfg.OOSExamples, TrainTime: time.Since(start)}
	rep.Model, _ = lex.Info()
	rep.Features = rep.Model.Features

	test, spent, err := Classify(ctx, lex, cfg.Test)
	if err != nil {
		return Report{}, err
	}
	n := len(cfg.Test)
	pick := test
	rep.ThresholdFrom = "test"
	var val []Prediction
	if len(cfg.Val) > 0 {
		var valSpent time.Duration
		val, valSpent, err = Classify(ctx, lex, cfg.Val)
		if err != nil {
			return Report{}, err
		}
		spent += valSpent
		n += len(cfg.Val)
		pick, rep.ThresholdFrom = val, "val"
	}
	rep.ClassifyTime = spent / time.Duration(max(1, n))
	rep.Threshold, rep.PickAccuracy = PickThreshold(pick, known, false)
	if val != nil {
		s := Score(val, known, rep.Threshold, false)
		rep.Val = &s
	}
	rep.Test = Score(test, known, rep.Threshold, false)
	rep.TestAtDefault = Score(test, known, registry.DefaultConfidenceThreshold, false)
	return rep, nil
}
