package routing

// Tuning and ablation on CLINC150's training split. Every design choice of
// the lexical classifier was made here, on a split of train (per intent, a
// fixed fifth held out; half of the 100 out-of-scope training utterances
// held out as out-of-scope queries, the other half given to the default
// agent), never on the validation file, which TestLexicalAblation only reports.
// The tests skip unless AGENTMESH_TUNE=1:
//
//	AGENTMESH_TUNE=1 go test -run 'TestLexical(Ablation|Tune)' -v ./routing

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/registry"
)

func tuneSkip(t *testing.T) {
	if os.Getenv("AGENTMESH_TUNE") == "" {
		t.Skip("set AGENTMESH_TUNE=1")
	}
}

type tuneUtterance struct {
	Text   string `json:"text"`
	Intent string `json:"intent"`
}

func tuneClincDir() string {
	if d := os.Getenv("AGENTMESH_CLINC150"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared", "data", "clinc150")
}

func tuneLoad(t testing.TB, name string) []tuneUtterance {
	t.Helper()
	f, err := os.Open(filepath.Join(tuneClincDir(), name))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no CLINC150 data in %s", tuneClincDir())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []tuneUtterance
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var u tuneUtterance
		if err := json.Unmarshal(sc.Bytes(), &u); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// tuneByIntent groups the in-scope utterances of CLINC150 train (all but
// oos) by intent; intents lists the intents in the order the file has them.
func tuneByIntent(t testing.TB) (by map[string][]tuneUtterance, intents []string) {
	t.Helper()
	by = map[string][]tuneUtterance{}
	for _, u := range tuneLoad(t, "train.jsonl") {
		if u.Intent == "oos" {
			continue
		}
		if by[u.Intent] == nil {
			intents = append(intents, u.Intent)
		}
		by[u.Intent] = append(by[u.Intent], u)
	}
	return by, intents
}

// tuneSplit is a train/held-out split of CLINC150 train: per intent, a
// fixed random fifth (fold 0–4) held out. The 100 oos train utterances are
// all held out, or with splitOOS half of them (by fold parity), the other
// half staying in train. Val is never looked at.
func tuneSplit(t testing.TB, fold int, splitOOS bool) (train, held []tuneUtterance) {
	all := tuneLoad(t, "train.jsonl")
	by := map[string][]tuneUtterance{}
	var intents []string
	for _, u := range all {
		if u.Intent == "oos" && !splitOOS {
			held = append(held, u)
			continue
		}
		if by[u.Intent] == nil {
			intents = append(intents, u.Intent)
		}
		by[u.Intent] = append(by[u.Intent], u)
	}
	for _, in := range intents {
		us := by[in]
		rng := rand.New(rand.NewPCG(7, 7))
		rng.Shuffle(len(us), func(i, j int) { us[i], us[j] = us[j], us[i] })
		n := len(us) / 5
		for i, u := range us {
			if in == "oos" && (i%2 == fold%2) || in != "oos" && i/n == fold {
				held = append(held, u)
			} else {
				train = append(train, u)
			}
		}
	}
	return train, held
}

// tuneScored is a prediction as the threshold sees it: conf < 0 never routes.
type tuneScored struct {
	gold, pred string
	conf       float64
}

// tuneResult: top-1 accuracy of in-scope (raw), and at the best threshold
// in-scope accuracy, oos recall; thr is the threshold; auroc separates
// in-scope from oos by confidence.
type tuneResult struct {
	raw, inAcc, oosRecall, thr, auroc float64
}

func (r tuneResult) String() string {
	return fmt.Sprintf("raw %.2f  in %.2f  oos %.2f  thr %.3f  auroc %.4f", 100*r.raw, 100*r.inAcc, 100*r.oosRecall, r.thr, r.auroc)
}

// tuneEvaluate picks the threshold maximising accuracy over all of res and
// reports in-scope accuracy and oos recall there.
func tuneEvaluate(res []tuneScored) tuneResult {
	var r tuneResult
	nIn, nOOS := 0, 0
	for _, s := range res {
		if s.gold == "oos" {
			nOOS++
		} else {
			nIn++
			if s.pred == s.gold {
				r.raw++
			}
		}
	}
	r.raw /= float64(nIn)
	sorted := slices.Clone(res)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].conf < sorted[j].conf })
	// Threshold just above sorted[k-1]: the first k are rejected.
	correctRouted := 0
	for _, s := range sorted {
		if s.gold != "oos" && s.pred == s.gold {
			correctRouted++
		}
	}
	bestAcc, bestK := -1.0, 0
	rejOOS, rejCorrect := 0, 0
	for k := 0; k <= len(sorted); k++ {
		if k == 0 || k == len(sorted) || sorted[k].conf != sorted[k-1].conf {
			acc := float64(correctRouted-rejCorrect+rejOOS) / float64(len(sorted))
			if acc > bestAcc {
				bestAcc, bestK = acc, k
				r.inAcc = float64(correctRouted-rejCorrect) / float64(nIn)
				r.oosRecall = float64(rejOOS) / float64(nOOS)
			}
		}
		if k < len(sorted) {
			if sorted[k].gold == "oos" {
				rejOOS++
			} else if sorted[k].pred == sorted[k].gold {
				rejCorrect++
			}
		}
	}
	if bestK < len(sorted) {
		r.thr = sorted[bestK].conf
	}
	// AUROC of conf separating in-scope from oos.
	var pairs, wins float64
	seenOOS := 0.0
	for _, s := range sorted {
		if s.gold == "oos" {
			seenOOS++
		} else {
			wins += seenOOS
			pairs += float64(nOOS)
		}
	}
	r.auroc = wins / pairs
	return r
}

