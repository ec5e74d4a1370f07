package discovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/internal/harness/evalharness"
	"github.com/agentmesh/agentmesh/registry"
)

// metatoolDir is where the MetaTool evaluation data lives, relative to the
// module root's parent (the shared data directory); override with
// AGENTMESH_METATOOL.
func metatoolDir() string {
	if d := os.Getenv("AGENTMESH_METATOOL"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared", "data", "metatool")
}

func mustCorpus(t testing.TB) []registry.Agent {
	t.Helper()
	dir := metatoolDir()
	corpus, err := evalharness.LoadCorpus(filepath.Join(dir, "corpus.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no MetaTool data in %s", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	return corpus
}

func loadMetatool(t testing.TB) (*Engine, []evalharness.Query) {
	t.Helper()
	corpus := mustCorpus(t)
	queries, err := evalharness.LoadQueries(filepath.Join(metatoolDir(), "queries_dev.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	e := New(nil)
	e.Reset(corpus)
	return e, queries
}

func evaluate(t testing.TB, e *Engine, queries []evalharness.Query, scorer Scorer) evalharness.Report {
	t.Helper()
	rep, err := evalharness.Evaluate(queries, func(q string) ([]string, error) {
		res, err := e.Search(q, &Query{Scorer: scorer, Limit: MaxLimit})
		if errors.Is(err, ErrEmptyQuery) {
			return nil, nil
		}
		names := make([]string, len(res))
		for i, r := range res {
			names[i] = r.Agent.Name
		}
		return names, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func fmtMetrics(m evalharness.Metrics) string {
	return fmt.Sprintf("n=%d R@1=%.4f R@5=%.4f nDCG@10=%.4f MRR=%.4f", m.Queries, m.RecallAt1, m.RecallAt5, m.NDCGAt10, m.MRR)
}

// TestQualityMetatool guards the quality targets on the MetaTool dev split.
func TestQualityMetatool(t *testing.T) {
	e, queries := loadMetatool(t)
	for _, sc := range []Scorer{ScorerBM25, ScorerOverlap} {
		rep := evaluate(t, e, queries, sc)
		t.Logf("%s: %s", sc, fmtMetrics(rep.Overall))
		for _, n := range rep.SubsetNames() {
			t.Logf("  %s: %s", n, fmtMetrics(rep.Subsets[n]))
		}
		if sc == ScorerBM25 && (rep.Overall.RecallAt1 < 0.40 || rep.Overall.RecallAt5 < 0.60) {
			t.Errorf("bm25 below target: %s", fmtMetrics(rep.Overall))
		}
	}
}
