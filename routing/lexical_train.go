package routing

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/internal/textnorm"
	"github.com/agentmesh/agentmesh/registry"
)

// lexParams are the lexical classifier's hyperparameters. They are not
// options: they were chosen by cross-validation on CLINC150's training
// split and on small registries drawn from it (lexical_tune_test.go).
type lexParams struct {
	feat featureOptions
	vec  vecOptions
	sgd  sgdOptions
	// The number of epochs is sgd.epochs, raised so that small training
	// sets still get minUpdates updates, up to maxEpochs.
	minUpdates int
	maxEpochs  int
	// maxDense caps features × agents of the dense model (its weight
	// matrix, 4 bytes each): a registry whose vocabulary would need more
	// gets the sparse model whatever its size.
	maxDense int
	// A registry of sparseFrom agents or more gets the sparse model
	// (sparseLinear), whose features shared by more than maxClassDF
	// agents (by kind of feature) get no weight, and which trains for at
	// most sparseEpochs epochs.
	sparseFrom   int
	maxClassDF   [numKinds]int
	sparseEpochs int
	// balance weighs classes equally, within a factor of maxClassWeight.
	balance        bool
	maxClassWeight float64

	// Calibration (see calibration): every holdoutEvery-th example of an
	// agent with at least holdoutEvery examples is held out to fit it,
	// when at least minHoldout examples are and the held-out model makes
	// at least minErrors mistakes and as many right calls.
	holdoutEvery int
	minHoldout   int
	minErrors    int
	// cal is the calibration of a registry too small to calibrate itself,
	// with calPerLogK·ln(agents) added to its beta: fitted on many small
	// registries drawn from CLINC150 train (TestLexicalTuneSmallCalibration).
	cal        calibration
	calPerLogK float64
	// idfCoverage weighs the coverage of a message by idf, so an unseen
	// word counts more than a common character pair.
	idfCoverage bool
}

var defaultParams = lexParams{
	feat:           featureOptions{charMin: 2, charMax: 4},
	vec:            vecOptions{minDF: [numKinds]int{1, 2, 2}, minDFTexts: 1000},
	sgd:            sgdOptions{epochs: 8, lr: 4, l2: 1e-6, seed: 1, skipEasy: 0.03, noBias: true, linearDecay: true},
	minUpdates:     20000,
	maxEpochs:      500,
	maxDense:       8 << 20, // 32 MiB; CLINC150's 150 agents need 4 M
	sparseFrom:     512,
	maxClassDF:     [numKinds]int{256, 256, 64},
	sparseEpochs:   4,
	balance:        true,
	maxClassWeight: 4,
	holdoutEvery:   5,
	minHoldout:     30,
	minErrors:      5,
	cal:            calibration{alpha: 2.61, beta: -2.42, coverage: 3},
	calPerLogK:     -0.31,
	idfCoverage:    true,
}

// calibration maps the model's evidence for its top class to a confidence:
// σ(alpha·(ln p + coverage·c) + beta), where p is the top class's softmax
// probability and c the fraction of the message's distinct features that
// the training texts contain, weighted by idf (textStats.coverage). The
// coverage term is what lets an
// out-of-scope message, whose words the agents never used, score low even
// when one agent happens to take most of the probability. alpha > 0, so
// the confidence grows with p and with c.
type calibration struct {
	alpha, beta, coverage float64
}

func (c *calibration) evidence(p, cov float64) float64 {
	return math.Log(max(p, 1e-12)) + c.coverage*cov
}

func (c *calibration) confidence(p, cov float64) float64 {
	return sigmoid(c.alpha*c.evidence(p, cov) + c.beta)
}

// agentLive is the part of an agent that changes without retraining: its
// TTL, last heartbeat and whether it was removed. Models share these, so a
// heartbeat or a removal takes effect at once.
type agentLive struct {
	lastSeen atomic.Int64 // unix nanoseconds
	ttl      atomic.Int64 // nanoseconds; 0: no TTL
	gone     atomic.Bool
}

func (a *agentLive) set(ag *registry.Agent) {
	a.lastSeen.Store(ag.LastSeen.UnixNano())
	a.ttl.Store(int64(time.Duration(ag.TTLSeconds) * time.Second))
}

// usable reports whether the agent can be routed to at now: not removed
// and not stale (registry.Agent.StaleAt).
func (a *agentLive) usable(now time.Time) bool {
	if a.gone.Load() {
		return false
	}
	ttl := a.ttl.Load()
	return ttl == 0 || now.UnixNano()-a.lastSeen.Load() <= ttl
}

