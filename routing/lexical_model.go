package routing

import (
	"cmp"
	"context"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
)

// vocabulary maps feature hashes to columns and holds what the vectoriser
// needs per column.
type vocabulary struct {
	cols map[uint64]int32
	idf  []float32
	kind []uint8
	// unseenIDF is the idf a feature no training text has would get.
	unseenIDF float32
}

// vecOptions shape the feature vector.
type vecOptions struct {
	kindWeight [numKinds]float32 // relative weight of each kind; zero means 1
	minDF      [numKinds]int     // features seen in fewer training texts are dropped; zero means 1
	// minDFTexts: minDF applies only to corpora of at least this many
	// texts; a small registry needs every feature it has.
	minDFTexts int
}

func (o *vecOptions) weight(k int) float32 {
	if w := o.kindWeight[k]; w != 0 {
		return w
	}
	return 1
}

// buildVocabulary counts document frequencies over docs (each the sorted
// feature hashes of one text) and keeps the features that pass minDF; if
// more than maxFeatures remain (and maxFeatures > 0), the most frequent.
func buildVocabulary(docs [][]uint64, o *vecOptions, maxFeatures int) *vocabulary {
	df := make(map[uint64]int32)
	for _, d := range docs {
		for i, h := range d {
			if i > 0 && d[i-1] == h {
				continue
			}
			df[h]++
		}
	}
	type feature struct {
		h  uint64
		df int32
	}
	kept := make([]feature, 0, len(df))
	prune := len(docs) >= o.minDFTexts
	for h, c := range df {
		if m := o.minDF[kindOf(h)]; prune && m > 1 && int(c) < m {
			continue
		}
		kept = append(kept, feature{h, c})
	}
	if maxFeatures > 0 && len(kept) > maxFeatures {
		slices.SortFunc(kept, func(a, b feature) int {
			if a.df != b.df {
				return cmp.Compare(b.df, a.df)
			}
			return cmp.Compare(a.h, b.h)
		})
		kept = kept[:maxFeatures]
	}
	slices.SortFunc(kept, func(a, b feature) int { return cmp.Compare(a.h, b.h) })
	n := float64(len(docs))
	v := &vocabulary{
		cols:      make(map[uint64]int32, len(kept)),
		idf:       make([]float32, len(kept)),
		kind:      make([]uint8, len(kept)),
		unseenIDF: float32(math.Log(n+1) + 1),
	}
	for i, f := range kept {
		v.cols[f.h] = int32(i)
		v.idf[i] = float32(math.Log((n+1)/(float64(f.df)+1)) + 1)
		v.kind[i] = uint8(kindOf(f.h))
	}
	return v
}

// sparse is a feature vector.
type sparse struct {
	cols []int32
	vals []float32
}

// textStats say how much of a text the vocabulary knows.
type textStats struct {
	distinct, unknown    int     // distinct features, and those not in the vocabulary
	knownIDF, unknownIDF float64 // their idf sums (unseenIDF for unknown ones)
}

// coverage is the fraction of the text's distinct features that the
// vocabulary knows, each weighted by its idf when idf is set (so a new
// word counts more than a common character pair).
func (s *textStats) coverage(idf bool) float64 {
	if idf {
		if t := s.knownIDF + s.unknownIDF; t > 0 {
			return s.knownIDF / t
		}
		return 0
	}
	if s.distinct == 0 {
		return 0
	}
	return 1 - float64(s.unknown)/float64(s.distinct)
}

// vectorize turns the sorted hashes of one text into a weighted,
// L2-normalised vector: sublinear tf × idf, each kind normalised on its own
// and weighted, then the whole normalised. It also returns how much of the
// text the vocabulary knows.
func (v *vocabulary) vectorize(hs []uint64, o *vecOptions, dst sparse) (sparse, textStats) {
	dst.cols, dst.vals = dst.cols[:0], dst.vals[:0]
	var sq [numKinds]float32
	var st textStats
	for i := 0; i < len(hs); {
		j := i + 1
		for j < len(hs) && hs[j] == hs[i] {
			j++
		}
		st.distinct++
		col, ok := v.cols[hs[i]]
		if !ok {
			st.unknown++
			st.unknownIDF += float64(v.unseenIDF)
			i = j
			continue
		}
		st.knownIDF += float64(v.idf[col])
		val := (1 + float32(math.Log(float64(j-i)))) * v.idf[col]
		dst.cols = append(dst.cols, col)
		dst.vals = append(dst.vals, val)
		sq[v.kind[col]] += val * val
		i = j
	}
	var scale [numKinds]float32
	var total float32
	for k := range numKinds {
		if sq[k] > 0 {
			w := o.weight(k)
			scale[k] = w / float32(math.Sqrt(float64(sq[k])))
			total += w * w
		}
	}
	if total > 0 {
		norm := 1 / float32(math.Sqrt(float64(total)))
		for k := range scale {
			scale[k] *= norm
		}
	}
	for i, col := range dst.cols {
		dst.vals[i] *= scale[v.kind[col]]
	}
	return dst, st
}