func tuneAUROC(gold []bool, score []float64) float64 {
	idx := make([]int, len(score))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return score[idx[a]] < score[idx[b]] })
	var pairs, wins, neg float64
	nNeg := 0.0
	for _, g := range gold {
		if !g {
			nNeg++
		}
	}
	for _, i := range idx {
		if !gold[i] {
			neg++
		} else {
			wins += neg
			pairs += nNeg
		}
	}
	return wins / pairs
}

// tuneAgents builds one agent per intent and the default agent "oos".
func tuneAgents(us []tuneUtterance, oosExamples bool) []registry.Agent {
	by := map[string][]string{}
	for _, u := range us {
		by[u.Intent] = append(by[u.Intent], u.Text)
	}
	var out []registry.Agent
	for l, ex := range by {
		if l == "oos" {
			a := registry.Agent{Name: "oos", IsDefault: true}
			if oosExamples {
				a.Examples = ex
			}
			out = append(out, a)
			continue
		}
		out = append(out, registry.Agent{Name: l, Examples: ex})
	}
	if by["oos"] == nil {
		out = append(out, registry.Agent{Name: "oos", IsDefault: true})
	}
	return out
}

// tunePred is a classification of a labelled utterance.
type tunePred struct {
	gold  string
	c     Classification
	ratio float64 // p2/p1
}

// tuneScoredOf turns classifications into what the gate sees: the default
// agent and ambiguous predictions never route.
func tuneScoredOf(ps []tunePred) []tuneScored {
	out := make([]tuneScored, len(ps))
	for i, p := range ps {
		out[i] = tuneScored{p.gold, p.c.AgentID, p.c.Confidence}
		if p.c.AgentID == "oos" || p.c.Ambiguous {
			out[i].conf = -1
		}
	}
	return out
}

