package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/harness/evalharness"
	"github.com/agentmesh/agentmesh/internal/harness/evalrouting"
)

const evalUsage = `Usage:
  agentmesh eval discovery --corpus FILE --queries FILE [--scorer bm25|overlap] [--json]
  agentmesh eval routing --train FILE --test FILE [--val FILE]
                         [--granularity intent|domain] [--domains FILE] [--oos-examples=false] [--json]

eval discovery measures how well discovery ranks a corpus of agents for labelled
queries: Recall@1, Recall@5, nDCG@10 and MRR, overall and per query subset.

  --corpus FILE    JSON Lines, one agent per line: {"id" or "name", "description",
                   "capabilities", "display_name" or "displayName", "examples"}
  --queries FILE   JSON Lines, one query per line: {"query", "relevant": [ids], "subset"}
  --scorer NAME    bm25 (default) or overlap
  --json           print the report as JSON instead of a table

eval routing measures the lexical classifier and the confidence gate on labelled
utterances, as Larson et al. (2019) evaluate CLINC150: one agent per label learns
from the training utterances, a default agent stands for out-of-scope ("oos"), the
confidence threshold that maximises accuracy on the validation file is picked, and
the test file is scored at it: in-scope accuracy, out-of-scope recall and the
gate's decisions (route, clarify, fallback).

  --train FILE        JSON Lines {"text", "intent"}; intent "oos" is out of scope
  --test FILE         the file to score, same format
  --val FILE          the file to pick the threshold on; without it the threshold
                      is picked on the test file (optimistic, and said so)
  --granularity G     intent (default): one agent per intent; domain: one agent per
                      domain of --domains, learning from all its intents' utterances
  --domains FILE      JSON object intent → domain; default domains.json next to --train
  --oos-examples      give the default agent the out-of-scope training utterances as
                      examples (default true); false is the paper's pure
                      oos-threshold scheme
  --json              print the report as JSON instead of a table

Exit status: 0 on success, 1 when a file cannot be read or is invalid
(the message names the file and line), 2 on a usage error.
`

// runEval runs "agentmesh eval TARGET ..." and returns the exit code.
func runEval(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, evalUsage)
		return 2
	}
	switch args[0] {
	case "discovery":
		return runEvalDiscovery(args[1:], stdout, stderr)
	case "routing":
		return runEvalRouting(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, evalUsage)
		return 0
	}
	fmt.Fprintf(stderr, "agentmesh eval: unknown target %q\n\n%s", args[0], evalUsage)
	return 2
}

// evalReport is the JSON form of a discovery evaluation.
type evalReport struct {
	Scorer  string                         `json:"scorer"`
	Corpus  evalFile                       `json:"corpus"`
	Queries evalFile                       `json:"queries"`
	Overall evalharness.Metrics            `json:"overall"`
	Subsets map[string]evalharness.Metrics `json:"subsets,omitempty"`
}

type evalFile struct {
	File  string `json:"file"`
	Count int    `json:"count"`
}

// evalUsageError returns the usage error of `agentmesh eval cmd`: it
// prints the message and the usage to stderr and returns exit code 2.
func evalUsageError(stderr io.Writer, cmd string) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agentmesh eval "+cmd+": "+format+"\n\n%s", append(a, evalUsage)...)
		return 2
	}
}

// parseEvalFlags parses the flags of an eval sub-command, which takes no
// arguments. done is true when the command must stop with code: after
// -help (0) or a usage error (2).
func parseEvalFlags(fs *flag.FlagSet, args []string, stdout io.Writer, usageErr func(string, ...any) int) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, evalUsage)
			return 0, true
		}
		return usageErr("%v", err), true
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0)), true
	}
	return 0, false
}

