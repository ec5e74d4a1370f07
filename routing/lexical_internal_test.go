package routing

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/registrytest"
	"github.com/agentmesh/agentmesh/registry"
)

func TestCalibrationMonotonic(t *testing.T) {
	cals := []calibration{defaultParams.cal, {alpha: 0.3, beta: 2, coverage: 0}, {alpha: 5, beta: -20, coverage: 10}}
	for _, c := range cals {
		prev := -1.0
		for p := 0.0; p <= 1; p += 0.01 {
			prevCov := -1.0
			for cov := 0.0; cov <= 1; cov += 0.05 {
				v := c.confidence(p, cov)
				require.False(t, math.IsNaN(v))
				require.GreaterOrEqual(t, v, 0.0)
				require.LessOrEqual(t, v, 1.0)
				require.GreaterOrEqual(t, v, prevCov, "non-decreasing in coverage (%+v p=%g cov=%g)", c, p, cov)
				prevCov = v
			}
			v := c.confidence(p, 0.5)
			require.GreaterOrEqual(t, v, prev, "non-decreasing in p (%+v p=%g)", c, p)
			prev = v
		}
	}
}

func TestCalibrateFallsBackOnSmallRegistries(t *testing.T) {
	p := &defaultParams
	ts := buildTrainSet(lexHelpDeskInternal(), func(string) *agentLive { return &agentLive{} }, p)
	cal, err := calibrate(context.Background(), ts, p)
	require.NoError(t, err)
	want := p.cal
	want.beta += p.calPerLogK * math.Log(3)
	assert.Equal(t, want, cal, "too few held-out examples: the default calibration for 3 agents")
}

func TestFitLogistic(t *testing.T) {
	// Recover known parameters from noisy data.
	var xs [][]float64
	var ys []float64
	for i := range 4000 {
		x1 := float64(i%200)/20 - 5
		x2 := float64((i*7)%100) / 100
		p := sigmoid(1.5*x1 - 2*x2 + 0.5)
		y := 0.0
		if float64((i*7919)%1000)/1000 < p {
			y = 1
		}
		xs = append(xs, []float64{x1, x2})
		ys = append(ys, y)
	}
	w := fitLogistic(xs, ys, 1e-6)
	require.Len(t, w, 3)
	assert.InDelta(t, 1.5, w[0], 0.25)
	assert.InDelta(t, -2, w[1], 0.6)
	assert.InDelta(t, 0.5, w[2], 0.4)

	// Separable data stays finite.
	w = fitLogistic([][]float64{{-1}, {-2}, {1}, {2}}, []float64{0, 0, 1, 1}, 1e-3)
	for _, v := range w {
		assert.False(t, math.IsInf(v, 0) || math.IsNaN(v))
	}
	assert.Nil(t, fitLogistic(nil, nil, 1))
}

func TestExtractFeatures(t *testing.T) {
	x := &extractor{opts: defaultParams.feat}
	hs := slices.Clone(x.extract("Budgets"))
	assert.True(t, slices.IsSorted(hs))
	kinds := map[int]int{}
	for _, h := range hs {
		kinds[kindOf(h)]++
	}
	assert.Equal(t, 1, kinds[kindWord])
	assert.Equal(t, 2, kinds[kindBigram], "^ budget, budget $")
	// "<budgets>" has 9 runes: 8 bigrams, 7 trigrams, 6 four-grams.
	assert.Equal(t, 8+7+6, kinds[kindChar])
	assert.Equal(t, hs, x.extract("budgets"), "case-folded")
	w1 := withKind(fnvString(fnvOffset, "budget"), kindWord)
	assert.Contains(t, x.extract("budgeting"), w1, "stemmed")
	assert.Empty(t, x.extract(" ?! "))

	// Bounded: a huge input gives at most maxTextTokens words.
	long := ""
	for range 2 * maxTextTokens {
		long += "word "
	}
	toks, _ := x.words(long)
	assert.Len(t, toks, maxTextTokens)
}