// TestLexicalTuneSmallCalibration fits the calibration that small registries
// (too few examples to calibrate themselves) get, on many small registries
// drawn from CLINC150 train (tuneSmallRegistries: unbalanced, some agents with
// a name only, a fifth of the messages out of scope for the registry); the
// joint fit over all shapes gives defaultParams.cal and calPerLogK.
func TestLexicalTuneSmallCalibration(t *testing.T) {
	tuneSkip(t)
	p := defaultParams
	p.minHoldout = 1 << 30 // never self-calibrate
	var allX [][]float64
	var allY []float64
	for _, shape := range [][2]int{{2, 3}, {3, 5}, {5, 10}, {8, 5}, {10, 20}, {20, 10}, {30, 5}} {
		k, n := shape[0], shape[1]
		regs, held := tuneSmallRegistries(t, k, n, 20, true)
		var xs [][]float64
		var ys []float64
		for r := range regs {
			ts := buildTrainSet(regs[r], func(string) *agentLive { return &agentLive{} }, &p)
			m, err := buildModel(context.Background(), ts, &p)
			if err != nil {
				t.Fatal(err)
			}
			x := &extractor{opts: p.feat}
			z := make([]float32, len(m.classes))
			for _, u := range held[r] {
				hs := x.extract(u.Text)
				v, st := m.voc.vectorize(hs, &p.vec, sparse{})
				m.lin.logits(v, z)
				softmaxInPlace(z)
				b := argmax(z)
				e := p.cal.evidence(float64(z[b]), st.coverage(p.idfCoverage))
				xs = append(xs, []float64{e})
				allX = append(allX, []float64{e, math.Log(float64(len(m.classes)))})
				if m.classes[b].name == u.Intent {
					ys = append(ys, 1)
				} else {
					ys = append(ys, 0)
				}
			}
		}
		w := fitLogistic(xs, ys, 1e-3)
		acc := 0.0
		for _, y := range ys {
			acc += y
		}
		t.Logf("%2d agents × ~%2d examples: right %.2f, alpha %.3f beta %.3f", k, n, acc/float64(len(ys)), w[0], w[1])
		allY = append(allY, ys...)
	}
	w := fitLogistic(allX, allY, 1e-3)
	t.Logf("joint: alpha %.3f, beta %.3f %+.3f·ln(agents)", w[0], w[2], w[1])
}

// TestLexicalTuneSmallOOS measures, on small registries drawn from CLINC150
// train, how well the confidence evidence separates right calls from
// wrong ones and from messages for other intents (out of scope for the
// registry), for several coverage weightings.
func TestLexicalTuneSmallOOS(t *testing.T) {
	tuneSkip(t)
	by, intents := tuneByIntent(t)
	type variant struct {
		idf bool
		w   float64
	}
	variants := []variant{{false, 0}, {false, 4}, {false, 8}, {true, 2}, {true, 4}, {true, 8}}
	for _, shape := range [][2]int{{3, 5}, {5, 10}, {20, 10}} {
		k, n := shape[0], shape[1]
		gold := []bool{}
		ev := make([][]float64, len(variants))
		rng := rand.New(rand.NewPCG(uint64(k), uint64(n)))
		for range 30 {
			perm := rng.Perm(len(intents))
			var agents []registry.Agent
			type h struct {
				u  tuneUtterance
				in bool
			}
			var held []h
			for _, i := range perm[:k] {
				us := by[intents[i]]
				o := rng.Perm(len(us))
				a := registry.Agent{Name: intents[i]}
				for _, j := range o[:n] {
					a.Examples = append(a.Examples, us[j].Text)
				}
				agents = append(agents, a)
				for _, j := range o[n : n+4] {
					held = append(held, h{us[j], true})
				}
			}
			for _, i := range perm[k : 2*k] {
				us := by[intents[i]]
				held = append(held, h{us[rng.IntN(len(us))], false})
			}
			p := defaultParams
			ts := buildTrainSet(agents, func(string) *agentLive { return &agentLive{} }, &p)
			m, err := buildModel(context.Background(), ts, &p)
			if err != nil {
				t.Fatal(err)
			}
			x := &extractor{opts: p.feat}
			z := make([]float32, len(m.classes))
			for _, hh := range held {
				hs := x.extract(hh.u.Text)
				v, st := m.voc.vectorize(hs, &p.vec, sparse{})
				m.lin.logits(v, z)
				softmaxInPlace(z)
				b := argmax(z)
				gold = append(gold, hh.in && m.classes[b].name == hh.u.Intent)
				for vi, va := range variants {
					c := calibration{coverage: va.w}
					ev[vi] = append(ev[vi], c.evidence(float64(z[b]), st.coverage(va.idf)))
				}
			}
		}
		for vi, va := range variants {
			t.Logf("%2d agents × %2d examples: idf %v weight %g: auroc(right vs rest) %.4f", k, n, va.idf, va.w, tuneAUROC(gold, ev[vi]))
		}
	}
}

