package discovery_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
)

// seedAgents are the agents of the seed's discovery tests.
func seedAgents() []registry.Agent {
	return []registry.Agent{
		{Name: "search-agent", Description: "Web search and indexing", Capabilities: []string{"search", "index"}, Endpoint: "http://localhost:1"},
		{Name: "code-agent", Description: "Code generation and review", Capabilities: []string{"code", "review"}, Endpoint: "http://localhost:2"},
		{Name: "data-agent", Description: "Data analysis and search", Capabilities: []string{"data", "search"}, Endpoint: "http://localhost:3"},
	}
}

func newEngine(t *testing.T, opts *discovery.Options, agents ...registry.Agent) *discovery.Engine {
	t.Helper()
	e := discovery.New(opts)
	for _, a := range agents {
		e.Put(a)
	}
	return e
}

func names(res []discovery.Result) []string {
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.Agent.Name
	}
	return out
}

func search(t *testing.T, e *discovery.Engine, query string, q *discovery.Query) []discovery.Result {
	t.Helper()
	res, err := e.Search(query, q)
	require.NoError(t, err)
	return res
}

// The seed's DiscoveryEngine tests, for both scorers.
func TestSeedDiscovery(t *testing.T) {
	e := newEngine(t, nil, seedAgents()...)
	for _, sc := range []discovery.Scorer{discovery.ScorerBM25, discovery.ScorerOverlap} {
		t.Run(string(sc), func(t *testing.T) {
			q := func(limit int) *discovery.Query { return &discovery.Query{Scorer: sc, Limit: limit} }
			res := search(t, e, "search", q(0))
			assert.GreaterOrEqual(t, len(res), 2)
			assert.Greater(t, res[0].Score, 0.0)
			assert.Equal(t, "search-agent", search(t, e, "web search indexing", q(0))[0].Agent.Name)
			assert.Len(t, search(t, e, "search", q(1)), 1)
			assert.Empty(t, search(t, e, "quantum physics", q(0)))
		})
	}
}