func TestVectorizeNormalised(t *testing.T) {
	x := &extractor{opts: defaultParams.feat}
	docs := [][]uint64{slices.Clone(x.extract("set a timer")), slices.Clone(x.extract("weather in Paris"))}
	voc := buildVocabulary(docs, &defaultParams.vec, 0)
	v, st := voc.vectorize(x.extract("set a timer in Paris please"), &defaultParams.vec, sparse{})
	var sq float64
	for _, val := range v.vals {
		sq += float64(val) * float64(val)
	}
	assert.InDelta(t, 1, sq, 1e-5)
	assert.Positive(t, st.unknown)
	assert.Greater(t, st.coverage(false), 0.0)
	assert.Less(t, st.coverage(true), st.coverage(false), "unseen features weigh more under idf")
	v, st = voc.vectorize(nil, &defaultParams.vec, v)
	assert.Empty(t, v.cols)
	assert.Zero(t, st.coverage(true))
}

func TestTrainLinearSeparates(t *testing.T) {
	samples := []sample{
		{x: sparse{cols: []int32{0}, vals: []float32{1}}, class: 0, weight: 1},
		{x: sparse{cols: []int32{1}, vals: []float32{1}}, class: 1, weight: 1},
		{x: sparse{cols: []int32{2}, vals: []float32{1}}, class: 2, weight: 1},
	}
	o := defaultParams.sgd
	o.epochs = 200
	m, err := trainLinear(context.Background(), samples, 3, 3, o)
	require.NoError(t, err)
	z := make([]float32, 3)
	for c := range 3 {
		m.logits(samples[c].x, z)
		softmaxInPlace(z)
		assert.Equal(t, c, argmax(z))
		assert.Greater(t, z[c], float32(0.9))
	}
	_, err = trainLinear(lexCanceledCtx(), samples, 3, 3, o)
	assert.ErrorIs(t, err, context.Canceled)
}

func lexCanceledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestAgentTexts(t *testing.T) {
	ex, prof := agentTexts(&registry.Agent{Name: "x", DisplayName: "Cost Tool", Capabilities: []string{"costCenter", "budget"},
		Description: "Tracks budgets. Does reports!\nAnd more", Examples: []string{"one", " ", "two"}})
	assert.Equal(t, []string{"one", "two"}, ex)
	assert.Equal(t, []string{"Cost Tool costCenter cost center budget", "Tracks budgets", "Does reports", "And more"}, prof)
	ex, prof = agentTexts(&registry.Agent{Name: "d", IsDefault: true, Description: "Anything", Examples: []string{"hi"}})
	assert.Equal(t, []string{"hi"}, ex)
	assert.Empty(t, prof, "the default agent learns from its examples only")
}

func lexHelpDeskInternal() []registry.Agent {
	return []registry.Agent{
		{Name: "weather", Examples: []string{"what's the weather in Paris", "will it rain tomorrow", "weather forecast for Berlin"}},
		{Name: "translate", Examples: []string{"translate hello into French", "how do you say thank you in Spanish"}},
		{Name: "timer", Examples: []string{"set a timer for 10 minutes", "start a 5 minute timer"}},
		{Name: "fallback", IsDefault: true, Description: "Anything else."},
	}
}

// lexFollowing returns a classifier with the given debounce that follows
// a source holding agents; the test's cleanup stops following and closes it.
func lexFollowing(t *testing.T, debounce time.Duration, agents ...registry.Agent) (*Lexical, *registrytest.Source) {
	t.Helper()
	l := NewLexical(&LexicalOptions{Debounce: debounce})
	t.Cleanup(func() { l.Close() })
	src := registrytest.NewSource(agents...)
	t.Cleanup(l.Follow(src))
	return l, src
}

// lexOnTrain makes f run at the start of every training of l.
func lexOnTrain(l *Lexical, f func()) {
	l.trainMu.Lock()
	l.onTrain = f
	l.trainMu.Unlock()
}

// lexCountTrainings counts the trainings of l from now on.
func lexCountTrainings(l *Lexical) *atomic.Int64 {
	var n atomic.Int64
	lexOnTrain(l, func() { n.Add(1) })
	return &n
}

