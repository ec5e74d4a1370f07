package routing

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
	"github.com/agentmesh/agentmesh/registry"
)

func TestTrainSparseSeparates(t *testing.T) {
	samples := []sample{
		{x: sparse{cols: []int32{0, 3}, vals: []float32{1, 0.5}}, class: 0, weight: 1},
		{x: sparse{cols: []int32{1, 3}, vals: []float32{1, 0.5}}, class: 1, weight: 1},
		{x: sparse{cols: []int32{2, 3}, vals: []float32{1, 0.5}}, class: 2, weight: 1},
		{x: sparse{cols: []int32{2}, vals: []float32{1}}, class: 3, weight: 1},
	}
	kinds := []uint8{kindWord, kindWord, kindWord, kindChar}
	o := defaultParams.sgd
	o.epochs = 200
	// Feature 3 is in three classes' texts: over a cap of 2, it gets no
	// weight at all.
	m, err := trainSparse(context.Background(), samples, kinds, 4, &[numKinds]int{0, 0, 2}, o)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2, 4, 4}, m.start, "rows: feature 0 → class 0, 1 → 1, 2 → 2 and 3, 3 → none")
	assert.Equal(t, []int32{0, 1, 2, 3}, m.class)
	assert.Zero(t, m.weight(3, 0), "a capped feature has no weight")
	assert.Zero(t, m.weight(0, 1), "no weight outside the class's own features")
	assert.Positive(t, m.weight(0, 0))
	z := make([]float32, 4)
	for c := range 3 {
		m.logits(samples[c].x, z)
		softmaxInPlace(z)
		assert.Equal(t, c, argmax(z), "sample %d: %v", c, z)
	}
	_, err = trainSparse(lexCanceledCtx(), samples, kinds, 4, &[numKinds]int{}, o)
	assert.ErrorIs(t, err, context.Canceled)
}

// The sparse model learns from the same texts as the dense one and gets
// held-out messages right about as often, in a fraction of the memory.
func TestLexicalSparseModel(t *testing.T) {
	g := synthagents.New(7)
	var agents []registry.Agent
	var msgs, want []string
	for i := range 60 {
		a := g.Agent("", i, 5)
		agents = append(agents, a.Registry())
		for _, m := range g.Examples(i, 8)[5:] {
			msgs, want = append(msgs, m), append(want, a.Name)
		}
	}
	top1 := func(p *lexParams) (float64, scorer) {
		l := NewLexical(nil)
		l.params = p
		defer l.Close()
		require.NoError(t, l.Reset(context.Background(), agents))
		ok := 0
		for i, m := range msgs {
			c, err := l.Classify(context.Background(), m)
			require.NoError(t, err)
			if c.AgentID == want[i] {
				ok++
			}
		}
		return float64(ok) / float64(len(msgs)), l.model.Load().lin
	}
	dense := defaultParams
	sparseP := defaultParams
	sparseP.sparseFrom = 50
	dAcc, d := top1(&dense)
	sAcc, s := top1(&sparseP)
	require.IsType(t, &linear{}, d)
	require.IsType(t, &sparseLinear{}, s, "from sparseFrom agents on, the model is sparse")
	t.Logf("top-1 on %d held-out messages: dense %.3f, sparse %.3f", len(msgs), dAcc, sAcc)
	assert.GreaterOrEqual(t, sAcc, dAcc-0.05)
	assert.Less(t, len(s.(*sparseLinear).w), len(d.(*linear).w)/4, "the sparse model holds a fraction of the dense weights")
}

// A registry too small for the sparse model whose dense weights would
// pass maxDense gets the sparse model: the dense one's memory is bounded
// whatever the vocabulary.
func TestLexicalDenseBudget(t *testing.T) {
	g := synthagents.New(7)
	var agents []registry.Agent
	for i := range 60 {
		agents = append(agents, g.Agent("", i, 5).Registry())
	}
	model := func(p *lexParams) scorer {
		l := NewLexical(nil)
		l.params = p
		defer l.Close()
		require.NoError(t, l.Reset(context.Background(), agents))
		return l.model.Load().lin
	}
	within := defaultParams
	d := model(&within)
	require.IsType(t, &linear{}, d, "60 agents under the budget keep the dense model")
	over := defaultParams
	over.maxDense = len(d.(*linear).w) - 1
	assert.IsType(t, &sparseLinear{}, model(&over), "one weight over the budget gives the sparse model")
}