// class is one agent the model can predict.
type class struct {
	name      string
	display   string
	isDefault bool
	live      *agentLive
}

// trainSet is what a model learns from: the hashed features of every
// training text and its class.
type trainSet struct {
	classes []class
	docs    [][]uint64
	labels  []int32
	holdout []bool // held out to fit the calibration
	// The default agent, also when it has no examples (and is no class).
	defaultName string
	defaultLive *agentLive
}

// agentTexts returns the training texts of a: its examples, then a
// profile text of its display name and capabilities, then each sentence of
// its description. The default agent learns from its examples only: its
// description and capabilities describe a catch-all, not a topic.
func agentTexts(a *registry.Agent) (examples, profile []string) {
	for _, e := range a.Examples {
		if strings.TrimSpace(e) != "" {
			examples = append(examples, e)
		}
	}
	if a.IsDefault {
		return examples, nil
	}
	var b strings.Builder
	b.WriteString(a.DisplayName)
	for _, c := range a.Capabilities {
		b.WriteByte(' ')
		b.WriteString(c)
		// "costCenter" also as "cost center".
		for _, part := range textnorm.SplitIdentifier(nil, c) {
			b.WriteByte(' ')
			b.WriteString(part)
		}
	}
	if p := strings.TrimSpace(b.String()); p != "" {
		profile = append(profile, p)
	}
	profile = append(profile, sentences(a.Description)...)
	return examples, profile
}