func TestRetrainDoesNotBlockClassify(t *testing.T) {
	l, src := lexFollowing(t, -1, lexHelpDeskInternal()...)
	ctx := context.Background()
	before := l.model.Load()
	require.NotNil(t, before)
	_, err := l.Classify(ctx, "will it rain") // in use: changes are learned at once
	require.NoError(t, err)

	// The next training blocks until released.
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	lexOnTrain(l, func() {
		once.Do(func() { close(entered) })
		<-release
	})
	src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "music", Examples: []string{"play some jazz", "next song"}}})
	<-entered

	// While it trains, Classify answers at once from the previous model
	// (from many goroutines; run with -race).
	var wg sync.WaitGroup
	var answered atomic.Int64
	for range 4 {
		wg.Go(func() {
			for range 200 {
				c, err := l.Classify(ctx, "play some jazz")
				if err != nil {
					t.Error(err)
					return
				}
				if c.AgentID == "music" {
					t.Error("the new agent showed up before its model was swapped in")
					return
				}
				answered.Add(1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Classify blocked behind training")
	}
	assert.Equal(t, int64(800), answered.Load())
	assert.Same(t, before, l.model.Load(), "the old model is still served")

	close(release)
	require.NoError(t, l.Sync(ctx))
	assert.NotSame(t, before, l.model.Load(), "the new model was swapped in")
	c, err := l.Classify(ctx, "play some jazz")
	require.NoError(t, err)
	assert.Equal(t, "music", c.AgentID)
}

func TestRetrainCoalescesBursts(t *testing.T) {
	l, src := lexFollowing(t, 100*time.Millisecond, lexHelpDeskInternal()...)
	trainings := lexCountTrainings(l)
	for i := range 50 {
		src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{
			Name: "burst", Examples: []string{"burst example", string(rune('a' + i%26))}}})
	}
	// A heartbeat or an unchanged re-registration needs no training.
	src.Emit(registry.Event{Type: registry.EventHeartbeat, Agent: lexHelpDeskInternal()[0]})
	require.NoError(t, l.Sync(context.Background()))
	assert.Equal(t, int64(1), trainings.Load(), "50 changes within the debounce window cost one training")

	src.Emit(registry.Event{Type: registry.EventPut, Agent: lexHelpDeskInternal()[0]})
	src.Emit(registry.Event{Type: registry.EventHeartbeat, Agent: lexHelpDeskInternal()[1]})
	require.NoError(t, l.Sync(context.Background()))
	assert.Equal(t, int64(1), trainings.Load(), "nothing the classifier learns from changed")
}

func TestCloseStopsTrainer(t *testing.T) {
	l := NewLexical(&LexicalOptions{Debounce: time.Hour})
	src := registrytest.NewSource(lexHelpDeskInternal()...)
	l.Follow(src)
	src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "x", Examples: []string{"x"}}})
	require.NoError(t, l.Close())
	select {
	case <-l.done:
	default:
		t.Fatal("the trainer goroutine is still running after Close")
	}

	// Close abandons a training in progress.
	l = NewLexical(&LexicalOptions{Debounce: -1})
	l.Follow(registrytest.NewSource(lexHelpDeskInternal()...))
	_, err := l.Classify(context.Background(), "set a timer") // in use: changes train at once
	require.NoError(t, err)
	entered := make(chan struct{})
	lexOnTrain(l, func() { close(entered) })
	l.Apply(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "y", Examples: []string{"y"}}})
	<-entered
	require.NoError(t, l.Close())
	<-l.done
	assert.Nil(t, l.model.Load())
}

func TestTrainPanicIsAnError(t *testing.T) {
	l := NewLexical(nil)
	defer l.Close()
	l.onTrain = func() { panic("boom") }
	err := l.Reset(context.Background(), lexHelpDeskInternal())
	require.ErrorContains(t, err, "panicked: boom")
	l.onTrain = nil
	require.NoError(t, l.Retrain(context.Background()), "the next training retries")
	c, err := l.Classify(context.Background(), "set a timer")
	require.NoError(t, err)
	assert.Equal(t, "timer", c.AgentID)
}

