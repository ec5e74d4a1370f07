package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// TestNew: only http(s) URLs with a host, no userinfo, query or fragment;
// a path prefix is kept.
func TestNew(t *testing.T) {
	for _, bad := range []string{"", "localhost:8766", "ftp://host", "http://", "http://user:pw@host",
		"http://host/?q=1", "http://host/#frag", "unix:///tmp/mesh.sock", "http://host/%zz"} {
		_, err := client.New(bad, nil)
		assert.Error(t, err, "%q", bad)
	}
	_, err := client.New("http://user:secret-pw@host", nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret-pw", "userinfo is not repeated in the error")

	// A mesh behind a path prefix.
	m := newMesh(t, meshConfig{})
	front := httptest.NewServer(http.StripPrefix("/mesh", m.ts.Config.Handler))
	t.Cleanup(front.Close)
	for _, base := range []string{front.URL + "/mesh", front.URL + "/mesh/"} {
		c := newClient(t, base, adminToken, nil)
		_, _, err := c.Register(ctxT(t), agentRecord("prefixed", "http://127.0.0.1:9/task"))
		require.NoError(t, err, base)
		a, err := c.Agent(ctxT(t), "prefixed")
		require.NoError(t, err, base)
		assert.Equal(t, "prefixed", a.Name)
	}
	assert.Equal(t, "agentmesh client of "+front.URL+"/mesh", newClient(t, front.URL+"/mesh/", adminToken, nil).String())
}

// TestZeroClient: the zero Client and a nil *Client return ErrNoServer
// from every method, and never panic.
func TestZeroClient(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]*client.Client{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			errs := map[string]error{}
			_, _, errs["Register"] = c.Register(ctx, agentRecord("a", "http://127.0.0.1:9/task"))
			_, _, errs["RegisterJSON"] = c.RegisterJSON(ctx, []byte(`{}`))
			_, errs["Agent"] = c.Agent(ctx, "a")
			_, errs["List"] = c.List(ctx, registry.ListOptions{})
			errs["Delete"] = c.Delete(ctx, "a")
			_, errs["Heartbeat"] = c.Heartbeat(ctx, "a")
			_, _, errs["ImportCard"] = c.ImportCard(ctx, "http://127.0.0.1:9/card.json")
			_, errs["Search"] = c.Search(ctx, "budget", nil)
			_, errs["Delegate"] = c.Delegate(ctx, delegation.Request{Target: "a", Task: "t"})
			_, errs["Delegation"] = c.Delegation(ctx, "id")
			_, errs["WaitDelegation"] = c.WaitDelegation(ctx, "id")
			_, errs["Cancel"] = c.Cancel(ctx, "id")
			_, errs["Route"] = c.Route(ctx, routingRequest("budget?"))
			_, errs["Session"] = c.Session(ctx, "id")
			_, errs["ResumeSession"] = c.ResumeSession(ctx, "id")
			_, errs["CloseSession"] = c.CloseSession(ctx, "id")
			errs["Health"] = c.Health(ctx)
			for _, err := range c.Agents(ctx, registry.ListOptions{}) {
				errs["Agents"] = err
			}
			for _, err := range c.Delegations(ctx, delegation.ListFilter{}) {
				errs["Delegations"] = err
			}
			require.Len(t, errs, 19)
			for method, err := range errs {
				assert.ErrorIs(t, err, client.ErrNoServer, method)
			}
			assert.NotEmpty(t, c.String())
		})
	}
}

