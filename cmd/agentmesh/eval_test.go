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

// evalOK runs `agentmesh eval args...`, requires exit code 0 and returns
// what it wrote to stdout.
func evalOK(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runEval(args, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	return stdout.String()
}

// assertEvalFails runs `agentmesh eval args...` and asserts that it exits
// with code, that its stderr contains msg, and that it writes nothing to
// stdout.
func assertEvalFails(t *testing.T, args []string, code int, msg string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, code, runEval(args, &stdout, &stderr))
	assert.Contains(t, stderr.String(), msg)
	assert.Empty(t, stdout.String())
}

func TestEvalDiscovery(t *testing.T) {
	corpus := writeFile(t, "corpus.jsonl", testCorpus)
	queries := writeFile(t, "queries.jsonl", testQueries)

	out := evalOK(t, "discovery", "--corpus", corpus, "--queries", queries)
	assert.Contains(t, out, "scorer bm25, 3 agents")
	assert.Contains(t, out, "4 queries")
	assert.Regexp(t, `(?m)^all\s+4\s+0\.6250\s+0\.7500\s`, out) // the "?!" query is a miss
	assert.Regexp(t, `(?m)^multi\s+1\s+0\.5000\s+1\.0000\s+1\.0000\s+1\.0000$`, out)
	assert.Regexp(t, `(?m)^single\s+2\s+1\.0000\s`, out)

	out = evalOK(t, "discovery", "--corpus", corpus, "--queries", queries, "--scorer", "overlap", "--json")
	var rep evalReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
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
		{"routing needs --train", []string{"routing"}, 2, "--train is required"},
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
			assertEvalFails(t, tt.args, tt.code, tt.stderr)
		})
	}
}

func TestEvalHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"discovery", "-h"}, {"discovery", "--help"}, {"routing", "-h"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 0, runEval(args, &stdout, &stderr), "%v", args)
		assert.True(t, strings.HasPrefix(stdout.String(), "Usage:"), "%v", args)
	}
}

const routingTrain = `{"text": "what is the weather in paris", "intent": "weather"}
{"text": "will it rain tomorrow", "intent": "weather"}
{"text": "is it going to snow this weekend", "intent": "weather"}
{"text": "weather forecast for berlin", "intent": "weather"}
{"text": "how hot will it be today", "intent": "weather"}
{"text": "set a timer for 10 minutes", "intent": "timer"}
{"text": "start a 5 minute timer", "intent": "timer"}
{"text": "cancel my timer", "intent": "timer"}
{"text": "how much time is left on the timer", "intent": "timer"}
{"text": "set a countdown for 20 minutes", "intent": "timer"}

{"text": "translate hello into french", "intent": "translate"}
{"text": "how do you say thank you in spanish", "intent": "translate"}
{"text": "what does danke mean", "intent": "translate"}
{"text": "translate this sentence to german", "intent": "translate"}
{"text": "say good morning in italian", "intent": "translate"}
{"text": "tell me a joke", "label": "oos"}
{"text": "who won the game last night", "intent": "oos"}
`

const routingTest = `{"text": "what's the weather like in rome", "intent": "weather"}
{"text": "is it raining in london", "intent": "weather"}
{"text": "set a timer for three minutes", "intent": "timer"}
{"text": "please start a kitchen timer", "intent": "timer"}
{"text": "how do i say good night in french", "intent": "translate"}
{"text": "translate i am hungry into spanish", "intent": "translate"}
{"text": "what is the capital of peru", "intent": "oos"}
{"text": "photosynthesis in plants", "intent": "oos"}
`

const routingDomains = `{"weather": "utility", "timer": "utility", "translate": "travel"}`

