package routing_test

import (
	"context"
	"math"
	"testing"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

// FuzzClassify checks that any input is classified without panicking, to
// a known agent (or none), with a confidence in [0, 1] and candidates in
// order.
func FuzzClassify(f *testing.F) {
	agents := append(lexHelpDesk(),
		registry.Agent{Name: "école", DisplayName: "Écoles", Capabilities: []string{"costCenter", "ÉCOLE", "日本語"},
			Description: "Inscriptions scolaires. 学校の登録。"})
	agents[3].Examples = []string{"tell me a joke", "hello there"}
	l := routing.NewLexical(nil)
	f.Cleanup(func() { l.Close() })
	if err := l.Reset(context.Background(), agents); err != nil {
		f.Fatal(err)
	}
	known := map[string]bool{"": true}
	for _, a := range agents {
		known[a.Name] = true
	}
	for _, s := range []string{"set a timer", "", "?!", "\xff\xfe\xfd", "école ÉCOLE", "学校の登録はどこですか",
		"a\u0301\u0301\u0301", "timer timer timer timer timer", "🙂🙂 weather 🙂", "\x00\x01 translate"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := l.Classify(context.Background(), text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if !known[c.AgentID] {
			t.Fatalf("%q: unknown agent %q", text, c.AgentID)
		}
		if math.IsNaN(c.Confidence) || c.Confidence < 0 || c.Confidence > 1 {
			t.Fatalf("%q: confidence %v", text, c.Confidence)
		}
		if c.Entities == nil || c.DetectedLanguage == "" {
			t.Fatalf("%q: %+v", text, c)
		}
		for i, cand := range c.Candidates {
			if !known[cand.AgentID] || cand.Score < 0 || cand.Score > 1 || math.IsNaN(cand.Score) {
				t.Fatalf("%q: candidate %+v", text, cand)
			}
			if i > 0 && cand.Score > c.Candidates[i-1].Score {
				t.Fatalf("%q: candidates out of order: %+v", text, c.Candidates)
			}
		}
		if len(c.Candidates) > 0 && c.Candidates[0].AgentID != c.AgentID {
			t.Fatalf("%q: top candidate %q, agent %q", text, c.Candidates[0].AgentID, c.AgentID)
		}
	})
}
