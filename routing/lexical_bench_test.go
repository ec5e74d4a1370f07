package routing_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/evalrouting"
	"github.com/agentmesh/agentmesh/internal/harness/registrytest"
	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

// lexBenchAgents returns 150 agents × 100 examples and messages to classify:
// CLINC150's training and validation utterances when the data is there,
// else synthetic text of the same shape.
func lexBenchAgents(b *testing.B) ([]registry.Agent, []string) {
	b.Helper()
	train, err := evalrouting.LoadUtterances(filepath.Join(lexClincDir(), "train.jsonl"))
	if err == nil {
		val, verr := evalrouting.LoadUtterances(filepath.Join(lexClincDir(), "val.jsonl"))
		if verr != nil {
			b.Fatal(verr)
		}
		agents := evalrouting.Agents(train, true)
		msgs := make([]string, len(val))
		for i, u := range val {
			msgs[i] = u.Text
		}
		return agents, msgs
	}
	if !errors.Is(err, os.ErrNotExist) {
		b.Fatal(err)
	}
	return lexSyntheticAgents(150, 100, 1)
}

// lexSyntheticAgents makes n agents with k examples each from a Zipf-like
// vocabulary: each agent has topic words of its own and shares the rest.
func lexSyntheticAgents(n, k int, seed uint64) ([]registry.Agent, []string) {
	rng := rand.New(rand.NewPCG(seed, seed))
	common := make([]string, 400)
	for i := range common {
		common[i] = fmt.Sprintf("w%dx", i)
	}
	var agents []registry.Agent
	var msgs []string
	for a := range n {
		topic := make([]string, 8)
		for i := range topic {
			topic[i] = fmt.Sprintf("t%dq%d", a, i)
		}
		ag := registry.Agent{Name: fmt.Sprintf("agent-%03d", a), Description: "Agent " + strings.Join(topic[:3], " ")}
		for e := range k + 10 {
			words := make([]string, 4+rng.IntN(8))
			for i := range words {
				if rng.IntN(3) == 0 {
					words[i] = topic[rng.IntN(len(topic))]
				} else {
					words[i] = common[int(float64(len(common))*rng.Float64()*rng.Float64())]
				}
			}
			if e < k {
				ag.Examples = append(ag.Examples, strings.Join(words, " "))
			} else {
				msgs = append(msgs, strings.Join(words, " "))
			}
		}
		agents = append(agents, ag)
	}
	return agents, msgs
}

// lexBenchTrained returns a classifier trained on lexBenchAgents, closed
// when the benchmark ends, and the messages to classify.
func lexBenchTrained(b *testing.B) (*routing.Lexical, []string) {
	b.Helper()
	agents, msgs := lexBenchAgents(b)
	l := routing.NewLexical(nil)
	b.Cleanup(func() { l.Close() })
	if err := l.Reset(context.Background(), agents); err != nil {
		b.Fatal(err)
	}
	return l, msgs
}

// BenchmarkClassify: one message against 150 agents × 100 examples.
func BenchmarkClassify(b *testing.B) {
	l, msgs := lexBenchTrained(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := l.Classify(ctx, msgs[i%len(msgs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkClassifyParallel: the same from every CPU at once.
func BenchmarkClassifyParallel(b *testing.B) {
	l, msgs := lexBenchTrained(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := l.Classify(ctx, msgs[i%len(msgs)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkTrain: a full training (final model and calibration) on 150
// agents × 100 examples, as after a registry change.
func BenchmarkTrain(b *testing.B) {
	agents, _ := lexBenchAgents(b)
	ctx := context.Background()
	var cpu time.Duration
	cpuOK := true
	for b.Loop() {
		c0, ok0 := lexProcessCPUTime()
		l := routing.NewLexical(nil)
		if err := l.Reset(ctx, agents); err != nil {
			b.Fatal(err)
		}
		c1, ok1 := lexProcessCPUTime()
		cpu += c1 - c0
		cpuOK = cpuOK && ok0 && ok1
		l.Close()
	}
	if cpuOK {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
}

// BenchmarkRetrain: one registry change, from the event to the new model
// being served (Debounce off), with 150 agents × 100 examples.
func BenchmarkRetrain(b *testing.B) {
	agents, _ := lexBenchAgents(b)
	src := registrytest.NewSource(agents...)
	l := routing.NewLexical(&routing.LexicalOptions{Debounce: -1})
	defer l.Close()
	defer l.Follow(src)()
	ctx := context.Background()
	i := 0
	for b.Loop() {
		a := agents[i%len(agents)]
		a.Examples = append(a.Examples[:len(a.Examples):len(a.Examples)], fmt.Sprintf("one more example %d", i))
		src.Emit(registry.Event{Type: registry.EventPut, Agent: a})
		if err := l.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// lexScaleAgents returns n synthetic agents of the load tool's registry
// (internal/harness/synthagents), each with k examples, and one held-out
// message per agent.
func lexScaleAgents(n, k int) ([]registry.Agent, []string) {
	g := synthagents.New(1)
	agents := make([]registry.Agent, n)
	msgs := make([]string, n)
	for i := range n {
		agents[i] = g.Agent("", i, k).Registry()
		msgs[i] = g.Examples(i, k+1)[k]
	}
	return agents, msgs
}

// BenchmarkLexicalScale: a registry of 10,000 agents × 5 examples, where
// the classifier uses its sparse model. retrain is one registry change to
// the new model served (CPU time and the heap the model holds reported
// too); classify reports the median latency with the mean.
func BenchmarkLexicalScale(b *testing.B) {
	agents, msgs := lexScaleAgents(10000, 5)
	ctx := context.Background()
	src := registrytest.NewSource(agents...)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	l := routing.NewLexical(&routing.LexicalOptions{Debounce: -1})
	defer l.Close()
	defer l.Follow(src)()
	runtime.GC()
	runtime.ReadMemStats(&after)
	modelMB := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)

	edits := 0 // across runs (-count): every edit is new text
	b.Run("retrain", func(b *testing.B) {
		var cpu time.Duration
		cpuOK := true
		for b.Loop() {
			edits++
			a := agents[edits%len(agents)]
			a.Examples = append(a.Examples[:len(a.Examples):len(a.Examples)], fmt.Sprintf("one more example %d", edits))
			c0, ok0 := lexProcessCPUTime()
			src.Emit(registry.Event{Type: registry.EventPut, Agent: a})
			if err := l.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			c1, ok1 := lexProcessCPUTime()
			cpu += c1 - c0
			cpuOK = cpuOK && ok0 && ok1
		}
		if cpuOK {
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		}
		b.ReportMetric(modelMB, "classifier-MB")
	})
	// One op is 1,000 messages, so that the median means something with
	// the few ops of -benchtime 3x.
	b.Run("classify", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			for range 1000 {
				start := time.Now()
				if _, err := l.Classify(ctx, msgs[i%len(msgs)]); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				i++
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}
