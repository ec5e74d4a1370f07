package routing

import (
	"context"
	"math"
	"slices"
)

// sparseLinear is the softmax regression of a large registry: a class has
// weights only on the features of its own training texts (its support),
// stored row per feature, so memory grows with the registry's text rather
// than with features × agents, and scoring a message reads only the rows
// of its features. A class with no weight on any of a message's features
// scores 0.
//
// Restricting the weights costs a little accuracy — a class cannot learn a
// negative weight for a word it never uses (0.4 points of top-1 on
// CLINC150) — which is why small registries keep the dense [linear] model.
type sparseLinear struct {
	nClass int
	// The row of feature col holds classes class[start[col]:start[col+1]],
	// ascending, and their weights w[start[col]:start[col+1]].
	start []int32
	class []int32
	w     []float32
}

// logits writes the scores of x into z (len nClass).
func (m *sparseLinear) logits(x sparse, z []float32) {
	clear(z)
	for i, col := range x.cols {
		v := x.vals[i]
		lo, hi := m.start[col], m.start[col+1]
		w := m.w[lo:hi]
		for k, c := range m.class[lo:hi] {
			z[c] += v * w[k]
		}
	}
}

// weight returns the weight of feature col for class c.
func (m *sparseLinear) weight(col int32, c int) float32 {
	lo, hi := m.start[col], m.start[col+1]
	if k, ok := slices.BinarySearch(m.class[lo:hi], int32(c)); ok {
		return m.w[int(lo)+k]
	}
	return 0
}

// newSparseLinear lays out the support of samples over nFeat features
// and nClass classes: for each class, the features of its samples. A
// feature in the support of more than maxClassDF classes (when
// maxClassDF[kind] > 0) gets no weights at all: shared by that many agents, it
// tells none of them apart, and its row would cost maxClassDF
// multiply-adds in every message that has it.
func newSparseLinear(samples []sample, kind []uint8, nClass int, maxClassDF *[numKinds]int) *sparseLinear {
	nFeat := len(kind)
	byClass := make([][]int32, nClass) // sample indices of each class
	for i := range samples {
		c := samples[i].class
		byClass[c] = append(byClass[c], int32(i))
	}
	// Pass 1: how many classes have each feature.
	count := make([]int32, nFeat+1)
	stamp := make([]int32, nFeat) // class+1 that last counted the feature
	for c, idx := range byClass {
		for _, i := range idx {
			for _, col := range samples[i].x.cols {
				if stamp[col] != int32(c)+1 {
					stamp[col] = int32(c) + 1
					count[col]++
				}
			}
		}
	}
	for col, n := range count[:nFeat] {
		if m := maxClassDF[kind[col]]; m > 0 && int(n) > m {
			count[col] = 0
		}
	}
	// Pass 2: rows in class order, so each row is sorted.
	m := &sparseLinear{nClass: nClass, start: make([]int32, nFeat+1)}
	var nnz int32
	for col := range nFeat {
		m.start[col] = nnz
		nnz += count[col]
	}
	m.start[nFeat] = nnz
	m.class = make([]int32, nnz)
	m.w = make([]float32, nnz)
	next := slices.Clone(m.start[:nFeat])
	clear(stamp)
	for c, idx := range byClass {
		for _, i := range idx {
			for _, col := range samples[i].x.cols {
				if count[col] == 0 || stamp[col] == int32(c)+1 {
					continue
				}
				stamp[col] = int32(c) + 1
				m.class[next[col]] = int32(c)
				next[col]++
			}
		}
	}
	return m
}

// trainSparse fits a [sparseLinear] by the stochastic gradient descent of
// [trainLinear] — the same [sgdLoop], L2 weight-scale trick and gradient
// floor — computing each sample's softmax over the classes its features
// reach: every other class scores exactly 0 and has no weight the sample
// could move, so they enter only the normaliser, as one term.
// Deterministic for a given seed.
//
// Training stops with ctx's error when ctx is done.
func trainSparse(ctx context.Context, samples []sample, kind []uint8, nClass int, maxClassDF *[numKinds]int, o sgdOptions) (*sparseLinear, error) {
	m := newSparseLinear(samples, kind, nClass, maxClassDF)
	if len(samples) == 0 || nClass == 0 {
		return m, nil
	}
	z := make([]float32, nClass) // logits, then gradients, of the touched classes
	seen := make([]int32, nClass)
	var touched, active []int32
	loop := newSGDLoop(len(samples), o)
	scale := 1.0
	stamp := int32(0)
	for i, eta := range loop.steps(ctx) {
		s := &samples[i]
		// Scores, with the true weights scale·w, of the touched classes.
		stamp++
		touched = touched[:0]
		sc := float32(scale)
		for j, col := range s.x.cols {
			v := s.x.vals[j] * sc
			lo, hi := m.start[col], m.start[col+1]
			w := m.w[lo:hi]
			for kk, c := range m.class[lo:hi] {
				if seen[c] != stamp {
					seen[c] = stamp
					touched = append(touched, c)
					z[c] = 0
				}
				z[c] += v * w[kk]
			}
		}
		if seen[s.class] != stamp {
			continue // no weight of its class: nothing to learn
		}
		// Softmax over the touched classes and the others' zeros.
		mx := float32(math.Inf(-1))
		if len(touched) < nClass {
			mx = 0
		}
		for _, c := range touched {
			mx = max(mx, z[c])
		}
		sum := float32(nClass-len(touched)) * float32(math.Exp(float64(-mx)))
		for _, c := range touched {
			e := float32(math.Exp(float64(z[c] - mx)))
			z[c] = e
			sum += e
		}
		loop.learned(i, z[s.class]/sum)
		scale *= 1 - eta*o.l2
		inv := float32(eta) * s.weight / float32(scale)
		// z becomes the scaled gradient of each touched class, 0 when
		// negligible; active lists the others, ascending.
		active = active[:0]
		for _, c := range touched {
			g := z[c] / sum
			if c == s.class {
				g--
			}
			if g > -gradFloor && g < gradFloor {
				g = 0
			} else {
				active = append(active, c)
			}
			z[c] = g * inv
		}
		// Late in training a few classes still learn: find them in
		// each row rather than visiting all of it.
		few := len(active) <= maxRowLookups
		if few {
			slices.Sort(active)
		}
		for j, col := range s.x.cols {
			v := s.x.vals[j]
			lo, hi := m.start[col], m.start[col+1]
			w, row := m.w[lo:hi], m.class[lo:hi]
			if !few || len(active)*8 >= len(row) {
				for kk, c := range row {
					w[kk] -= z[c] * v
				}
				continue
			}
			for _, c := range active {
				if kk, ok := slices.BinarySearch(row, c); ok {
					w[kk] -= z[c] * v
				}
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

// maxRowLookups is the most learning classes a sample's update looks up
// in each row (binary search) rather than visiting the row.
const maxRowLookups = 16

func (m *sparseLinear) rescale(s float32) {
	for i := range m.w {
		m.w[i] *= s
	}
}
