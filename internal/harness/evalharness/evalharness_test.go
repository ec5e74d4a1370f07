package evalharness_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/evalharness"
	"github.com/agentmesh/agentmesh/registry"
)

func TestMetrics(t *testing.T) {
	inv := func(n int) float64 { return 1 / math.Log2(float64(n)+1) }
	tests := []struct {
		name              string
		ranked, relevant  []string
		r1, r5, ndcg, mrr float64
	}{
		{"first", []string{"a", "b"}, []string{"a"}, 1, 1, 1, 1},
		{"second", []string{"b", "a"}, []string{"a"}, 0, 1, inv(2), 0.5},
		{"sixth", []string{"b", "c", "d", "e", "f", "a"}, []string{"a"}, 0, 0, inv(6), 1.0 / 6},
		{"eleventh", []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "a"}, []string{"a"}, 0, 0, 0, 1.0 / 11},
		{"missing", []string{"b"}, []string{"a"}, 0, 0, 0, 0},
		{"empty ranking", nil, []string{"a"}, 0, 0, 0, 0},
		{"two relevant, both found", []string{"a", "x", "b"}, []string{"a", "b"}, 0.5, 1, (1 + inv(3)) / (1 + inv(2)), 1},
		{"two relevant, one found", []string{"x", "b"}, []string{"a", "b"}, 0, 0.5, inv(2) / (1 + inv(2)), 0.5},
		{"duplicates count once", []string{"x", "x", "a"}, []string{"a"}, 0, 1, inv(2), 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := evalharness.Evaluate([]evalharness.Query{{Text: "q", Relevant: tt.relevant}},
				func(string) ([]string, error) { return tt.ranked, nil })
			require.NoError(t, err)
			m := rep.Overall
			assert.Equal(t, 1, m.Queries)
			assert.InDelta(t, tt.r1, m.RecallAt1, 1e-12, "R@1")
			assert.InDelta(t, tt.r5, m.RecallAt5, 1e-12, "R@5")
			assert.InDelta(t, tt.ndcg, m.NDCGAt10, 1e-12, "nDCG@10")
			assert.InDelta(t, tt.mrr, m.MRR, 1e-12, "MRR")
		})
	}
}

func TestEvaluateSubsets(t *testing.T) {
	qs := []evalharness.Query{
		{Text: "hit", Relevant: []string{"a"}, Subset: "s"},
		{Text: "miss", Relevant: []string{"a"}, Subset: "s"},
		{Text: "hit", Relevant: []string{"a"}, Subset: "m"},
		{Text: "hit", Relevant: []string{"a"}},
	}
	rep, err := evalharness.Evaluate(qs, func(q string) ([]string, error) {
		if q == "hit" {
			return []string{"a"}, nil
		}
		return nil, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 4, rep.Overall.Queries)
	assert.InDelta(t, 0.75, rep.Overall.RecallAt1, 1e-12)
	assert.Equal(t, []string{"m", "s"}, rep.SubsetNames())
	assert.InDelta(t, 0.5, rep.Subsets["s"].RecallAt1, 1e-12)
	assert.InDelta(t, 1.0, rep.Subsets["m"].MRR, 1e-12)

	boom := errors.New("boom")
	_, err = evalharness.Evaluate([]evalharness.Query{{Text: "x", Relevant: []string{"a"}, File: "q.jsonl", Line: 7}},
		func(string) ([]string, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "q.jsonl:7")
}

func TestReadCorpus(t *testing.T) {
	agents, err := evalharness.ReadCorpus(strings.NewReader(`
{"id": "PDF&URLTool", "name": "ignored", "description": "d", "display_name": "PDF", "capabilities": ["c"], "examples": ["e"], "extra": 1}
{"name": "n", "displayName": "N"}
`), "c.jsonl")
	require.NoError(t, err)
	assert.Equal(t, []registry.Agent{
		{Name: "PDF&URLTool", Description: "d", DisplayName: "PDF", Capabilities: []string{"c"}, Examples: []string{"e"}},
		{Name: "n", DisplayName: "N"},
	}, agents)

	for input, msg := range map[string]string{
		"":                               "c.jsonl: no agents",
		"\n{\"id\": 3}\n":                "c.jsonl:2: invalid JSON",
		`{"description": "x"}`:           `c.jsonl:1: agent has no "id" or "name"`,
		"{\"id\":\"a\"}\n{\"id\":\"a\"}": `c.jsonl:2: duplicate id "a" (first on line 1)`,
	} {
		_, err := evalharness.ReadCorpus(strings.NewReader(input), "c.jsonl")
		require.ErrorIs(t, err, evalharness.ErrData, "%q", input)
		var de *evalharness.DataError
		require.ErrorAs(t, err, &de)
		assert.Contains(t, err.Error(), msg)
	}
}

func TestReadQueries(t *testing.T) {
	qs, err := evalharness.ReadQueries(strings.NewReader(`{"id": "s1", "query": "q", "relevant": ["a"], "subset": "single-tool"}`), "q.jsonl")
	require.NoError(t, err)
	assert.Equal(t, []evalharness.Query{{ID: "s1", Text: "q", Relevant: []string{"a"}, Subset: "single-tool", File: "q.jsonl", Line: 1}}, qs)

	for input, msg := range map[string]string{
		"":                                 "q.jsonl: no queries",
		`{"query": "q", "relevant": "a"}`:  "q.jsonl:1: invalid JSON",
		`{"relevant": ["a"]}`:              `q.jsonl:1: query has no "query" text`,
		"\n\n" + `{"query": "q"}`:          `q.jsonl:3: query has no "relevant" ids`,
		strings.Repeat("x", 17<<20) + "\n": "q.jsonl:1: line longer than",
	} {
		_, err := evalharness.ReadQueries(strings.NewReader(input), "q.jsonl")
		require.ErrorIs(t, err, evalharness.ErrData, "%.40q", input)
		assert.Contains(t, err.Error(), msg)
	}

	err = evalharness.Check([]registry.Agent{{Name: "a"}}, []evalharness.Query{{Relevant: []string{"a", "b"}, File: "q.jsonl", Line: 4}})
	require.ErrorIs(t, err, evalharness.ErrData)
	assert.EqualError(t, err, `q.jsonl:4: relevant id "b" is not in the corpus`)
	assert.NoError(t, evalharness.Check([]registry.Agent{{Name: "a"}}, []evalharness.Query{{Relevant: []string{"a"}}}))
}