// sample is one training text.
type sample struct {
	x      sparse
	class  int32
	weight float32
}

// sgdOptions tune the softmax regression.
type sgdOptions struct {
	epochs int     // passes over the data
	lr     float64 // initial learning rate
	l2     float64 // L2 penalty per sample
	seed   uint64
	// skipEasy > 0 skips, for a while, samples whose loss gradient
	// (1 - p of their class) is below it.
	skipEasy float32
	// linearDecay multiplies the learning rate by 1 - progress, so the
	// last epochs settle instead of oscillating (small data sets see
	// hundreds of epochs).
	linearDecay bool
	// noBias keeps the intercepts at zero: no class is preferred a priori.
	noBias bool
}

// scorer is a trained softmax regression: [linear] or [sparseLinear].
type scorer interface {
	// logits writes the scores of x into z (one per class).
	logits(x sparse, z []float32)
	// weight is the weight of feature col for class c.
	weight(col int32, c int) float32
}

// linear is a multinomial logistic regression: logits = Wᵀx + b, with W
// stored row per feature (W[col*nClass+c]) so scoring a sparse vector reads
// contiguous memory.
type linear struct {
	nClass int
	w      []float32
	b      []float32
}

// logits writes the scores of x into z (len nClass).
func (m *linear) logits(x sparse, z []float32) {
	copy(z, m.b)
	n := m.nClass
	for i, col := range x.cols {
		off := int(col) * n
		axpy(z[:n], m.w[off:off+n:off+n], x.vals[i])
	}
}

func (m *linear) weight(col int32, c int) float32 { return m.w[int(col)*m.nClass+c] }