func TestWholeTokenMatching(t *testing.T) {
	e := newEngine(t, nil,
		registry.Agent{Name: "costume", Description: "Costume design and apparel"},
		registry.Agent{Name: "finance", Description: "Tracks budgeting for every cost center", Capabilities: []string{"cost_center", "code-review"}},
	)
	tests := []struct {
		query string
		want  []string
	}{
		{"cost", []string{"finance"}},                                  // not "costume"
		{"costumes", []string{"costume"}},                              // stemmed to the same term
		{"budgets", []string{"finance"}},                               // budgets / budgeting -> budget
		{"center", []string{"finance"}},                                // cost_center -> cost, center
		{"review", []string{"finance"}},                                // code-review -> code, review
		{"desi", nil},                                                  // no prefix matching
		{"apparel design", []string{"costume"}},                        // several terms
		{"COST CENTER", []string{"finance"}},                           // case folding
		{"a", nil},                                                     // no agent has the word "a"
		{"and", []string{"costume"}},                                   // only stop words: they are searched
		{"the budget and the costume", []string{"costume", "finance"}}, // stop words ignored
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got := names(search(t, e, tt.query, nil))
			slices.Sort(got)
			if tt.want == nil {
				tt.want = []string{}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestResultFields(t *testing.T) {
	e := newEngine(t, nil, registry.Agent{
		Name:         "finance-agent",
		DisplayName:  "Finance",
		Description:  "Budget reports and cost analysis for every department.",
		Capabilities: []string{"budgeting", "cost-center", "payroll"},
		Resources:    []registry.Resource{{URI: "https://erp.example.com/finance/*"}, {URI: "file://vm1/reports"}},
		Auth:         &registry.Auth{Type: registry.AuthBearer, Token: "secret"},
		Labels:       map[string]string{"team": "finance"},
	})
	res := search(t, e, "Budgets for the cost centers, please", &discovery.Query{
		RequiredResources: []string{"https://erp.example.com/finance/q3"},
	})
	require.Len(t, res, 1)
	r := res[0]
	assert.Equal(t, []string{"budgets", "cost", "centers"}, r.MatchedTerms)
	assert.Equal(t, []string{"budgeting", "cost-center"}, r.MatchedCapabilities)
	assert.Equal(t, []registry.Resource{{URI: "https://erp.example.com/finance/*"}}, r.MatchedResources)
	assert.InDelta(t, 1.0, r.Coverage, 1e-12)
	assert.Greater(t, r.Score, 0.0)
	assert.LessOrEqual(t, r.Score, 1.0)
	require.NotNil(t, r.Agent.Auth)
	assert.Empty(t, r.Agent.Auth.Token, "the auth token must not leave the engine")

	// Results are copies: changing them does not change the engine.
	r.Agent.Capabilities[0] = "changed"
	r.Agent.Labels["team"] = "changed"
	again := search(t, e, "budgets", nil)[0]
	assert.Equal(t, "budgeting", again.Agent.Capabilities[0])
	assert.Equal(t, "finance", again.Agent.Labels["team"])

	// Partial coverage; empty slices, not nil, for JSON.
	r = search(t, e, "budget weather", nil)[0]
	assert.InDelta(t, 0.5, r.Coverage, 1e-12)
	assert.Equal(t, []string{"budget"}, r.MatchedTerms)
	assert.NotNil(t, r.MatchedResources)
	assert.Empty(t, r.MatchedResources)
	r = search(t, e, "department", nil)[0]
	assert.NotNil(t, r.MatchedCapabilities)
	assert.Empty(t, r.MatchedCapabilities)
}

func TestMatchedCapabilitiesBeyondSeven(t *testing.T) {
	caps := []string{"a1", "b2", "c3", "d4", "e5", "f6", "g7", "weather", "h8", "forecast"}
	e := newEngine(t, nil, registry.Agent{Name: "many", Capabilities: caps})
	r := search(t, e, "weather forecast", nil)[0]
	assert.Equal(t, []string{"weather", "forecast"}, r.MatchedCapabilities)
}

func TestOrdering(t *testing.T) {
	// Equal records under different names tie: name order decides.
	var agents []registry.Agent
	for _, n := range []string{"delta", "alpha", "charlie", "bravo"} {
		agents = append(agents, registry.Agent{Name: n, Description: "weather forecast service"})
	}
	agents = append(agents, registry.Agent{Name: "zulu", Description: "weather", Capabilities: []string{"weather", "forecast"}})
	e := newEngine(t, nil, agents...)
	for _, sc := range []discovery.Scorer{discovery.ScorerBM25, discovery.ScorerOverlap} {
		res := search(t, e, "weather forecast", &discovery.Query{Scorer: sc})
		require.Len(t, res, 5)
		for i := 1; i < len(res); i++ {
			a, b := res[i-1], res[i]
			assert.True(t, a.Score > b.Score || a.Score == b.Score && a.Agent.Name < b.Agent.Name,
				"%s: %s(%v) before %s(%v)", sc, a.Agent.Name, a.Score, b.Agent.Name, b.Score)
		}
		tied := names(res)
		if sc == discovery.ScorerBM25 {
			assert.Equal(t, "zulu", tied[0], "capabilities weigh more than the description")
			tied = tied[1:]
		}
		assert.True(t, slices.IsSorted(tied[:4]), "%v", tied)
	}
}

func TestOverlapScorer(t *testing.T) {
	e := newEngine(t, nil,
		registry.Agent{Name: "one", Description: "weather", DisplayName: "Forecast"},
		registry.Agent{Name: "two", Description: "weather forecast"},
		registry.Agent{Name: "display-only", DisplayName: "Weather", Description: "nothing else"},
	)
	res := search(t, e, "weather forecast", &discovery.Query{Scorer: discovery.ScorerOverlap})
	// Overlap looks at description, capabilities and name only.
	require.Equal(t, []string{"two", "one"}, names(res))
	assert.Equal(t, 1.0, res[0].Score)
	assert.Equal(t, 0.5, res[1].Score)
	assert.Equal(t, res[1].Score, res[1].Coverage)
	assert.Equal(t, []string{"weather"}, res[1].MatchedTerms)
}

func TestQueryErrors(t *testing.T) {
	e := newEngine(t, nil, seedAgents()...)
	for _, q := range []string{"", "   ", "!!! ???", "—·…"} {
		_, err := e.Search(q, nil)
		require.ErrorIs(t, err, discovery.ErrEmptyQuery, "%q", q)
		assert.Equal(t, apierr.CodeInvalidArgument, discovery.Code(err))
	}
	for _, q := range []*discovery.Query{
		{Scorer: "tfidf"},
		{MinScore: -0.1},
		{MinScore: 1.5},
	} {
		_, err := e.Search("search", q)
		require.ErrorIs(t, err, discovery.ErrInvalidQuery, "%+v", q)
		assert.Equal(t, apierr.CodeInvalidArgument, discovery.Code(err))
	}
	assert.Equal(t, "", discovery.Code(errors.New("other")))
	assert.Equal(t, "", discovery.Code(nil))
}

func TestLimits(t *testing.T) {
	e := discovery.New(nil)
	for i := range 150 {
		e.Put(registry.Agent{Name: fmt.Sprintf("agent-%03d", i), Description: "weather"})
	}
	assert.Len(t, search(t, e, "weather", nil), discovery.DefaultLimit)
	assert.Len(t, search(t, e, "weather", &discovery.Query{Limit: -1}), discovery.DefaultLimit)
	assert.Len(t, search(t, e, "weather", &discovery.Query{Limit: 1000}), discovery.MaxLimit)
	assert.Len(t, search(t, e, "weather", &discovery.Query{Limit: 3}), 3)
	assert.Equal(t, 150, e.Len())
}

func TestMinScore(t *testing.T) {
	e := newEngine(t, nil, seedAgents()...)
	all := search(t, e, "web search indexing", &discovery.Query{Limit: 100})
	require.Len(t, all, 2)
	cut := (all[0].Score + all[1].Score) / 2
	res := search(t, e, "web search indexing", &discovery.Query{MinScore: cut})
	assert.Equal(t, []string{"search-agent"}, names(res))
	res = search(t, e, "web search indexing", &discovery.Query{MinScore: all[1].Score})
	assert.Len(t, res, 2, "MinScore is inclusive")
	res = search(t, e, "web search indexing", &discovery.Query{Scorer: discovery.ScorerOverlap, MinScore: 1})
	assert.Equal(t, []string{"search-agent"}, names(res))
}

func TestFilters(t *testing.T) {
	e := newEngine(t, nil,
		registry.Agent{Name: "http-default", Description: "weather", Labels: map[string]string{"team": "ops", "env": "prod"}},
		registry.Agent{Name: "mcp", Description: "weather", Protocol: registry.ProtocolMCP, Labels: map[string]string{"team": "ops"}},
		registry.Agent{Name: "a2a", Description: "weather", Protocol: registry.ProtocolA2A},
	)
	tests := []struct {
		name string
		q    discovery.Query
		want []string
	}{
		{"none", discovery.Query{}, []string{"a2a", "http-default", "mcp"}},
		{"protocol http includes unset", discovery.Query{Protocol: registry.ProtocolHTTP}, []string{"http-default"}},
		{"protocol mcp", discovery.Query{Protocol: registry.ProtocolMCP}, []string{"mcp"}},
		{"one label", discovery.Query{Labels: map[string]string{"team": "ops"}}, []string{"http-default", "mcp"}},
		{"all labels must match", discovery.Query{Labels: map[string]string{"team": "ops", "env": "prod"}}, []string{"http-default"}},
		{"label value differs", discovery.Query{Labels: map[string]string{"team": "dev"}}, []string{}},
		{"label and protocol", discovery.Query{Labels: map[string]string{"team": "ops"}, Protocol: registry.ProtocolMCP}, []string{"mcp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, names(search(t, e, "weather", &tt.q)))
		})
	}
}

// The seed's resource-aware discovery tests.
func TestRequiredResources(t *testing.T) {
	e := newEngine(t, nil,
		registry.Agent{Name: "dev-vm1", Description: "Code review and debugging", Capabilities: []string{"code-review", "debugging"},
			Resources: []registry.Resource{{URI: "file://vm1.company.com/home/amit/projects/*"}, {URI: "git://github.com/agentkitai/agentlens"}, {URI: "/home/amit/projects/*"}}},
		registry.Agent{Name: "dev-vm2", Description: "Code review and testing", Capabilities: []string{"code-review", "testing"},
			Resources: []registry.Resource{{URI: "file://vm2.company.com/home/amit/projects/*"}, {URI: "git://github.com/company/backend"}, {URI: "/opt/company/services/*"}}},
		registry.Agent{Name: "ops-agent", Description: "DevOps and deployment", Capabilities: []string{"devops", "deployment"},
			Resources: []registry.Resource{{URI: "https://api.aws.amazon.com"}, {URI: "service://k8s-prod/my-service"}, {URI: "kubernetes-cluster-prod"}}},
	)
	tests := []struct {
		name     string
		query    string
		required []string
		want     []string
	}{
		{"filesystem on the right host", "code review", []string{"file://vm1.company.com/home/amit/projects/agentlens"}, []string{"dev-vm1"}},
		{"same path on the other host", "code review", []string{"file://vm2.company.com/home/amit/projects/agentlens"}, []string{"dev-vm2"}},
		{"other path on a known host", "code review", []string{"file://vm1.company.com/opt/other"}, []string{}},
		{"unknown host", "code review", []string{"file://vm3.company.com/srv/unknown"}, []string{}},
		{"git repo", "code review", []string{"git://github.com/agentkitai/agentlens"}, []string{"dev-vm1"}},
		{"API", "devops deployment", []string{"https://api.aws.amazon.com"}, []string{"ops-agent"}},
		{"API sub-path", "devops deployment", []string{"https://api.aws.amazon.com/ec2/instances"}, []string{"ops-agent"}},
		{"all must be covered", "code review", []string{"file://vm1.company.com/home/amit/projects/agentlens", "https://api.aws.amazon.com"}, []string{}},
		{"non-URL glob", "code review", []string{"/opt/company/services/auth"}, []string{"dev-vm2"}},
		{"non-URL path", "code review", []string{"/home/amit/projects/agentlens"}, []string{"dev-vm1"}},
		{"non-URL name", "devops", []string{"kubernetes-cluster-prod"}, []string{"ops-agent"}},
		{"none required", "code review", nil, []string{"dev-vm1", "dev-vm2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := search(t, e, tt.query, &discovery.Query{RequiredResources: tt.required})
			got := names(res)
			slices.Sort(got)
			assert.Equal(t, tt.want, got)
			for _, r := range res {
				if len(tt.required) > 0 {
					assert.NotEmpty(t, r.MatchedResources)
				}
			}
		})
	}
	// Covering is a filter, not a boost: scores are those without it.
	with := search(t, e, "code review", &discovery.Query{RequiredResources: []string{"git://github.com/agentkitai/agentlens"}})
	without := search(t, e, "code review", nil)
	require.Len(t, with, 1)
	for _, r := range without {
		if r.Agent.Name == with[0].Agent.Name {
			assert.Equal(t, r.Score, with[0].Score)
		}
	}
}

func TestStaleAgentsAreLeftOut(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	e := newEngine(t, &discovery.Options{Now: func() time.Time { return clock }},
		registry.Agent{Name: "ttl", Description: "weather", TTLSeconds: 30, LastSeen: now},
		registry.Agent{Name: "forever", Description: "weather"},
	)
	assert.Equal(t, []string{"forever", "ttl"}, names(search(t, e, "weather", nil)))
	clock = now.Add(30 * time.Second) // exactly one TTL: not yet stale
	assert.Equal(t, []string{"forever", "ttl"}, names(search(t, e, "weather", nil)))
	clock = now.Add(31 * time.Second)
	assert.Equal(t, []string{"forever"}, names(search(t, e, "weather", nil)))
	// A heartbeat revives it.
	e.Apply(registry.Event{Type: registry.EventHeartbeat, Agent: registry.Agent{Name: "ttl", Description: "weather", TTLSeconds: 30, LastSeen: clock}})
	assert.Equal(t, []string{"forever", "ttl"}, names(search(t, e, "weather", nil)))
}

func TestUnavailableAgents(t *testing.T) {
	var mu sync.Mutex
	open := map[string]bool{}
	calls := 0
	e := discovery.New(&discovery.Options{Available: func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return !open[name]
	}})
	for i := range 30 {
		e.Put(registry.Agent{Name: fmt.Sprintf("agent-%02d", i), Description: "weather"})
	}
	for i := range 25 {
		open[fmt.Sprintf("agent-%02d", i)] = true // the 25 first by name are open
	}
	res := search(t, e, "weather", &discovery.Query{Limit: 3})
	assert.Equal(t, []string{"agent-25", "agent-26", "agent-27"}, names(res))
	res = search(t, e, "weather", &discovery.Query{Limit: 10})
	assert.Equal(t, []string{"agent-25", "agent-26", "agent-27", "agent-28", "agent-29"}, names(res))
	calls = 0
	res = search(t, e, "weather", &discovery.Query{Limit: 3, IncludeUnavailable: true})
	assert.Equal(t, []string{"agent-00", "agent-01", "agent-02"}, names(res))
	assert.Zero(t, calls, "Available is not consulted when unavailable agents are included")
}

func TestPutReplaceRemove(t *testing.T) {
	e := newEngine(t, nil, seedAgents()...)
	e.Put(registry.Agent{Name: "code-agent", Description: "Weather forecasts"})
	assert.Empty(t, search(t, e, "review", nil))
	assert.Equal(t, []string{"code-agent"}, names(search(t, e, "forecast", nil)))
	assert.True(t, e.Remove("code-agent"))
	assert.False(t, e.Remove("code-agent"))
	assert.Empty(t, search(t, e, "forecast", nil))
	assert.Equal(t, 2, e.Len())

	e.Apply(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "n", Description: "forecast"}})
	assert.Equal(t, []string{"n"}, names(search(t, e, "forecast", nil)))
	e.Apply(registry.Event{Type: registry.EventDelete, Agent: registry.Agent{Name: "n"}})
	assert.Empty(t, search(t, e, "forecast", nil))
	e.Apply(registry.Event{Type: 99}) // unknown events are ignored

	var zero discovery.Engine // the zero Engine works
	assert.Empty(t, search(t, &zero, "forecast", nil))
	assert.False(t, zero.Remove("x"))
	zero.Put(registry.Agent{Name: "x", Description: "forecast"})
	assert.Equal(t, []string{"x"}, names(search(t, &zero, "forecast", nil)))
}