// tunePredict trains the classifier with p (and the ambiguity ratio
// ambiguity) on train and classifies held.
func tunePredict(t testing.TB, p *lexParams, ambiguity float64, train, held []tuneUtterance, oosExamples bool, agents ...registry.Agent) []tunePred {
	l := &Lexical{params: p}
	l.opts.Candidates = 2
	l.opts.AmbiguityRatio = ambiguity
	if agents == nil {
		agents = tuneAgents(train, oosExamples)
	}
	if err := l.Reset(context.Background(), agents); err != nil {
		t.Fatal(err)
	}
	out := make([]tunePred, 0, len(held))
	for _, u := range held {
		c, err := l.Classify(context.Background(), u.Text)
		if err != nil {
			t.Fatal(err)
		}
		r := 0.0
		if len(c.Candidates) > 1 {
			r = c.Candidates[1].Score / c.Candidates[0].Score
		}
		out = append(out, tunePred{u.Intent, c, r})
	}
	return out
}

// tuneCrossValidate averages the results of folds train/held-out splits.
func tuneCrossValidate(t *testing.T, p *lexParams, ambiguity float64, folds int, oosExamples bool) tuneResult {
	results := make([]tuneResult, folds)
	var wg sync.WaitGroup
	for f := range folds {
		wg.Go(func() {
			train, held := tuneSplit(t, f, true)
			results[f] = tuneEvaluate(tuneScoredOf(tunePredict(t, p, ambiguity, train, held, oosExamples)))
		})
	}
	wg.Wait()
	var sum tuneResult
	for _, r := range results {
		sum.raw += r.raw
		sum.inAcc += r.inAcc
		sum.oosRecall += r.oosRecall
		sum.auroc += r.auroc
	}
	n := float64(folds)
	return tuneResult{raw: sum.raw / n, inAcc: sum.inAcc / n, oosRecall: sum.oosRecall / n, auroc: sum.auroc / n}
}

// tuneOnVal trains on all of train and picks the threshold and scores on val.
func tuneOnVal(t *testing.T, p *lexParams, ambiguity float64, oosExamples bool) tuneResult {
	train := tuneLoad(t, "train.jsonl")
	val := tuneLoad(t, "val.jsonl")
	return tuneEvaluate(tuneScoredOf(tunePredict(t, p, ambiguity, train, val, oosExamples)))
}

// TestLexicalAblation measures what each technique gains, one added per row.
func TestLexicalAblation(t *testing.T) {
	tuneSkip(t)
	plain := defaultParams
	plain.feat = featureOptions{noStem: true, noBigrams: true, noChars: true}
	plain.vec = vecOptions{}
	plain.sgd = sgdOptions{epochs: 10, lr: 0.5, l2: 1e-5, seed: 1}
	plain.cal.coverage = 0
	plain.idfCoverage = false
	type step struct {
		name        string
		p           lexParams
		oosExamples bool
		ambiguity   float64
	}
	var steps []step
	add := func(name string, f func(*step)) {
		s := step{p: plain, ambiguity: 2}
		if len(steps) > 0 {
			s = steps[len(steps)-1]
		}
		s.name = name
		f(&s)
		steps = append(steps, s)
	}
	add("plain TF-IDF softmax regression (words)", func(*step) {})
	add("+ Porter2 stemming", func(s *step) { s.p.feat.noStem = false })
	add("+ word bigrams with sentence boundaries", func(s *step) { s.p.feat.noBigrams = false })
	add("+ character 2–4-grams", func(s *step) { s.p.feat.noChars, s.p.feat.charMin, s.p.feat.charMax = false, 2, 4 })
	add("+ SGD tuned (8 epochs, lr 4 decaying, no intercepts, min df 2)", func(s *step) { s.p.sgd, s.p.vec = defaultParams.sgd, defaultParams.vec })
	add("+ idf-weighted coverage in the confidence", func(s *step) { s.p.cal, s.p.idfCoverage = defaultParams.cal, true })
	add("+ default agent's examples as a class", func(s *step) { s.oosExamples = true })
	add("+ ambiguity flag (p2 ≥ 0.9·p1) in the gate", func(s *step) { s.ambiguity = DefaultAmbiguityRatio })
	t.Logf("%-48s | %-30s | %s", "step", "train CV: top-1 / in / oos / AUROC", "val: in-scope / oos recall")
	for _, s := range steps {
		cv := tuneCrossValidate(t, &s.p, s.ambiguity, 4, s.oosExamples)
		val := tuneOnVal(t, &s.p, s.ambiguity, s.oosExamples)
		t.Logf("%-48s | %5.2f / %5.2f / %5.1f / %.4f | %5.2f / %5.1f", s.name,
			100*cv.raw, 100*cv.inAcc, 100*cv.oosRecall, cv.auroc, 100*val.inAcc, 100*val.oosRecall)
	}
}

