package discovery

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
)

// randomAgent draws an agent from a small vocabulary, so that terms are
// shared and lists overlap, with every indexed field exercised.
func randomAgent(r *rand.Rand, name string) registry.Agent { return randomAgentConcat(r, name, true) }

// randomAgentConcat is randomAgent, with concatenated words in names only
// when concat.
func randomAgentConcat(r *rand.Rand, name string, concat bool) registry.Agent {
	words := strings.Fields("search index code review data budget budgets budgeting cost center codereview xyzzy plugh " +
		"weather forecast travel hotel flight music playlist news stock price email calendar " +
		"translate translation image photo video summary summarize the a of for and with")
	pick := func(n int) string {
		out := make([]string, n)
		for i := range out {
			out[i] = words[r.Intn(len(words))]
		}
		return strings.Join(out, " ")
	}
	a := registry.Agent{
		Name:        name,
		Description: pick(r.Intn(30)),
		Labels:      map[string]string{"team": []string{"a", "b"}[r.Intn(2)]},
	}
	switch r.Intn(3) {
	case 0:
		a.DisplayName = pick(1 + r.Intn(3))
	case 1:
		if !concat {
			break
		}
		// A concatenated name: its segmentation depends on the words the
		// index holds when the agent arrives.
		a.DisplayName = strings.ReplaceAll(pick(2+r.Intn(2)), " ", "")
	}
	if concat && r.Intn(4) == 0 {
		a.Capabilities = append(a.Capabilities, strings.ReplaceAll(pick(2), " ", ""))
	}
	for range r.Intn(9) { // up to 8: exercises the capability mask overflow
		a.Capabilities = append(a.Capabilities, strings.ReplaceAll(pick(1+r.Intn(2)), " ", "-"))
	}
	for range r.Intn(3) {
		a.Examples = append(a.Examples, pick(3+r.Intn(8)))
	}
	if a.Description == "" && len(a.Capabilities) == 0 {
		a.Capabilities = []string{"search"}
	}
	return a
}

// bruteForce scores every indexed agent for query with the plain formulas,
// no pruning, and returns the top k.
func bruteForce(t *testing.T, e *Engine, query string, q *Query) []Result {
	t.Helper()
	o, err := validate(q)
	require.NoError(t, err)
	terms, err := parseQuery(query, &e.text)
	require.NoError(t, err)
	e.mu.RLock()
	defer e.mu.RUnlock()
	ix := e.ix
	p := e.scoring()
	overlap := o.Scorer == ScorerOverlap
	total := 0.0
	idfs := make([]float64, len(terms))
	for i, qt := range terms {
		df := 0
		if id, ok := ix.termIDs[qt.key]; ok {
			df = len(ix.terms[id].docs)
		}
		idfs[i] = idf(ix.nDocs, df)
		if overlap {
			idfs[i] = 1
		}
		total += idfs[i]
	}
	var res []Result
	for _, d := range ix.docIDs {
		doc := &ix.docs[d]
		score := 0.0
		for i, qt := range terms {
			id, ok := ix.termIDs[qt.key]
			if !ok {
				continue
			}
			c := ix.terms[id].find(d)
			if c == nil {
				continue
			}
			if overlap {
				if c[fieldName]|c[fieldCapabilities]|c[fieldDescription] != 0 {
					score++
				}
				continue
			}
			tf := 0.0
			for f := range numFields {
				tf += p.weight[f] * float64(c[f]) / (1 - p.b[f] + p.b[f]*float64(ix.lens[d][f])/ix.avg[f])
			}
			score += idfs[i] * tf / (p.k1 + tf)
		}
		a := doc.record()
		if score == 0 || score/total < o.MinScore {
			continue
		}
		if v, ok := o.Labels["team"]; ok && a.Labels["team"] != v {
			continue
		}
		res = append(res, Result{Agent: a, Score: score / total})
	}
	slices.SortFunc(res, func(x, y Result) int {
		if c := cmp.Compare(y.Score, x.Score); c != 0 {
			return c
		}
		return strings.Compare(x.Agent.Name, y.Agent.Name)
	})
	if len(res) > o.limit {
		res = res[:o.limit]
	}
	return res
}