// axpy adds a·x to y (len(x) ≥ len(y)), unrolled for instruction-level
// parallelism (the Go compiler does not vectorise).
func axpy(y, x []float32, a float32) {
	x = x[:len(y)]
	i := 0
	for ; i+8 <= len(y); i += 8 {
		yy := y[i : i+8 : i+8]
		xx := x[i : i+8 : i+8]
		yy[0] += a * xx[0]
		yy[1] += a * xx[1]
		yy[2] += a * xx[2]
		yy[3] += a * xx[3]
		yy[4] += a * xx[4]
		yy[5] += a * xx[5]
		yy[6] += a * xx[6]
		yy[7] += a * xx[7]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

// softmaxInPlace turns logits into probabilities.
func softmaxInPlace(z []float32) {
	mx := z[0]
	for _, v := range z[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range z {
		e := float32(math.Exp(float64(v - mx)))
		z[i] = e
		sum += e
	}
	for i := range z {
		z[i] /= sum
	}
}

// trainLinear fits a softmax regression by stochastic gradient descent
// with L2 regularisation (the weight-scale trick keeps updates sparse) and
// a learning rate decaying as lr/(1+lr·l2·t) (Bottou 2012), times
// 1 - progress with linearDecay. Classes whose gradient is negligible for
// a sample are not updated, and samples already learned are skipped for a
// while (skipEasy), so late epochs cost a fraction of the first.
// Deterministic for a given seed.
//
// Training stops with ctx's error when ctx is done.
func trainLinear(ctx context.Context, samples []sample, nFeat, nClass int, o sgdOptions) (*linear, error) {
	m := &linear{nClass: nClass, w: make([]float32, nFeat*nClass), b: make([]float32, nClass)}
	if len(samples) == 0 || nClass == 0 {
		return m, nil
	}
	z := make([]float32, nClass)
	loop := newSGDLoop(len(samples), o)
	var active []classGrad
	scale := 1.0
	for i, eta := range loop.steps(ctx) {
		s := &samples[i]
		// Scores with the true weights scale·w.
		copy(z, m.b)
		sc := float32(scale)
		for j, col := range s.x.cols {
			off := int(col) * nClass
			axpy(z, m.w[off:off+nClass:off+nClass], s.x.vals[j]*sc)
		}
		softmaxInPlace(z)
		loop.learned(i, z[s.class])
		scale *= 1 - eta*o.l2
		step := float32(eta) * s.weight
		inv := step / float32(scale)
		active = active[:0]
		for c, p := range z {
			g := p
			if c == int(s.class) {
				g--
			}
			if g > -gradFloor && g < gradFloor {
				continue
			}
			if !o.noBias {
				m.b[c] -= step * g
			}
			active = append(active, classGrad{int32(c), g * inv})
		}
		for j, col := range s.x.cols {
			v := s.x.vals[j]
			row := m.w[int(col)*nClass : int(col)*nClass+nClass]
			for _, a := range active {
				row[a.c] -= a.g * v
			}
		}
		scale = foldSmallScale(m, scale)
	}
	if loop.err != nil {
		return nil, loop.err
	}
	m.rescale(float32(scale))
	return m, nil
}

// sgdLoop is the schedule both regressions train on: shuffled epochs, the
// learning rate decaying as lr/(1+lr·l2·t) (times 1 - progress with
// linearDecay), and samples already learned skipped for a while.
type sgdLoop struct {
	o sgdOptions
	n int
	// A sample the model already gets right with a negligible gradient
	// is skipped for a number of epochs that doubles each time it is
	// still easy when it is looked at again: late epochs then cost a
	// fraction of the first ones.
	skip   []uint8 // epochs left to skip
	streak []uint8 // times found easy in a row
	err    error   // ctx's error, if it ended the loop
}

func newSGDLoop(n int, o sgdOptions) *sgdLoop {
	return &sgdLoop{o: o, n: n, skip: make([]uint8, n), streak: make([]uint8, n)}
}

// steps yields the samples to learn from, each with its learning rate,
// until the epochs are done or ctx is (then err is set).
func (l *sgdLoop) steps(ctx context.Context) iter.Seq2[int, float64] {
	return func(yield func(int, float64) bool) {
		rng := rand.New(rand.NewPCG(l.o.seed, 0x5eed))
		order := make([]int, l.n)
		for i := range order {
			order[i] = i
		}
		t := 0.0
		for epoch := range l.o.epochs {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for k, i := range order {
				if k%1024 == 0 && ctx.Err() != nil {
					l.err = ctx.Err()
					return
				}
				if l.skip[i] > 0 {
					l.skip[i]--
					continue
				}
				eta := l.o.lr / (1 + l.o.lr*l.o.l2*t)
				if l.o.linearDecay {
					// Down to lr/100 at the end of the last epoch.
					progress := (float64(epoch) + float64(k)/float64(len(order))) / float64(l.o.epochs)
					eta *= max(0.01, 1-progress)
				}
				t++
				if !yield(i, eta) {
					return
				}
			}
		}
	}
}

// learned records the probability the model gives sample i's class: a
// sample within skipEasy of certain is skipped for a while.
func (l *sgdLoop) learned(i int, p float32) {
	if l.o.skipEasy > 0 && 1-p < l.o.skipEasy {
		l.streak[i] = min(l.streak[i]+1, 4)
		l.skip[i] = 1<<l.streak[i] - 1
	} else {
		l.streak[i] = 0
	}
}

// gradFloor is the smallest gradient (p - y) for which a class's weights
// are updated.
const gradFloor = 1e-4

type classGrad struct {
	c int32
	g float32
}

// rescaler is a model trained with the weight-scale trick: its true
// weights are scale·w, and rescale folds a scale into w.
type rescaler interface{ rescale(s float32) }

// foldSmallScale folds scale into m's weights once it falls below 1e-6,
// before float32 loses the weights, and returns the scale to go on with
// (1 after a fold).
func foldSmallScale(m rescaler, scale float64) float64 {
	if scale < 1e-6 {
		m.rescale(float32(scale))
		return 1
	}
	return scale
}

func (m *linear) rescale(s float32) {
	for i := range m.w {
		m.w[i] *= s
	}
}