func TestVocabularyCap(t *testing.T) {
	x := &extractor{opts: defaultParams.feat}
	var docs [][]uint64
	for _, text := range []string{"set a timer", "set an alarm", "set the table", "weather in Paris"} {
		docs = append(docs, slices.Clone(x.extract(text)))
	}
	all := buildVocabulary(docs, &defaultParams.vec, 0)
	capped := buildVocabulary(docs, &defaultParams.vec, 5)
	require.Len(t, capped.idf, 5)
	assert.Greater(t, len(all.idf), 5)
	set := withKind(fnvString(fnvOffset, "set"), kindWord)
	assert.Contains(t, capped.cols, set, "the most frequent features are kept")
	again := buildVocabulary(docs, &defaultParams.vec, 5)
	assert.Equal(t, capped.cols, again.cols, "deterministic")
}

// A classifier that is not classifying does not retrain on changes: the
// next Classify starts the training and, the last training being quick,
// waits for it, so "register, then route" sees the new agent.
func TestLexicalIdleDoesNotRetrain(t *testing.T) {
	l, src := lexFollowing(t, 5*time.Millisecond, lexHelpDeskInternal()...)
	trainings := lexCountTrainings(l)
	src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "music", Examples: []string{"play some jazz", "next song"}}})
	time.Sleep(100 * time.Millisecond) // twenty debounces
	assert.Zero(t, trainings.Load(), "no training without a Classify")
	info, _ := l.Info()
	assert.Equal(t, 3, info.Agents, "the model still has the three agents it started with")

	c, err := l.Classify(context.Background(), "play some jazz")
	require.NoError(t, err)
	assert.Equal(t, "music", c.AgentID, "the first Classify after the change waited for its quick training")
	assert.Equal(t, int64(1), trainings.Load())
}

// A classifier in use learns a change without waiting for a Classify.
func TestLexicalInUseRetrainsAtOnce(t *testing.T) {
	l, src := lexFollowing(t, 5*time.Millisecond, lexHelpDeskInternal()...)
	_, err := l.Classify(context.Background(), "set a timer")
	require.NoError(t, err)
	trained := make(chan struct{}, 1)
	lexOnTrain(l, func() { trained <- struct{}{} })
	src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "music", Examples: []string{"play some jazz", "next song"}}})
	select {
	case <-trained:
	case <-time.After(10 * time.Second):
		t.Fatal("a classifier in use did not retrain after a change")
	}
}

// A kick queued while the trainer waited out its debounce (Sync called
// then) does not make an unused classifier train the changes after.
func TestLexicalLeftoverKickDoesNotTrain(t *testing.T) {
	l, src := lexFollowing(t, 50*time.Millisecond)
	trainings := lexCountTrainings(l)
	for _, a := range lexHelpDeskInternal() {
		src.Emit(registry.Event{Type: registry.EventPut, Agent: a}) // an empty model: the trainer starts its debounce
	}
	require.NoError(t, l.Sync(context.Background())) // kicks again, during the debounce
	settled := trainings.Load()
	src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "music", Examples: []string{"play some jazz"}}})
	time.Sleep(300 * time.Millisecond) // six debounces
	assert.Equal(t, settled, trainings.Load(), "an unused classifier trained a change")
}

// An unused classifier with no model of its agents yet trains none while
// they arrive, nor after: the first Classify trains the model, of every
// agent, and answers from it.
func TestLexicalFirstModelWaitsForAClassify(t *testing.T) {
	const debounce = 5 * time.Millisecond
	l, src := lexFollowing(t, debounce) // no agents: the empty model
	trainings := lexCountTrainings(l)
	agents := lexHelpDeskInternal()
	for i := range 24 {
		a := agents[i%len(agents)]
		a.Examples = append(slices.Clone(a.Examples), fmt.Sprintf("variant %d", i))
		src.Emit(registry.Event{Type: registry.EventPut, Agent: a})
	}
	time.Sleep(40 * debounce)
	assert.Zero(t, trainings.Load(), "an unused classifier trained in the background")
	assert.True(t, l.Ready(), "ready: it learned the agents it started with (none)")

	c, err := l.Classify(context.Background(), "will it rain tomorrow")
	require.NoError(t, err)
	assert.Equal(t, "weather", c.AgentID)
	assert.Equal(t, int64(1), trainings.Load(), "one training, for the Classify")
	info, ok := l.Info()
	require.True(t, ok)
	assert.Equal(t, 4, info.Agents, "the model has every agent (the default one too: it has examples now)")
}
