package client

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/agentmesh/agentmesh/registry"
)

// agentPath is the path of the agent name.
func agentPath(name string) string { return "/v1/agents/" + url.PathEscape(name) }

// Register registers a, or replaces the agent of that name (POST
// /v1/agents), and returns the stored record and whether it is new (HTTP
// 201). The record's auth token is sent; the server never returns it.
// The registry sets RegisteredAt, UpdatedAt, LastSeen, Source and Stale:
// their values in a are ignored.
func (c *Client) Register(ctx context.Context, a registry.Agent) (registry.Agent, bool, error) {
	return c.register(ctx, call{method: http.MethodPost, path: "/v1/agents", body: a, route: routeAgents})
}

// RegisterJSON is [Client.Register] of an agent record in its JSON form,
// sent as it is, so that the server checks it as written: an unknown,
// misspelt or duplicated key is refused (registry.ErrInvalid), where
// decoding it into a registry.Agent first would drop it. It is the call
// for records read from files or other programs. data must be valid
// JSON.
func (c *Client) RegisterJSON(ctx context.Context, data []byte) (registry.Agent, bool, error) {
	if !c.usable() {
		return registry.Agent{}, false, ErrNoServer
	}
	if !json.Valid(data) {
		return registry.Agent{}, false, errors.New("client: RegisterJSON: the agent record is not valid JSON")
	}
	return c.register(ctx, call{method: http.MethodPost, path: "/v1/agents", raw: slices.Clone(data), route: routeAgents})
}

// ImportCard registers the A2A agent described by the Agent Card at
// cardURL (POST /v1/agents/import; the server fetches the card) and
// returns the stored record and whether it is new. A card the server
// could not fetch is an *Error with code card_fetch_failed (HTTP 502).
func (c *Client) ImportCard(ctx context.Context, cardURL string) (registry.Agent, bool, error) {
	return c.register(ctx, call{method: http.MethodPost, path: "/v1/agents/import",
		body: map[string]string{"cardUrl": cardURL}, route: routeAgents})
}

func (c *Client) register(ctx context.Context, cl call) (registry.Agent, bool, error) {
	var a registry.Agent
	r, err := c.do(ctx, cl, &a)
	if err != nil {
		return registry.Agent{}, false, err
	}
	return a, r.status == http.StatusCreated, nil
}

// Agent returns the agent registered under name (GET /v1/agents/{name}).
func (c *Client) Agent(ctx context.Context, name string) (registry.Agent, error) {
	var a registry.Agent
	_, err := c.do(ctx, call{method: http.MethodGet, path: agentPath(name), route: routeAgents}, &a)
	return a, err
}

// List returns one page of agents in name order (GET /v1/agents): at most
// opts.Limit of them (0 means the server's default, 100; at most 1000),
// from opts.Cursor (a previous page's NextCursor), with every label of
// opts.Labels. Page.NextCursor is empty on the last page. [Client.Agents]
// walks every page.
func (c *Client) List(ctx context.Context, opts registry.ListOptions) (registry.Page, error) {
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Labels)) {
		q.Add("label", k+"="+opts.Labels[k])
	}
	var agents []registry.Agent
	r, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/agents", query: q, route: routeAgents}, &agents)
	if err != nil {
		return registry.Page{}, err
	}
	if agents == nil {
		agents = []registry.Agent{}
	}
	return registry.Page{Agents: agents, NextCursor: nextLinkQuery(r.header).Get("cursor")}, nil
}

// Agents returns every agent selected by opts, in name order, fetching
// page after page (opts.Limit is the page size) as the loop asks for
// more. A failure is yielded once, with the zero Agent, and ends the
// sequence. Agents registered or removed during the walk may or may not
// be seen.
func (c *Client) Agents(ctx context.Context, opts registry.ListOptions) iter.Seq2[registry.Agent, error] {
	return func(yield func(registry.Agent, error) bool) {
		for {
			page, err := c.List(ctx, opts)
			if err != nil {
				yield(registry.Agent{}, err)
				return
			}
			for _, a := range page.Agents {
				if !yield(a, nil) {
					return
				}
			}
			if page.NextCursor == "" || page.NextCursor == opts.Cursor {
				return
			}
			opts.Cursor = page.NextCursor
		}
	}
}

// Delete removes the agent registered under name (DELETE
// /v1/agents/{name}). An agent of the agent directory cannot be removed
// through the API: registry.ErrManagedByFile.
func (c *Client) Delete(ctx context.Context, name string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: agentPath(name), route: routeAgents}, nil)
	return err
}

// Heartbeat refreshes the agent's lastSeen, and so its TTL (POST
// /v1/agents/{name}/heartbeat), and returns the record.
func (c *Client) Heartbeat(ctx context.Context, name string) (registry.Agent, error) {
	var a registry.Agent
	_, err := c.do(ctx, call{method: http.MethodPost, path: agentPath(name) + "/heartbeat", route: routeAgents}, &a)
	return a, err
}

// Health checks that the server is up (GET /health, no token needed).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/health"}, nil)
	return err
}
