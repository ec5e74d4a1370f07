package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/evalharness"
)

const evalUsage = `Usage:
  agentmesh eval discovery --corpus FILE --queries FILE [--scorer bm25|overlap] [--json]

Measures how well discovery ranks a corpus of agents for labelled queries:
Recall@1, Recall@5, nDCG@10 and MRR, overall and per query subset.

  --corpus FILE    JSON Lines, one agent per line: {"id" or "name", "description",
                   "capabilities", "display_name" or "displayName", "examples"}
  --queries FILE   JSON Lines, one query per line: {"query", "relevant": [ids], "subset"}
  --scorer NAME    bm25 (default) or overlap
  --json           print the report as JSON instead of a table

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
		// The routing evaluation (classifier accuracy on labelled
		// utterances) comes with the routing package.
		fmt.Fprintln(stderr, "agentmesh eval routing: not available yet; try \"agentmesh eval discovery\"")
		return 2
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

func runEvalDiscovery(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agentmesh eval discovery", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, with the usage
	var corpusFile, queriesFile, scorer string
	var asJSON bool
	fs.StringVar(&corpusFile, "corpus", "", "corpus file (JSON Lines)")
	fs.StringVar(&queriesFile, "queries", "", "queries file (JSON Lines)")
	fs.StringVar(&scorer, "scorer", string(discovery.ScorerBM25), "bm25 or overlap")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agentmesh eval discovery: "+format+"\n\n%s", append(a, evalUsage)...)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, evalUsage)
			return 0
		}
		return usageErr("%v", err)
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
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
