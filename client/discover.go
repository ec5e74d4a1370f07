package client

import (
	"context"
	"net/http"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// discoverBody is the body of POST /v1/discover.
type discoverBody struct {
	Query              string            `json:"query"`
	Limit              int               `json:"limit,omitempty"`
	MinScore           float64           `json:"minScore,omitempty"`
	Scorer             discovery.Scorer  `json:"scorer,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	Protocol           registry.Protocol `json:"protocol,omitempty"`
	RequiredResources  []string          `json:"requiredResources,omitempty"`
	IncludeUnavailable bool              `json:"includeUnavailable,omitempty"`
}

// Search ranks the registered agents for query (POST /v1/discover), best
// first, with every option of q (nil means the defaults: 10 results,
// bm25). The results' agents carry no auth token. A query with no word
// in it is discovery.ErrEmptyQuery; an option out of range is
// discovery.ErrInvalidQuery.
func (c *Client) Search(ctx context.Context, query string, q *discovery.Query) ([]discovery.Result, error) {
	b := discoverBody{Query: query}
	if q != nil {
		b.Limit = max(q.Limit, 0) // ≤ 0 means the default, as for the engine
		b.MinScore = q.MinScore
		b.Scorer = q.Scorer
		b.Labels = q.Labels
		b.Protocol = q.Protocol
		b.RequiredResources = q.RequiredResources
		b.IncludeUnavailable = q.IncludeUnavailable
	}
	var res []discovery.Result
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/discover", body: b, route: routeDiscover}, &res); err != nil {
		return nil, err
	}
	if res == nil {
		res = []discovery.Result{}
	}
	return res, nil
}
