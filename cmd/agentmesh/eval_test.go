package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testCorpus = `{"id": "weather", "name": "weather", "description": "Weather forecasts for any city", "capabilities": [], "display_name": "Weather"}
{"id": "Stock&Co", "description": "Stock prices and market news", "displayName": "Stocks", "capabilities": ["finance"]}

{"name": "translator", "description": "Translate text between languages", "examples": ["translate hello to French"]}
`

const testQueries = `{"id": "q1", "query": "What is the weather in Paris?", "relevant": ["weather"], "subset": "single"}
{"query": "Apple stock price", "relevant": ["Stock&Co"], "subset": "single"}
{"query": "translate and forecast", "relevant": ["translator", "weather"], "subset": "multi"}
{"query": "?!", "relevant": ["weather"]}
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestEvalDiscovery(t *testing.T) {
	corpus := writeFile(t, "corpus.jsonl", testCorpus)
	queries := writeFile(t, "queries.jsonl", testQueries)

	var stdout, stderr bytes.Buffer
	code := runEval([]string{"discovery", "--corpus", corpus, "--queries", queries}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "scorer bm25, 3 agents")
	assert.Contains(t, out, "4 queries")
	assert.Regexp(t, `(?m)^all\s+4\s+0\.6250\s+0\.7500\s`, out) // the "?!" query is a miss
	assert.Regexp(t, `(?m)^multi\s+1\s+0\.5000\s+1\.0000\s+1\.0000\s+1\.0000$`, out)
	assert.Regexp(t, `(?m)^single\s+2\s+1\.0000\s`, out)

	stdout.Reset()
	code = runEval([]string{"discovery", "--corpus", corpus, "--queries", queries, "--scorer", "overlap", "--json"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	var rep evalReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	assert.Equal(t, "overlap", rep.Scorer)
	assert.Equal(t, 3, rep.Corpus.Count)
	assert.Equal(t, 4, rep.Queries.Count)
	assert.Equal(t, 4, rep.Overall.Queries)
	assert.Equal(t, 2, rep.Subsets["single"].Queries)
	assert.InDelta(t, 1.0, rep.Subsets["single"].RecallAt1, 1e-12)
}

func TestEvalErrors(t *testing.T) {
	corpus := writeFile(t, "corpus.jsonl", testCorpus)
	queries := writeFile(t, "queries.jsonl", testQueries)
	badJSON := writeFile(t, "bad.jsonl", testCorpus+"{not json\n")
	noID := writeFile(t, "noid.jsonl", `{"description": "x"}`+"\n")
	dupID := writeFile(t, "dup.jsonl", `{"id": "a"}`+"\n"+`{"id": "a"}`+"\n")
	unknownRel := writeFile(t, "unknown.jsonl", `{"query": "x", "relevant": ["weather"]}`+"\n"+`{"query": "y", "relevant": ["nope"]}`+"\n")
	noRel := writeFile(t, "norel.jsonl", `{"query": "x", "relevant": []}`+"\n")
	missing := filepath.Join(t.TempDir(), "missing.jsonl")

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no target", nil, 2, "Usage:"},
		{"unknown target", []string{"classifier"}, 2, `unknown target "classifier"`},
		{"routing is not there yet", []string{"routing"}, 2, "not available yet"},
		{"no corpus", []string{"discovery", "--queries", queries}, 2, "--corpus is required"},
		{"no queries", []string{"discovery", "--corpus", corpus}, 2, "--queries is required"},
		{"bad scorer", []string{"discovery", "--corpus", corpus, "--queries", queries, "--scorer", "tfidf"}, 2, `unknown scorer "tfidf"`},
		{"unknown flag", []string{"discovery", "--corpus", corpus, "--queries", queries, "--limit", "3"}, 2, "flag provided but not defined: -limit"},
		{"stray argument", []string{"discovery", "--corpus", corpus, "--queries", queries, "extra"}, 2, `unexpected argument "extra"`},
		{"missing file", []string{"discovery", "--corpus", missing, "--queries", queries}, 1, "missing.jsonl"},
		{"bad JSON names file and line", []string{"discovery", "--corpus", badJSON, "--queries", queries}, 1, "bad.jsonl:5: invalid JSON"},
		{"no id", []string{"discovery", "--corpus", noID, "--queries", queries}, 1, `noid.jsonl:1: agent has no "id" or "name"`},
		{"duplicate id", []string{"discovery", "--corpus", dupID, "--queries", queries}, 1, `dup.jsonl:2: duplicate id "a" (first on line 1)`},
		{"relevant id not in corpus", []string{"discovery", "--corpus", corpus, "--queries", unknownRel}, 1, `unknown.jsonl:2: relevant id "nope" is not in the corpus`},
		{"no relevant ids", []string{"discovery", "--corpus", corpus, "--queries", noRel}, 1, `norel.jsonl:1: query has no "relevant" ids`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runEval(tt.args, &stdout, &stderr)
			assert.Equal(t, tt.code, code)
			assert.Contains(t, stderr.String(), tt.stderr)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestEvalHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"discovery", "-h"}, {"discovery", "--help"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 0, runEval(args, &stdout, &stderr), "%v", args)
		assert.True(t, strings.HasPrefix(stdout.String(), "Usage:"), "%v", args)
	}
}