func TestConcatenatedNames(t *testing.T) {
	e := discovery.New(nil)
	e.Reset([]registry.Agent{
		{Name: "airqualityforecast", Description: "Planning something outdoors?"},
		{Name: "weather", Description: "The air quality and pollen forecast."},
		{Name: "total_query_meta_search_engine", Description: "Go beyond google"},
		{Name: "SummarizeAnything_pr", Description: "Summaries of pages"},
	})
	assert.Contains(t, names(search(t, e, "quality", nil)), "airqualityforecast")
	assert.Contains(t, names(search(t, e, "meta engine", nil)), "total_query_meta_search_engine")
	assert.Contains(t, names(search(t, e, "anything", nil)), "SummarizeAnything_pr")
	assert.Equal(t, "airqualityforecast", search(t, e, "airqualityforecast", nil)[0].Agent.Name)
}

// fakeRegistry is a minimal registry.Subscriber.
type fakeRegistry struct {
	mu       sync.Mutex
	agents   map[string]registry.Agent
	subs     map[int]func(registry.Event)
	next     int
	duringFn func() // runs inside Subscribe, after the snapshot
}

func (r *fakeRegistry) Subscribe(fn func(registry.Event)) ([]registry.Agent, func()) {
	r.mu.Lock()
	snap := make([]registry.Agent, 0, len(r.agents))
	for _, a := range r.agents {
		snap = append(snap, a)
	}
	id := r.next
	r.next++
	r.subs[id] = fn
	r.mu.Unlock()
	if r.duringFn != nil {
		r.duringFn()
	}
	return snap, func() {
		r.mu.Lock()
		delete(r.subs, id)
		r.mu.Unlock()
	}
}

