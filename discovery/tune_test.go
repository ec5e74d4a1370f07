package discovery

import (
	"cmp"
	"hash/fnv"
	"os"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/internal/harness/evalharness"
)

// TestAblation measures what each text-processing and scoring technique
// gains on the MetaTool dev split. Run with AGENTMESH_TUNE=1.
func TestAblation(t *testing.T) {
	if os.Getenv("AGENTMESH_TUNE") == "" {
		t.Skip("set AGENTMESH_TUNE=1")
	}
	_, queries := loadMetatool(t)
	corpusEngine := func(topt textOptions, p scoring) *Engine {
		e, _ := loadMetatool(t)
		e.text = topt
		e.params = p
		return e
	}
	flat := scoring{k1: 1.2, weight: [numFields]float64{1, 1, 1, 1, 1}, b: [numFields]float64{.75, .75, .75, .75, .75}}
	nameDesc := uint8(1<<fieldName | 1<<fieldDescription)
	steps := []struct {
		name string
		topt textOptions
		p    scoring
	}{
		{"plain bm25 name+desc", textOptions{noStem: true, noStop: true, noSplit: true, noSegment: true, fields: nameDesc}, flat},
		{"+ split identifiers", textOptions{noStem: true, noStop: true, noSegment: true, fields: nameDesc}, flat},
		{"+ stop words", textOptions{noStem: true, noSegment: true, fields: nameDesc}, flat},
		{"+ stemming", textOptions{noSegment: true, fields: nameDesc}, flat},
		{"+ displayName", textOptions{noSegment: true}, flat},
		{"+ segmentation", textOptions{}, flat},
		{"+ field weights/b (default)", textOptions{}, defaultScoring},
	}
	for _, st := range steps {
		e := corpusEngine(st.topt, st.p)
		e.Reset(mustCorpus(t))
		rep := evaluate(t, e, queries, ScorerBM25)
		t.Logf("%-32s %s | single R@1=%.4f R@5=%.4f | multi nDCG@10=%.4f", st.name, fmtMetrics(rep.Overall),
			rep.Subsets["single-tool"].RecallAt1, rep.Subsets["single-tool"].RecallAt5, rep.Subsets["multi-tool"].NDCGAt10)
	}
}

// splitHalves splits queries deterministically into two halves by the
// FNV hash of their text.
func splitHalves(qs []evalharness.Query) (a, b []evalharness.Query) {
	for _, q := range qs {
		h := fnv.New32a()
		h.Write([]byte(q.Text))
		if h.Sum32()%2 == 0 {
			a = append(a, q)
		} else {
			b = append(b, q)
		}
	}
	return a, b
}

func objective(m evalharness.Metrics) float64 { return (m.RecallAt1 + m.RecallAt5 + m.NDCGAt10) / 3 }

// TestTuneGrid searches BM25F parameters on one half of the dev split and
// reports them on the other. Run with AGENTMESH_TUNE=1.
func TestTuneGrid(t *testing.T) {
	if os.Getenv("AGENTMESH_TUNE") == "" {
		t.Skip("set AGENTMESH_TUNE=1")
	}
	e, queries := loadMetatool(t)
	corpus := mustCorpus(t)
	a, b := splitHalves(queries)
	type cand struct {
		p    scoring
		objA float64
	}
	var cands []cand
	for _, k1 := range []float64{0.6, 0.9, 1.2, 1.6, 2.0} {
		for _, bd := range []float64{0.3, 0.5, 0.75, 0.9} {
			for _, wn := range []float64{1, 2, 3, 5} {
				for _, wd := range []float64{0.5, 1, 2, 3} {
					for _, bn := range []float64{0.25, 0.5, 0.75} {
						p := defaultScoring
						p.k1 = k1
						p.b[fieldDescription], p.b[fieldExamples] = bd, bd
						p.weight[fieldName], p.weight[fieldCapabilities] = wn, wn
						p.weight[fieldDisplayName] = wd
						p.b[fieldName], p.b[fieldDisplayName], p.b[fieldCapabilities] = bn, bn, bn
						e.params = p
						e.Reset(corpus)
						rep := evaluate(t, e, a, ScorerBM25)
						cands = append(cands, cand{p, objective(rep.Overall)})
					}
				}
			}
		}
	}
	slices.SortFunc(cands, func(x, y cand) int { return cmp.Compare(y.objA, x.objA) })
	e.params = defaultScoring
	e.Reset(corpus)
	def := evaluate(t, e, b, ScorerBM25)
	defA := evaluate(t, e, a, ScorerBM25)
	t.Logf("default: A obj=%.4f  B %s obj=%.4f", objective(defA.Overall), fmtMetrics(def.Overall), objective(def.Overall))
	for _, c := range cands[:15] {
		e.params = c.p
		e.Reset(corpus)
		rep := evaluate(t, e, b, ScorerBM25)
		t.Logf("k1=%.1f b=%v w=%v A obj=%.4f  B %s obj=%.4f", c.p.k1, c.p.b, c.p.weight, c.objA, fmtMetrics(rep.Overall), objective(rep.Overall))
	}
}