// checkIndex verifies the invariants of the index against its records.
func checkIndex(t *testing.T, e *Engine) {
	t.Helper()
	e.mu.RLock()
	defer e.mu.RUnlock()
	ix := e.ix
	var totals [numFields]int64
	words := make(map[string]int32)
	postings := 0
	for name, id := range ix.docIDs {
		d := &ix.docs[id]
		require.Equal(t, name, d.agent.Name)
		require.True(t, slices.IsSorted(d.seg))
		terms := ix.docTerms(id, &e.text)
		for f := range numFields {
			totals[f] += int64(ix.lens[id][f])
		}
		for _, w := range agentWords(&d.agent, &e.text) {
			words[w]++
		}
		for _, tid := range terms {
			c := ix.terms[tid].find(id)
			require.NotNil(t, c, "doc %q has term %q without a posting", name, ix.terms[tid].key)
		}
		postings += len(terms)
	}
	require.Equal(t, totals, ix.totals)
	require.Equal(t, words, ix.words)
	require.Equal(t, len(ix.docIDs), ix.nDocs)
	n := 0
	bound := ix.boundFactor()
	for key, tid := range ix.termIDs {
		tm := &ix.terms[tid]
		require.Equal(t, key, tm.key)
		require.NotEmpty(t, tm.docs)
		require.True(t, slices.IsSorted(tm.docs))
		require.Len(t, tm.counts, len(tm.docs))
		for i, d := range tm.docs {
			// The bound holds at the current averages.
			require.LessOrEqual(t, float64(ix.tfOf(&tm.counts[i], &ix.lens[d])), float64(tm.maxTF)*bound*(1+1e-6))
			if m := tm.counts[i].meta(); m != multiField {
				f := int(m >> 13)
				require.Equal(t, ix.lens[d][f], m&maxMetaLen)
			}
		}
		n += len(tm.docs)
	}
	require.Equal(t, postings, n)
}

func TestMaxScoreMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	queries := []string{"search", "code review", "budgets cost", "weather forecast travel", "the a of",
		"music playlist news stock", "translate photo", "summary summarize", "unknownword search", "hotel"}
	for round := range 20 {
		e := New(nil)
		var names []string
		for i := range 60 + r.Intn(140) {
			name := fmt.Sprintf("agent-%03d", i)
			e.Put(randomAgent(r, name))
			names = append(names, name)
		}
		// Churn: replace and remove some, re-add others.
		for range 80 {
			name := names[r.Intn(len(names))]
			switch r.Intn(4) {
			case 0:
				e.Remove(name)
			case 1:
				a := randomAgent(r, name)
				e.Put(a)
				e.Put(a) // unchanged content: no re-index
			default:
				e.Put(randomAgent(r, name))
			}
		}
		checkIndex(t, e)
		e.mu.RLock()
		segmented := 0
		for _, id := range e.ix.docIDs {
			if len(e.ix.docs[id].seg) > 0 {
				segmented++
			}
		}
		e.mu.RUnlock()
		require.Positive(t, segmented, "no agent exercised segmentation")
		for _, query := range queries {
			for _, q := range []*Query{
				nil,
				{Scorer: ScorerOverlap, Limit: 7},
				{Limit: 3, MinScore: 0.2},
				{Limit: 100, Labels: map[string]string{"team": "a"}},
				{Scorer: ScorerOverlap, Limit: 100, MinScore: 0.5},
			} {
				got, err := e.Search(query, q)
				require.NoError(t, err)
				want := bruteForce(t, e, query, q)
				require.Len(t, got, len(want), "round %d query %q %+v", round, query, q)
				for i := range got {
					// Positions agree on score; names agree except where
					// scores tie to rounding.
					require.InDelta(t, want[i].Score, got[i].Score, 1e-9, "round %d query %q #%d", round, query, i)
					if math.Abs(want[i].Score-got[i].Score) == 0 {
						require.Equal(t, want[i].Agent.Name, got[i].Agent.Name, "round %d query %q #%d", round, query, i)
					}
				}
			}
		}
	}
}

