package discovery_test

import (
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/textnorm"
	"github.com/agentmesh/agentmesh/registry"
)

// FuzzSearch checks that any query either fails with ErrEmptyQuery (exactly
// when it has no token) or returns well-formed, ordered results.
func FuzzSearch(f *testing.F) {
	e := discovery.New(nil)
	e.Reset(append(seedAgents(),
		registry.Agent{Name: "airqualityforecast", Description: "Air quality forecast for any zip code.", Capabilities: []string{"cost_center", "ÉCOLE"}},
		registry.Agent{Name: "it", Description: "IT support: who, what and how.", Examples: []string{"reset my password"}},
	))
	for _, q := range []string{"search", "web search indexing", "", "the a of", "IT", "air-quality FORECASTS", "\xff\xfe", "école"} {
		f.Add(q, uint8(0))
	}
	f.Fuzz(func(t *testing.T, query string, opts uint8) {
		q := &discovery.Query{Limit: int(opts % 8)}
		if opts&8 != 0 {
			q.Scorer = discovery.ScorerOverlap
		}
		res, err := e.Search(query, q)
		if len(textnorm.Tokens(nil, query)) == 0 {
			if !errors.Is(err, discovery.ErrEmptyQuery) {
				t.Fatalf("query %q: err = %v, want ErrEmptyQuery", query, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("query %q: %v", query, err)
		}
		limit := q.Limit
		if limit <= 0 {
			limit = discovery.DefaultLimit
		}
		if len(res) > limit {
			t.Fatalf("%d results for limit %d", len(res), limit)
		}
		for i, r := range res {
			if !(r.Score > 0 && r.Score <= 1) || !(r.Coverage > 0 && r.Coverage <= 1) || len(r.MatchedTerms) == 0 {
				t.Fatalf("query %q: bad result %+v", query, r)
			}
			if i > 0 {
				p := res[i-1]
				if p.Score < r.Score || p.Score == r.Score && p.Agent.Name >= r.Agent.Name {
					t.Fatalf("query %q: %s before %s", query, p.Agent.Name, r.Agent.Name)
				}
			}
		}
	})
}