// TestLexicalTuneAmbiguity shows top-1 accuracy against the runner-up's score
// ratio (the ambiguity rule), and the reliability of the confidence.
func TestLexicalTuneAmbiguity(t *testing.T) {
	tuneSkip(t)
	var all []tunePred
	for f := range 2 {
		train, held := tuneSplit(t, f, true)
		all = append(all, tunePredict(t, &defaultParams, 2, train, held, true)...)
	}
	bins := []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01}
	for i := 0; i+1 < len(bins); i++ {
		n, right := 0, 0
		for _, p := range all {
			if p.gold == "oos" || p.ratio < bins[i] || p.ratio >= bins[i+1] {
				continue
			}
			n++
			if p.c.AgentID == p.gold {
				right++
			}
		}
		t.Logf("p2/p1 in [%.1f,%.1f): %4d in-scope, top-1 right %.2f", bins[i], bins[i+1], n, float64(right)/float64(max(n, 1)))
	}
	for i := range 10 {
		lo, hi := float64(i)/10, float64(i+1)/10+1e-9
		n, right, oos := 0, 0, 0
		for _, p := range all {
			if p.c.Confidence < lo || p.c.Confidence >= hi {
				continue
			}
			if p.gold == "oos" {
				oos++
				continue
			}
			n++
			if p.c.AgentID == p.gold {
				right++
			}
		}
		t.Logf("confidence in [%.1f,%.1f): %4d in-scope, right %.2f; %d out-of-scope", lo, hi, n, float64(right)/float64(max(n, 1)), oos)
	}
}

// TestLexicalTuneCoverage compares coverage weights (idf-weighted or not).
func TestLexicalTuneCoverage(t *testing.T) {
	tuneSkip(t)
	for _, oosEx := range []bool{true, false} {
		for _, v := range []struct {
			idf bool
			w   float64
		}{{false, 0}, {false, 8}, {true, 2}, {true, 3}, {true, 4}} {
			p := defaultParams
			p.idfCoverage, p.cal.coverage = v.idf, v.w
			r := tuneCrossValidate(t, &p, 2, 4, oosEx)
			t.Logf("oos examples %-5v idf %-5v weight %g: %s", oosEx, v.idf, v.w, r)
		}
	}
}

// tuneSmallRegistries draws trials registries from CLINC150 train: k agents,
// each with a random number of examples in [1, 2n] (0 for every fourth
// agent when profiles is set: it then has only its intent's name as
// display name), and held-out messages: 4 per agent's intent and k from
// other intents (out of scope for the registry).
func tuneSmallRegistries(t *testing.T, k, n, trials int, profiles bool) (regs [][]registry.Agent, held [][]tuneUtterance) {
	by, intents := tuneByIntent(t)
	rng := rand.New(rand.NewPCG(uint64(k), uint64(n)))
	for range trials {
		perm := rng.Perm(len(intents))
		var agents []registry.Agent
		var hs []tuneUtterance
		for ai, i := range perm[:k] {
			us := by[intents[i]]
			o := rng.Perm(len(us))
			a := registry.Agent{Name: intents[i]}
			m := 1 + rng.IntN(2*n)
			if profiles && ai%4 == 3 {
				m = 0
				a.DisplayName = strings.ReplaceAll(intents[i], "_", " ")
			}
			for _, j := range o[:m] {
				a.Examples = append(a.Examples, us[j].Text)
			}
			agents = append(agents, a)
			for _, j := range o[m : m+4] {
				hs = append(hs, us[j])
			}
		}
		for _, i := range perm[k : 2*k] {
			us := by[intents[i]]
			u := us[rng.IntN(len(us))]
			u.Intent = "oos"
			hs = append(hs, u)
		}
		regs = append(regs, agents)
		held = append(held, hs)
	}
	return regs, held
}