// TestPutMatchesReset checks that an index built agent by agent answers like
// one built in bulk (names here need no segmentation, the only part that
// depends on the order of arrival).
func TestPutMatchesReset(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	var agents []registry.Agent
	for i := range 150 {
		agents = append(agents, randomAgentConcat(r, fmt.Sprintf("agent-%03d", i), false))
	}
	bulk, incr := New(nil), New(nil)
	bulk.Reset(agents)
	for _, a := range agents {
		incr.Put(a)
	}
	checkIndex(t, bulk)
	checkIndex(t, incr)
	for _, query := range []string{"search data", "budget", "code review weather", "the"} {
		a, err := bulk.Search(query, &Query{Limit: 50})
		require.NoError(t, err)
		b, err := incr.Search(query, &Query{Limit: 50})
		require.NoError(t, err)
		require.Len(t, b, len(a))
		for i := range a {
			require.InDelta(t, a[i].Score, b[i].Score, 1e-9)
		}
	}
}

func TestHeartbeatDoesNotReindex(t *testing.T) {
	e := New(nil)
	a := registry.Agent{Name: "w", Description: "weather forecast", TTLSeconds: 10, LastSeen: time.Unix(100, 0)}
	e.Put(a)
	e.mu.RLock()
	before := &e.ix.terms[e.ix.termIDs["weather"]].counts[0]
	e.mu.RUnlock()
	a.LastSeen = time.Unix(200, 0)
	e.Apply(registry.Event{Type: registry.EventHeartbeat, Agent: a})
	e.mu.RLock()
	defer e.mu.RUnlock()
	require.Same(t, before, &e.ix.terms[e.ix.termIDs["weather"]].counts[0], "postings were rebuilt")
	require.Equal(t, time.Unix(200, 0), e.ix.docs[0].agent.LastSeen)
}

func TestLongFieldUsesDocLengths(t *testing.T) {
	// A field longer than a posting's meta can hold is scored from the
	// document's lengths.
	e := New(nil)
	long := strings.Repeat("filler ", maxMetaLen+10) + "needle"
	e.Put(registry.Agent{Name: "long", Description: long})
	e.Put(registry.Agent{Name: "short", Description: "needle in a haystack"})
	checkIndex(t, e)
	got, err := e.Search("needle", nil)
	require.NoError(t, err)
	want := bruteForce(t, e, "needle", nil)
	require.Len(t, got, 2)
	for i := range got {
		require.Equal(t, want[i].Agent.Name, got[i].Agent.Name)
		require.InDelta(t, want[i].Score, got[i].Score, 1e-12)
	}
}

func TestSegmentationRules(t *testing.T) {
	e := New(nil)
	e.Put(registry.Agent{Name: "vocab", Description: "weather forecast budget copy writer"})
	tests := []struct {
		agent registry.Agent
		seg   []string // segmentation-only terms
	}{
		{registry.Agent{Name: "a", Capabilities: []string{"budgeting"}}, nil}, // an inflected word
		{registry.Agent{Name: "b", Capabilities: []string{"weatherforecast"}}, []string{"forecast", "weather"}},
		{registry.Agent{Name: "c", DisplayName: "Weatherforecast", Description: "weather"}, []string{"forecast"}},
		{registry.Agent{Name: "copywriter"}, []string{"copi", "writer"}},
		{registry.Agent{Name: "d", Capabilities: []string{"weather-forecast"}}, nil}, // already words
	}
	for _, tt := range tests {
		an := analyze(&tt.agent, agentWords(&tt.agent, &e.text), e.ix.knownWord, &e.text)
		assert.Equal(t, tt.seg, an.segKeys, "%+v", tt.agent)
	}
}