// TestAgents: register (201 then 200), read, heartbeat and delete an
// agent; the auth token is sent on registration (the agent receives it on
// delegation) and never returned.
func TestAgents(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	ag := syncAgent(t)
	rec := agentRecord("finance", ag.url(), "budget", "cost centers")
	rec.Auth = &registry.Auth{Type: registry.AuthBearer, Token: "agent-secret-1"}
	rec.Labels = map[string]string{"team": "fin"}
	rec.TTLSeconds = 60

	stored, created, err := m.c.Register(ctx, rec)
	require.NoError(t, err)
	assert.True(t, created, "a new agent is 201")
	assert.Equal(t, "finance", stored.Name)
	assert.Equal(t, registry.SourceAPI, stored.Source)
	assert.False(t, stored.RegisteredAt.IsZero())
	require.NotNil(t, stored.Auth)
	assert.Equal(t, registry.AuthBearer, stored.Auth.Type)
	assert.Empty(t, stored.Auth.Token, "the token is write-only")

	rec.Description = "Budgets, revised."
	stored, created, err = m.c.Register(ctx, rec)
	require.NoError(t, err)
	assert.False(t, created, "a replaced agent is 200")
	assert.Equal(t, "Budgets, revised.", stored.Description)

	got, err := m.c.Agent(ctx, "finance")
	require.NoError(t, err)
	assert.Equal(t, "Budgets, revised.", got.Description)
	assert.Equal(t, map[string]string{"team": "fin"}, got.Labels)
	assert.Empty(t, got.Auth.Token)

	// The token reached the registry: the mesh authenticates to the agent with it.
	d, err := m.c.Delegate(ctx, delegation.Request{Target: "finance", Task: "Budget?"})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusCompleted, d.Status)
	require.Len(t, ag.got(), 1)
	assert.Equal(t, "Bearer agent-secret-1", ag.got()[0].Authorization)

	before := got.LastSeen
	time.Sleep(5 * time.Millisecond)
	hb, err := m.c.Heartbeat(ctx, "finance")
	require.NoError(t, err)
	assert.True(t, hb.LastSeen.After(before), "heartbeat refreshes lastSeen")

	require.NoError(t, m.c.Delete(ctx, "finance"))
	_, err = m.c.Agent(ctx, "finance")
	assert.ErrorIs(t, err, registry.ErrNotFound)
	err = m.c.Delete(ctx, "finance")
	assert.ErrorIs(t, err, registry.ErrNotFound)
	_, err = m.c.Heartbeat(ctx, "finance")
	assert.ErrorIs(t, err, registry.ErrNotFound)

	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusNotFound, e.Status)
	assert.Equal(t, "not_found", e.Code)
	assert.Equal(t, "not_found", e.ErrorCode())
	assert.Equal(t, "no agent is registered under this name", e.Error(), "the server's message, without the code")
	assert.NotErrorIs(t, err, delegation.ErrNotFound, "an agent route's not_found is the registry's")
}

// TestAgentErrors: each refusal of a registration matches the registry's
// sentinel, with the server's details.
func TestAgentErrors(t *testing.T) {
	m := newMesh(t, meshConfig{seed: func(s registry.Store) {
		err := s.UpdateAgent(context.Background(), "from-file", func(*registry.Agent) (*registry.Agent, error) {
			now := time.Now().UTC()
			a := agentRecord("from-file", "http://127.0.0.1:9/task")
			a.Source, a.RegisteredAt, a.UpdatedAt, a.LastSeen = registry.SourceFile, now, now, now
			return &a, nil
		})
		require.NoError(t, err)
	}})
	ctx := ctxT(t)

	_, _, err := m.c.Register(ctx, registry.Agent{Name: "bad name!", Description: "x"})
	assert.ErrorIs(t, err, registry.ErrInvalid)
	assert.NotErrorIs(t, err, registry.ErrNotFound)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusBadRequest, e.Status)
	fields, ok := e.Details.(map[string]any)["fields"].([]any)
	require.True(t, ok, "details %#v", e.Details)
	assert.NotEmpty(t, fields)

	_, _, err = m.c.Register(ctx, agentRecord("meta", "http://169.254.169.254/latest"))
	assert.ErrorIs(t, err, registry.ErrEndpointNotAllowed)
	assert.NotErrorIs(t, err, registry.ErrInvalid)

	_, _, err = m.c.Register(ctx, agentRecord("from-file", "http://127.0.0.1:9/task"))
	assert.ErrorIs(t, err, registry.ErrManagedByFile)
	assert.ErrorIs(t, m.c.Delete(ctx, "from-file"), registry.ErrManagedByFile)

	def := agentRecord("helpdesk", "http://127.0.0.1:9/task")
	def.IsDefault = true
	m.register(def)
	def.Name = "second-default"
	_, _, err = m.c.Register(ctx, def)
	assert.ErrorIs(t, err, registry.ErrDefaultConflict)
	assert.NotErrorIs(t, err, delegation.ErrFinal, "conflict on an agent route is the registry's")

	_, err = m.c.Agent(ctx, "no/such agent")
	assert.ErrorIs(t, err, registry.ErrInvalid, "an invalid name in the path")
}

// TestRegisterJSON: the record is sent as written, so the server refuses a
// misspelt key that decoding into registry.Agent would drop.
func TestRegisterJSON(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	a, created, err := m.c.RegisterJSON(ctx, []byte(`{"name": "hr", "description": "People.", "capabilities": ["people"], "endpoint": "http://127.0.0.1:9/task"}`))
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "hr", a.Name)

	_, _, err = m.c.RegisterJSON(ctx, []byte(`{"name": "hr", "description": "People.", "capabilities": ["people"], "Endpoint": "http://127.0.0.1:9/task"}`))
	assert.ErrorIs(t, err, registry.ErrInvalid)
	_, _, err = m.c.RegisterJSON(ctx, []byte(`{"name": "hr", "endpont": "x"}`))
	assert.ErrorIs(t, err, registry.ErrInvalid)
	_, _, err = m.c.RegisterJSON(ctx, []byte(`name: hr`))
	assert.Error(t, err)
	assert.Len(t, m.seen("POST /v1/agents"), 3, "invalid JSON is not sent")
}