// TestLexicalTuneSmall compares training settings on small, unbalanced
// registries: top-1 accuracy, how well the confidence separates right
// calls from the rest, and what the default threshold (0.7) routes.
func TestLexicalTuneSmall(t *testing.T) {
	tuneSkip(t)
	type variant struct {
		name string
		f    func(*lexParams)
	}
	variants := []variant{
		{"current", func(*lexParams) {}},

		{"linear decay", func(p *lexParams) { p.sgd.linearDecay = true }},
		{"linear decay lr 8", func(p *lexParams) { p.sgd.linearDecay, p.sgd.lr = true, 8 }},
		{"no balance", func(p *lexParams) { p.balance = false }},
	}
	for _, shape := range [][2]int{{3, 5}, {8, 5}, {20, 10}} {
		regs, held := tuneSmallRegistries(t, shape[0], shape[1], 20, true)
		for _, v := range variants {
			p := defaultParams
			v.f(&p)
			var gold []bool
			var conf []float64
			right, in, oosRouted, oos, rightRouted := 0, 0, 0, 0, 0
			for r := range regs {
				ps := tunePredict(t, &p, 2, nil, held[r], false, regs[r]...)
				for _, pp := range ps {
					ok := pp.gold == pp.c.AgentID
					gold = append(gold, ok)
					conf = append(conf, pp.c.Confidence)
					if pp.gold == "oos" {
						oos++
						if pp.c.Confidence >= 0.7 {
							oosRouted++
						}
						continue
					}
					in++
					if ok {
						right++
						if pp.c.Confidence >= 0.7 {
							rightRouted++
						}
					}
				}
			}
			t.Logf("%2d×%2d %-24s top-1 %.3f  auroc %.4f  at 0.7: right routed %.3f, oos routed %.3f", shape[0], shape[1], v.name,
				float64(right)/float64(in), tuneAUROC(gold, conf), float64(rightRouted)/float64(in), float64(oosRouted)/float64(oos))
		}
	}
}

func TestLexicalTuneDecay(t *testing.T) {
	tuneSkip(t)
	for _, v := range []struct {
		ld bool
		lr float64
		ep int
	}{{false, 4, 8}, {true, 4, 8}, {true, 8, 8}, {true, 4, 12}} {
		for _, oosEx := range []bool{true, false} {
			p := defaultParams
			p.sgd.linearDecay, p.sgd.lr, p.sgd.epochs = v.ld, v.lr, v.ep
			t.Logf("linear decay %v lr %g epochs %d oos examples %v: %s", v.ld, v.lr, v.ep, oosEx, tuneCrossValidate(t, &p, DefaultAmbiguityRatio, 4, oosEx))
		}
	}
}

// TestLexicalTuneSpeed trades training cost against quality.
func TestLexicalTuneSpeed(t *testing.T) {
	tuneSkip(t)
	type variant struct {
		name string
		f    func(*lexParams)
	}
	for _, v := range []variant{
		{"current", func(*lexParams) {}},
		{"chars 3-4", func(p *lexParams) { p.feat.charMin = 3 }},
		{"skip easy 0.03", func(p *lexParams) { p.sgd.skipEasy = 0.03 }},
		{"6 epochs", func(p *lexParams) { p.sgd.epochs = 6 }},
		{"6 epochs, skip 0.03", func(p *lexParams) { p.sgd.epochs, p.sgd.skipEasy = 6, 0.03 }},
	} {
		p := defaultParams
		v.f(&p)
		train := tuneLoad(t, "train.jsonl")
		ts := buildTrainSet(tuneAgents(train, true), func(string) *agentLive { return &agentLive{} }, &p)
		start := time.Now()
		if _, _, err := fit(context.Background(), ts, func(int) bool { return true }, &p); err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		t.Logf("%-22s fit %.2fs  oos ex: %s  no oos ex: %s", v.name, el.Seconds(),
			tuneCrossValidate(t, &p, DefaultAmbiguityRatio, 4, true), tuneCrossValidate(t, &p, DefaultAmbiguityRatio, 4, false))
	}
}