func (r *fakeRegistry) emit(ev registry.Event) {
	r.mu.Lock()
	switch ev.Type {
	case registry.EventDelete:
		delete(r.agents, ev.Agent.Name)
	default:
		r.agents[ev.Agent.Name] = ev.Agent
	}
	subs := make([]func(registry.Event), 0, len(r.subs))
	for _, fn := range r.subs {
		subs = append(subs, fn)
	}
	r.mu.Unlock()
	for _, fn := range subs {
		fn(ev)
	}
}

func TestFollow(t *testing.T) {
	reg := &fakeRegistry{agents: map[string]registry.Agent{}, subs: map[int]func(registry.Event){}}
	for _, a := range seedAgents() {
		reg.agents[a.Name] = a
	}
	// An event that arrives before Follow has indexed the snapshot is
	// applied after it.
	reg.duringFn = func() {
		reg.emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "early", Description: "forecast"}})
	}
	e := discovery.New(nil)
	e.Put(registry.Agent{Name: "stale-local", Description: "forecast"}) // replaced by the snapshot
	stop := e.Follow(reg)
	reg.duringFn = nil
	assert.Equal(t, []string{"early"}, names(search(t, e, "forecast", nil)))
	assert.Equal(t, 4, e.Len())

	reg.emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "late", Description: "forecast"}})
	reg.emit(registry.Event{Type: registry.EventDelete, Agent: registry.Agent{Name: "early"}})
	assert.Equal(t, []string{"late"}, names(search(t, e, "forecast", nil)))

	stop()
	stop() // idempotent
	reg.emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "after-stop", Description: "forecast"}})
	assert.Equal(t, []string{"late"}, names(search(t, e, "forecast", nil)))
}