// TestListPages: List reads one page and its cursor; Agents walks every
// page, with the label filter kept across pages, and stops when the loop
// does.
func TestListPages(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	for i := range 7 {
		a := agentRecord(fmt.Sprintf("agent-%d", i), "http://127.0.0.1:9/task")
		if i%2 == 0 {
			a.Labels = map[string]string{"tier": "gold", "region": "eu"}
		}
		m.register(a)
	}

	page, err := m.c.List(ctx, registry.ListOptions{Limit: 3})
	require.NoError(t, err)
	require.Len(t, page.Agents, 3)
	assert.Equal(t, "agent-0", page.Agents[0].Name)
	require.NotEmpty(t, page.NextCursor)
	page, err = m.c.List(ctx, registry.ListOptions{Limit: 3, Cursor: page.NextCursor})
	require.NoError(t, err)
	assert.Equal(t, "agent-3", page.Agents[0].Name)

	var names []string
	for a, err := range m.c.Agents(ctx, registry.ListOptions{Limit: 2}) {
		require.NoError(t, err)
		names = append(names, a.Name)
	}
	assert.Equal(t, []string{"agent-0", "agent-1", "agent-2", "agent-3", "agent-4", "agent-5", "agent-6"}, names)
	assert.GreaterOrEqual(t, len(m.seen("GET /v1/agents?")), 4+2, "four pages of two")

	names = nil
	for a, err := range m.c.Agents(ctx, registry.ListOptions{Limit: 1, Labels: map[string]string{"tier": "gold", "region": "eu"}}) {
		require.NoError(t, err)
		names = append(names, a.Name)
	}
	assert.Equal(t, []string{"agent-0", "agent-2", "agent-4", "agent-6"}, names)

	n, before := 0, len(m.seen("GET /v1/agents?"))
	for range m.c.Agents(ctx, registry.ListOptions{Limit: 2}) {
		if n++; n == 3 {
			break
		}
	}
	assert.Equal(t, 3, n, "breaking out of the loop stops the walk")
	assert.Len(t, m.seen("GET /v1/agents?"), before+2, "a page is read when the loop asks for its first agent")

	page, err = m.c.List(ctx, registry.ListOptions{Labels: map[string]string{"tier": "none"}})
	require.NoError(t, err)
	assert.NotNil(t, page.Agents)
	assert.Empty(t, page.Agents)

	_, err = m.c.List(ctx, registry.ListOptions{Cursor: "not-a-cursor!"})
	assert.ErrorIs(t, err, registry.ErrInvalid)
	for _, err := range m.c.Agents(ctx, registry.ListOptions{Cursor: "not-a-cursor!"}) {
		assert.ErrorIs(t, err, registry.ErrInvalid, "a failure is yielded")
	}
}

// TestImportCard: an A2A agent is registered from its card; a card that
// cannot be fetched is card_fetch_failed (HTTP 502), which is the answer
// and not retried.
func TestImportCard(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	var missing atomic.Int32
	card := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/card.json" {
			missing.Add(1)
			http.NotFound(w, r)
			return
		}
		c := a2acard.MeshCard("http://"+r.Host, "1.0.0")
		c.Name = "Remote Planner"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	}))
	t.Cleanup(card.Close)

	a, created, err := m.c.ImportCard(ctx, card.URL+"/card.json")
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "remote-planner", a.Name)
	assert.Equal(t, registry.ProtocolA2A, a.Protocol)
	_, created, err = m.c.ImportCard(ctx, card.URL+"/card.json")
	require.NoError(t, err)
	assert.False(t, created, "a second import replaces the agent")

	_, _, err = m.c.ImportCard(ctx, card.URL+"/missing")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusBadGateway, e.Status)
	assert.Equal(t, "card_fetch_failed", e.Code)
	assert.Equal(t, int32(1), missing.Load(), "the server's own 502 is not retried")

	_, _, err = m.c.ImportCard(ctx, "ftp://example.com/card.json")
	assert.ErrorIs(t, err, registry.ErrInvalid)
	_, _, err = m.c.ImportCard(ctx, "http://169.254.169.254/card.json")
	assert.ErrorIs(t, err, registry.ErrEndpointNotAllowed)

	_, _, err = m.client(readToken, nil).ImportCard(ctx, card.URL+"/card.json")
	assert.ErrorIs(t, err, client.ErrPermissionDenied)
}

// TestHealth: the liveness route answers without a token.
func TestHealth(t *testing.T) {
	m := newMesh(t, meshConfig{})
	require.NoError(t, m.c.Health(ctxT(t)))
	require.NoError(t, m.client("", nil).Health(ctxT(t)))
	m.ts.Close()
	err := m.c.Health(ctxT(t))
	assert.ErrorIs(t, err, client.ErrUnreachable)
	assert.False(t, errors.Is(err, context.Canceled))
}