func TestEvalRouting(t *testing.T) {
	dir := t.TempDir()
	train := filepath.Join(dir, "train.jsonl")
	test := filepath.Join(dir, "test.jsonl")
	require.NoError(t, os.WriteFile(train, []byte(routingTrain), 0o600))
	require.NoError(t, os.WriteFile(test, []byte(routingTest), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "domains.json"), []byte(routingDomains), 0o600))

	out := evalOK(t, "routing", "--train", train, "--test", test)
	assert.Contains(t, out, "routing evaluation: lexical classifier, intent granularity")
	assert.Contains(t, out, "17 utterances, 4 agents")
	assert.Contains(t, out, "no --val: threshold")
	assert.Contains(t, out, "8 utterances, 6 in scope, 2 out of scope")
	assert.Regexp(t, `(?m)^at threshold \d\.\d{3}\s+\d+\.\d\d%`, out)
	assert.Regexp(t, `(?m)^at the default 0\.7\s`, out)
	assert.Regexp(t, `(?m)^in scope\s+\d+\s+\d+\s+\d+\s+0\s+\d+$`, out)
	assert.Contains(t, out, "µs per message")

	out = evalOK(t, "routing", "--train", train, "--val", test, "--test", test, "--json", "--oos-examples=false")
	var rep struct {
		Classifier, Granularity, ThresholdFrom string
		OOSExamples                            bool
		Agents                                 int
		ValFile                                struct{ Count int }
		Test                                   struct {
			Utterances, InScope, OOS int
			InScopeAccuracy          float64
			Decisions                struct{ InScope, OOS map[string]int }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, "lexical", rep.Classifier)
	assert.Equal(t, "intent", rep.Granularity)
	assert.Equal(t, "val", rep.ThresholdFrom)
	assert.False(t, rep.OOSExamples)
	assert.Equal(t, 4, rep.Agents)
	assert.Equal(t, 8, rep.ValFile.Count)
	assert.Equal(t, 6, rep.Test.InScope)
	assert.Equal(t, 2, rep.Test.OOS)
	total := 0
	for _, row := range []map[string]int{rep.Test.Decisions.InScope, rep.Test.Decisions.OOS} {
		for _, n := range row {
			total += n
		}
	}
	assert.Equal(t, 8, total, "every utterance has one decision")

	out = evalOK(t, "routing", "--train", train, "--test", test, "--granularity", "domain")
	assert.Contains(t, out, "domain granularity")
	assert.Contains(t, out, "3 agents", "two domains and the default agent")
}

func TestEvalRoutingErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	train := write("train.jsonl", routingTrain)
	test := write("test.jsonl", routingTest)
	badJSON := write("bad.jsonl", routingTest+"{oops\n")
	noText := write("notext.jsonl", `{"intent": "weather"}`+"\n")
	unknown := write("unknown.jsonl", `{"text": "play jazz", "intent": "music"}`+"\n")
	domains := write("domains.json", `{"weather": "utility"}`)
	badDomains := write("baddomains.json", `["not", "an", "object"]`)
	missing := filepath.Join(dir, "missing.jsonl")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no test", []string{"routing", "--train", train}, 2, "--test is required"},
		{"bad granularity", []string{"routing", "--train", train, "--test", test, "--granularity", "word"}, 2, `unknown granularity "word"`},
		{"domains without domain", []string{"routing", "--train", train, "--test", test, "--domains", domains}, 2, "--domains needs --granularity domain"},
		{"stray argument", []string{"routing", "--train", train, "--test", test, "x"}, 2, `unexpected argument "x"`},
		{"missing file", []string{"routing", "--train", missing, "--test", test}, 1, "missing.jsonl"},
		{"bad JSON names file and line", []string{"routing", "--train", train, "--test", badJSON}, 1, "bad.jsonl:9: invalid JSON"},
		{"no text", []string{"routing", "--train", noText, "--test", test}, 1, `notext.jsonl:1: utterance has no "text"`},
		{"label not in train", []string{"routing", "--train", train, "--test", unknown}, 1, `unknown.jsonl:1: label "music" is not in the training file`},
		{"intent without domain", []string{"routing", "--train", train, "--test", test, "--granularity", "domain", "--domains", domains}, 1, `train.jsonl:6: intent "timer" has no domain`},
		{"bad domains", []string{"routing", "--train", train, "--test", test, "--granularity", "domain", "--domains", badDomains}, 1, "baddomains.json"},
		{"no domains next to train", []string{"routing", "--train", train, "--test", test, "--granularity", "domain"}, 1, "domains.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "no domains next to train" {
				require.NoError(t, os.Remove(domains))
				defer os.WriteFile(domains, []byte(`{"weather": "utility"}`), 0o600)
			}
			assertEvalFails(t, tt.args, tt.code, tt.stderr)
		})
	}
}