func runEvalDiscovery(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agentmesh eval discovery", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, with the usage
	var corpusFile, queriesFile, scorer string
	var asJSON bool
	fs.StringVar(&corpusFile, "corpus", "", "corpus file (JSON Lines)")
	fs.StringVar(&queriesFile, "queries", "", "queries file (JSON Lines)")
	fs.StringVar(&scorer, "scorer", string(discovery.ScorerBM25), "bm25 or overlap")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	usageErr := evalUsageError(stderr, "discovery")
	if code, done := parseEvalFlags(fs, args, stdout, usageErr); done {
		return code
	}
	switch {
	case corpusFile == "":
		return usageErr("--corpus is required")
	case queriesFile == "":
		return usageErr("--queries is required")
	}
	sc := discovery.Scorer(scorer)
	if sc != discovery.ScorerBM25 && sc != discovery.ScorerOverlap {
		return usageErr("unknown scorer %q (want bm25 or overlap)", scorer)
	}

	fail := func(err error) int {
		fmt.Fprintf(stderr, "agentmesh eval discovery: %v\n", err)
		return 1
	}
	corpus, err := evalharness.LoadCorpus(corpusFile)
	if err != nil {
		return fail(err)
	}
	queries, err := evalharness.LoadQueries(queriesFile)
	if err != nil {
		return fail(err)
	}
	if err := evalharness.Check(corpus, queries); err != nil {
		return fail(err)
	}

	e := discovery.New(nil)
	e.Reset(corpus)
	q := &discovery.Query{Scorer: sc, Limit: discovery.MaxLimit}
	rep, err := evalharness.Evaluate(queries, func(text string) ([]string, error) {
		res, err := e.Search(text, q)
		if errors.Is(err, discovery.ErrEmptyQuery) {
			return nil, nil // a query without words ranks nothing: a miss
		}
		names := make([]string, len(res))
		for i, r := range res {
			names[i] = r.Agent.Name
		}
		return names, err
	})
	if err != nil {
		return fail(err)
	}

	if asJSON {
		out := evalReport{
			Scorer:  string(sc),
			Corpus:  evalFile{corpusFile, len(corpus)},
			Queries: evalFile{queriesFile, len(queries)},
			Overall: rep.Overall,
			Subsets: rep.Subsets,
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return fail(err)
		}
		return 0
	}
	fmt.Fprintf(stdout, "discovery evaluation: scorer %s, %d agents (%s), %d queries (%s)\n\n",
		sc, len(corpus), corpusFile, len(queries), queriesFile)
	width := len("subset")
	for name := range rep.Subsets {
		width = max(width, len(name))
	}
	fmt.Fprintf(stdout, "%-*s  %7s  %6s  %6s  %7s  %6s\n", width, "subset", "queries", "R@1", "R@5", "nDCG@10", "MRR")
	row := func(name string, m evalharness.Metrics) {
		fmt.Fprintf(stdout, "%-*s  %7d  %.4f  %.4f  %7.4f  %.4f\n", width, name, m.Queries, m.RecallAt1, m.RecallAt5, m.NDCGAt10, m.MRR)
	}
	row("all", rep.Overall)
	for _, name := range rep.SubsetNames() {
		row(name, rep.Subsets[name])
	}
	fmt.Fprintf(stdout, "\nsearch time: %.3f s, %.1f µs per query\n",
		rep.Elapsed.Seconds(), float64(rep.Elapsed.Microseconds())/float64(len(queries)))
	return 0
}

// evalRoutingReport is the JSON form of a routing evaluation.
type evalRoutingReport struct {
	Classifier  string   `json:"classifier"`
	Granularity string   `json:"granularity"`
	TrainFile   evalFile `json:"trainFile"`
	ValFile     evalFile `json:"valFile,omitzero"`
	TestFile    evalFile `json:"testFile"`
	evalrouting.Report
}