func TestConcurrentUse(t *testing.T) {
	e := newEngine(t, nil, seedAgents()...)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 200 {
				name := fmt.Sprintf("w%d-%d", w, i%20)
				e.Put(registry.Agent{Name: name, Description: "search and weather data", Capabilities: []string{"search"}})
				if i%3 == 0 {
					e.Remove(name)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				res, err := e.Search("search weather", &discovery.Query{Limit: 5})
				if !assert.NoError(t, err) {
					return
				}
				assert.LessOrEqual(t, len(res), 5)
			}
		}()
	}
	wg.Wait()
}

func TestLongQueries(t *testing.T) {
	e := newEngine(t, nil,
		registry.Agent{Name: "first", Description: "w000"},
		registry.Agent{Name: "last", Description: fmt.Sprintf("w%03d", discovery.MaxQueryTerms+10)},
	)
	var words []string
	for i := range discovery.MaxQueryTerms + 20 {
		words = append(words, fmt.Sprintf("w%03d", i), fmt.Sprintf("w%03d", i)) // duplicates count once
	}
	query := fmt.Sprint(words)
	res := search(t, e, query, nil)
	assert.Equal(t, []string{"first"}, names(res), "terms past MaxQueryTerms are ignored")
	assert.InDelta(t, 1.0/discovery.MaxQueryTerms, res[0].Coverage, 1e-12)
}