// sentences splits text at sentence punctuation and line breaks.
func sentences(text string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(text, func(r rune) bool {
		switch r {
		case '.', '!', '?', ';', '\n', '\r', '。', '！', '？':
			return true
		}
		return false
	}) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// buildTrainSet turns agents into training texts. live returns the shared
// live state of an agent by name.
func buildTrainSet(agents []registry.Agent, live func(name string) *agentLive, p *lexParams) *trainSet {
	agents = slices.Clone(agents)
	slices.SortFunc(agents, func(a, b registry.Agent) int { return strings.Compare(a.Name, b.Name) })
	ts := &trainSet{}
	x := &extractor{opts: p.feat}
	add := func(text string, c int32, held bool) {
		hs := x.extract(text)
		if len(hs) == 0 {
			return
		}
		ts.docs = append(ts.docs, slices.Clone(hs))
		ts.labels = append(ts.labels, c)
		ts.holdout = append(ts.holdout, held)
	}
	for i := range agents {
		a := &agents[i]
		if a.IsDefault && ts.defaultName == "" {
			ts.defaultName, ts.defaultLive = a.Name, live(a.Name)
		}
		examples, profile := agentTexts(a)
		if len(examples)+len(profile) == 0 {
			continue
		}
		c := int32(len(ts.classes))
		n := len(ts.docs)
		every := p.holdoutEvery
		for j, e := range examples {
			add(e, c, len(examples) >= every && j%every == every-1)
		}
		for _, t := range profile {
			add(t, c, false)
		}
		if len(ts.docs) == n {
			continue // no words anywhere
		}
		ts.classes = append(ts.classes, class{
			name:      a.Name,
			display:   cmpOr(a.DisplayName, a.Name),
			isDefault: a.IsDefault && a.Name == ts.defaultName,
			live:      live(a.Name),
		})
	}
	return ts
}

func cmpOr(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// lexModel is a trained lexical classifier. It is immutable once built;
// the live state of its agents is shared with the classifier.
type lexModel struct {
	p            *lexParams
	classes      []class
	defaultClass int // index in classes, or -1
	defaultName  string
	defaultLive  *agentLive
	voc          *vocabulary
	lin          scorer
	cal          calibration
	info         LexicalInfo
}

// fit learns a vocabulary and weights from the texts of ts for which use
// returns true.
func fit(ctx context.Context, ts *trainSet, use func(i int) bool, p *lexParams) (*vocabulary, scorer, error) {
	var docs [][]uint64
	var labels []int32
	for i, d := range ts.docs {
		if use(i) {
			docs = append(docs, d)
			labels = append(labels, ts.labels[i])
		}
	}
	voc := buildVocabulary(docs, &p.vec, 0)
	large := len(ts.classes) >= p.sparseFrom || len(voc.idf)*len(ts.classes) > p.maxDense
	// Class weights: each class's texts weigh as much in total as an
	// average class's (within a factor of maxClassWeight), so an agent
	// is not preferred for having more examples.
	count := make([]int, len(ts.classes))
	for _, c := range labels {
		count[c]++
	}
	weight := make([]float32, len(ts.classes))
	for c, n := range count {
		w := 1.0
		if p.balance && n > 0 {
			w = float64(len(docs)) / float64(len(ts.classes)*n)
			w = min(max(w, 1/p.maxClassWeight), p.maxClassWeight)
		}
		weight[c] = float32(w)
	}
	samples := make([]sample, len(docs))
	for i, d := range docs {
		v, _ := voc.vectorize(d, &p.vec, sparse{})
		samples[i] = sample{x: v, class: labels[i], weight: weight[labels[i]]}
	}
	o := p.sgd
	if len(samples) > 0 && o.epochs*len(samples) < p.minUpdates {
		o.epochs = min(p.maxEpochs, (p.minUpdates+len(samples)-1)/len(samples))
	}
	if large {
		o.epochs = min(o.epochs, p.sparseEpochs)
		lin, err := trainSparse(ctx, samples, voc.kind, len(ts.classes), &p.maxClassDF, o)
		return voc, lin, err
	}
	lin, err := trainLinear(ctx, samples, len(voc.idf), len(ts.classes), o)
	return voc, lin, err
}

// calibrate fits the calibration on held-out examples with a model trained
// on the rest, or returns the default calibration when there are too few.
func calibrate(ctx context.Context, ts *trainSet, p *lexParams) (calibration, error) {
	held := 0
	for _, h := range ts.holdout {
		if h {
			held++
		}
	}
	fallback := p.cal
	fallback.beta += p.calPerLogK * math.Log(float64(max(1, len(ts.classes))))
	if held < p.minHoldout {
		return fallback, nil
	}
	voc, lin, err := fit(ctx, ts, func(i int) bool { return !ts.holdout[i] }, p)
	if err != nil {
		return calibration{}, err
	}
	z := make([]float32, len(ts.classes))
	var xs [][]float64
	var ys []float64
	wrong := 0
	for i, d := range ts.docs {
		if !ts.holdout[i] {
			continue
		}
		v, st := voc.vectorize(d, &p.vec, sparse{})
		lin.logits(v, z)
		softmaxInPlace(z)
		best := argmax(z)
		cov := st.coverage(p.idfCoverage)
		xs = append(xs, []float64{p.cal.evidence(float64(z[best]), cov)})
		if int32(best) == ts.labels[i] {
			ys = append(ys, 1)
		} else {
			ys = append(ys, 0)
			wrong++
		}
	}
	if wrong < p.minErrors || len(ys)-wrong < p.minErrors {
		return fallback, nil
	}
	w := fitLogistic(xs, ys, 1e-3)
	if len(w) != 2 || !(w[0] > 0) || math.IsInf(w[0], 0) || math.IsInf(w[1], 0) || math.IsNaN(w[1]) {
		return fallback, nil
	}
	return calibration{alpha: w[0], beta: w[1], coverage: p.cal.coverage}, nil
}

func argmax(z []float32) int {
	best := 0
	for c, v := range z {
		if v > z[best] {
			best = c
		}
	}
	return best
}

// buildModel trains a model on ts: the final model on every text and, in
// parallel, the calibration on a held-out part.
func buildModel(ctx context.Context, ts *trainSet, p *lexParams) (*lexModel, error) {
	start := time.Now()
	m := &lexModel{p: p, classes: ts.classes, defaultClass: -1, defaultName: ts.defaultName, defaultLive: ts.defaultLive}
	for i, c := range ts.classes {
		if c.isDefault {
			m.defaultClass = i
		}
	}
	var cal calibration
	var calErr error
	var wg sync.WaitGroup
	wg.Go(func() { cal, calErr = calibrate(ctx, ts, p) })
	voc, lin, err := fit(ctx, ts, func(int) bool { return true }, p)
	wg.Wait()
	if err == nil {
		err = calErr
	}
	if err != nil {
		return nil, err
	}
	m.voc, m.lin, m.cal = voc, lin, cal
	m.info = LexicalInfo{
		Agents:        len(ts.classes),
		Texts:         len(ts.docs),
		Features:      len(voc.idf),
		Default:       ts.defaultName,
		TrainedAt:     time.Now(),
		TrainDuration: time.Since(start),
	}
	return m, nil
}
