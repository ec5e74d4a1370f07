package synthagents

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/registry"
)

// The synthetic agents are valid registrations, unique by name, and the
// same for the same seed and index whatever the order they are made in.
func TestGeneratorAgents(t *testing.T) {
	g := New(1)
	names := map[string]bool{}
	for i := range 2000 {
		a := g.Agent("", i, 0)
		if names[a.Name] {
			t.Fatalf("agent %d: duplicate name %q", i, a.Name)
		}
		names[a.Name] = true
		if n := len(a.Capabilities); n < 3 || n > 6 {
			t.Errorf("agent %d: %d capabilities, want 3–6", i, n)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var ra registry.Agent
		if err := json.Unmarshal(b, &ra); err != nil {
			t.Fatal(err)
		}
		ra.Normalize()
		if err := ra.Validate(nil); err != nil {
			t.Fatalf("agent %d is not a valid registration: %v\n%s", i, err, b)
		}
		if i < 3 {
			t.Logf("%s", b)
		}
	}
	a, b := g.Agent("x-", 1234, 0), New(1).Agent("x-", 1234, 0)
	if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
		t.Errorf("agent 1234 differs between generators of the same seed:\n%s\n%s", ja, jb)
	}
	if mustJSON(t, New(2).Agent("x-", 1234, 0)) == mustJSON(t, a) {
		t.Error("seeds 1 and 2 made the same agent")
	}
}

func TestGeneratorQueries(t *testing.T) {
	g := New(1)
	distinct := map[string]bool{}
	for i := range 1000 {
		q := g.Query(i)
		words := strings.Fields(q)
		if n := len(words); n < 2 || n > 4 {
			t.Errorf("query %d %q has %d words, want 2–4", i, q, n)
		}
		slices.Sort(words)
		if len(slices.Compact(words)) != len(strings.Fields(q)) {
			t.Errorf("query %d %q repeats a word", i, q)
		}
		if q != New(1).Query(i) {
			t.Errorf("query %d is not deterministic", i)
		}
		distinct[q] = true
		if i < 10 {
			t.Logf("%q", q)
		}
	}
	if len(distinct) < 500 {
		t.Errorf("only %d distinct queries of 1000", len(distinct))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Examples are part of the agent, deterministic, and a longer list starts
// with the shorter one (held-out messages follow the examples).
func TestGeneratorExamples(t *testing.T) {
	g := New(1)
	for i := range 200 {
		a := g.Agent("", i, 5)
		if len(a.Examples) != 5 {
			t.Fatalf("agent %d: %d examples, want 5", i, len(a.Examples))
		}
		ra := a.Registry()
		if err := ra.Validate(nil); err != nil {
			t.Fatalf("agent %d is not a valid registration: %v", i, err)
		}
		if more := g.Examples(i, 8); !slices.Equal(more[:5], a.Examples) {
			t.Fatalf("agent %d: Examples(8)[:5] = %q, want %q", i, more[:5], a.Examples)
		}
		if a.Name != g.Agent("", i, 0).Name {
			t.Fatalf("agent %d: examples changed the agent", i)
		}
	}
	if g.Examples(3, 0) != nil {
		t.Error("Examples(i, 0) is not nil")
	}
}