func TestQueryLengthLimit(t *testing.T) {
	e := newEngine(t, nil, registry.Agent{Name: "billing", Description: "refunds and invoices"})
	fill := func(word string, runes int) string { // word, then spaces to the length
		return word + strings.Repeat(" ", runes-utf8.RuneCountInString(word))
	}
	for _, tc := range []struct {
		name  string
		query string
		ok    bool
	}{
		{"at the limit", fill("refunds", discovery.MaxQueryRunes), true},
		{"multibyte at the limit", fill("refunds", discovery.MaxQueryRunes-1) + "é", true}, // more bytes than runes
		{"one over", fill("refunds", discovery.MaxQueryRunes+1), false},
		{"multibyte one over", fill("refunds", discovery.MaxQueryRunes) + "é", false},
		{"a mebibyte", fill("refunds", 1<<20), false},
		{"invalid bytes count one each", "refunds " + strings.Repeat("\xff", discovery.MaxQueryRunes), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Search(tc.query, nil)
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, []string{"billing"}, names(res))
				return
			}
			require.ErrorIs(t, err, discovery.ErrInvalidQuery)
			assert.Equal(t, "invalid_argument", discovery.Code(err))
			assert.Contains(t, err.Error(), "longer than 10000 characters")
			assert.Nil(t, res)
		})
	}
}