func runEvalRouting(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agentmesh eval routing", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var trainFile, testFile, valFile, granularity, domainsFile string
	var asJSON, oosExamples bool
	fs.StringVar(&trainFile, "train", "", "training utterances (JSON Lines)")
	fs.StringVar(&testFile, "test", "", "test utterances (JSON Lines)")
	fs.StringVar(&valFile, "val", "", "validation utterances (JSON Lines)")
	fs.StringVar(&granularity, "granularity", "intent", "intent or domain")
	fs.StringVar(&domainsFile, "domains", "", "intent → domain map (JSON)")
	fs.BoolVar(&oosExamples, "oos-examples", true, "the default agent learns from the oos training utterances")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	usageErr := evalUsageError(stderr, "routing")
	if code, done := parseEvalFlags(fs, args, stdout, usageErr); done {
		return code
	}
	switch {
	case trainFile == "":
		return usageErr("--train is required")
	case testFile == "":
		return usageErr("--test is required")
	case granularity != "intent" && granularity != "domain":
		return usageErr("unknown granularity %q (want intent or domain)", granularity)
	case domainsFile != "" && granularity != "domain":
		return usageErr("--domains needs --granularity domain")
	}

	fail := func(err error) int {
		fmt.Fprintf(stderr, "agentmesh eval routing: %v\n", err)
		return 1
	}
	load := func(file string) ([]evalrouting.Utterance, error) {
		if file == "" {
			return nil, nil
		}
		return evalrouting.LoadUtterances(file)
	}
	train, err := load(trainFile)
	if err != nil {
		return fail(err)
	}
	val, err := load(valFile)
	if err != nil {
		return fail(err)
	}
	test, err := load(testFile)
	if err != nil {
		return fail(err)
	}
	if granularity == "domain" {
		if domainsFile == "" {
			domainsFile = filepath.Join(filepath.Dir(trainFile), "domains.json")
		}
		domains, err := evalrouting.LoadDomains(domainsFile)
		if err != nil {
			return fail(err)
		}
		for _, us := range []*[]evalrouting.Utterance{&train, &val, &test} {
			if *us == nil {
				continue
			}
			if *us, err = evalrouting.ToDomains(*us, domains); err != nil {
				return fail(err)
			}
		}
	}

	rep, err := evalrouting.Evaluate(context.Background(), evalrouting.Config{
		Train: train, Val: val, Test: test, OOSExamples: oosExamples,
	})
	if err != nil {
		return fail(err)
	}
	if asJSON {
		out := evalRoutingReport{
			Classifier:  "lexical",
			Granularity: granularity,
			TrainFile:   evalFile{trainFile, len(train)},
			TestFile:    evalFile{testFile, len(test)},
			Report:      rep,
		}
		if val != nil {
			out.ValFile = evalFile{valFile, len(val)}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return fail(err)
		}
		return 0
	}
	printRoutingReport(stdout, &rep, granularity, trainFile, valFile, testFile)
	return 0
}

func printRoutingReport(w io.Writer, rep *evalrouting.Report, granularity, trainFile, valFile, testFile string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	oos := "no examples (pure oos-threshold scheme)"
	if rep.OOSExamples {
		oos = "the out-of-scope training utterances as examples"
	}
	p("routing evaluation: lexical classifier, %s granularity\n", granularity)
	p("  train  %s: %d utterances, %d agents (the default agent %q has %s)\n",
		trainFile, rep.TrainUtterances, rep.Agents, evalrouting.DefaultAgent, oos)
	if rep.ThresholdFrom == "val" {
		p("  val    %s: %d utterances; threshold %.3f picked here (accuracy %s)\n",
			valFile, rep.Val.Utterances, rep.Threshold, pct(rep.PickAccuracy))
	} else {
		p("  no --val: threshold %.3f picked on the test file itself (accuracy %s)\n", rep.Threshold, pct(rep.PickAccuracy))
	}
	p("  test   %s: %d utterances, %d in scope, %d out of scope\n\n", testFile, rep.Test.Utterances, rep.Test.InScope, rep.Test.OOS)

	p("%-26s  %13s  %10s  %13s  %8s  %6s\n", "test", "in-scope acc", "oos recall", "oos precision", "accuracy", "top-1")
	row := func(name string, s *evalrouting.Scores) {
		p("%-26s  %13s  %10s  %13s  %8s  %6s\n", name, pct(s.InScopeAccuracy), pct(s.OOSRecall), pct(s.OOSPrecision), pct(s.Accuracy), pct(s.Top1))
	}
	row(fmt.Sprintf("at threshold %.3f", rep.Threshold), &rep.Test)
	row("at the default 0.7", &rep.TestAtDefault)

	p("\ndecisions at threshold %.3f (test)\n", rep.Threshold)
	p("%-14s  %11s  %11s  %13s  %7s  %8s\n", "", "route right", "route wrong", "route default", "clarify", "fallback")
	drow := func(name string, d evalrouting.DecisionRow) {
		p("%-14s  %11d  %11d  %13d  %7d  %8d\n", name, d.RouteRight, d.RouteWrong, d.RouteDefault, d.Clarify, d.Fallback)
	}
	drow("in scope", rep.Test.Decisions.InScope)
	drow("out of scope", rep.Test.Decisions.OOS)
	p("(eval agents do not ask for clarification: below threshold or ambiguous falls back)\n")

	p("\ntraining %.2f s (%d features), classification %.1f µs per message\n",
		rep.TrainTime.Seconds(), rep.Features, float64(rep.ClassifyTime.Nanoseconds())/1e3)
}
