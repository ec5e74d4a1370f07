// Command quickstart is the agentmesh tour, and the README's first command:
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -v   # also print the mesh's logs on stderr
//
// It starts four small agents on loopback — finance answers a task at once
// (HTTP 200), reports accepts it (HTTP 202) and posts the result to the
// mesh's callback URL later, helpdesk is an MCP server built with the go-sdk,
// and inventory always fails (HTTP 500) — then the mesh's HTTP server on
// the core agentmesh.Open builds as it does for `agentmesh serve` (bbolt
// store in a temporary directory, a generated token, MCP tools at /mcp,
// private endpoints allowed). It then uses the mesh as any client would,
// over HTTP with the bearer token: it registers the agents, discovers them,
// delegates to each, has two delegations refused (depth and cycle), opens
// the circuit breaker of the failing agent, lists the delegation records
// and calls a tool over MCP. Last, it loads the agent directory
// examples/agents (three YAML agents, one default) as `serve --agents`
// does, starts those agents on loopback, and holds a short conversation
// through POST /v1/request: a message routed by classification, a
// follow-up that stays in its session, a clarification question and its
// answer, and a message that falls back to the default agent.
//
// It prints what it does and what the mesh answered. Anything unexpected
// makes it exit with status 1, so CI runs it as a test.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

func main() {
	verbose := flag.Bool("v", false, "print the mesh's logs on stderr")
	flag.Parse()
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout, logger)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nquickstart FAILED: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole tour. It returns an error when the mesh does anything
// other than what the transcript says it should.
func run(ctx context.Context, out io.Writer, logger *slog.Logger) (err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	t := &transcript{w: out}
	fmt.Fprintln(out, "agentmesh quickstart: a mesh, four agents, and a client talking to the mesh over HTTP and MCP")

	t.step("Start four agents on loopback")
	ag, err := startAgents()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ag.close()) }() // after the mesh: it closes its MCP session with helpdesk
	t.say("finance    http  %s/task  answers at once (200), wants a bearer token", ag.finance.url)
	t.say("reports    http  %s/task  accepts (202), posts its result to the callbackUrl later", ag.reports.url)
	t.say("helpdesk   mcp   %s/mcp   go-sdk MCP server with a handle_message tool", ag.helpdesk.url)
	t.say("inventory  http  %s/task  always fails (500), for the circuit breaker", ag.inventory.url)

	t.step("Start the mesh (httpserver + mcpserver at /mcp, wired like `agentmesh serve`)")
	dir, err := os.MkdirTemp("", "agentmesh-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m, err := startMesh(ctx, filepath.Join(dir, "mesh.db"), logger)
	if err != nil {
		return fmt.Errorf("start the mesh: %w", err)
	}
	defer func() { err = errors.Join(err, m.close()) }()
	t.say("listening  %s   (REST API under /v1, MCP Streamable HTTP at /mcp)", m.url)
	t.say("store      %s", filepath.Join(dir, "mesh.db"))
	t.say("token      generated for this run; every /v1 call sends Authorization: Bearer <token>")

	if err := (&apiClient{base: m.url}).call(ctx, "GET", "/v1/agents", nil, http.StatusUnauthorized, nil); err != nil {
		return err
	}
	t.say("GET /v1/agents without the token → 401 unauthenticated")

	tr := &tour{t: t, api: &apiClient{base: m.url, token: m.token}, ag: ag, m: m}
	for _, step := range []func(context.Context) error{
		tr.register, tr.discover, tr.delegate, tr.refuse, tr.openBreaker, tr.records, tr.useMCP, tr.route,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}

	t.step("Shut down")
	t.say("all checks passed in %v; stopping the mesh, then the agents", time.Since(start).Round(time.Millisecond))
	return nil
}

// tour is the client side of the quickstart: each method is one step of
// the transcript, and fails when the mesh answers anything unexpected.
type tour struct {
	t   *transcript
	api *apiClient
	ag  *agents
	m   *mesh
}

// register registers the three agents through the HTTP API, as their operators would.
func (tr *tour) register(ctx context.Context) error {
	tr.t.step("Register the agents: POST /v1/agents")
	for _, a := range []map[string]any{
		{
			"name": "finance", "displayName": "Finance",
			"description":  "Department budgets, cost centers and year-to-date spending.",
			"capabilities": []string{"budget", "cost-center", "spending"},
			"examples":     []string{"What is the Engineering budget?"},
			"endpoint":     tr.ag.finance.url + "/task",
			"auth":         map[string]any{"type": "bearer", "token": financeToken},
		},
		{
			"name": "reports", "displayName": "Reports",
			"description":  "Writes quarterly and monthly business reports from the ledgers.",
			"capabilities": []string{"report", "quarterly-report"},
			"endpoint":     tr.ag.reports.url + "/task",
		},
		{
			"name": "helpdesk", "displayName": "IT Helpdesk",
			"description":  "Resets passwords for Okta and Active Directory accounts and unlocks them.",
			"capabilities": []string{"password-reset", "account-unlock", "okta"},
			"protocol":     "mcp",
			"endpoint":     tr.ag.helpdesk.url + "/mcp",
		},
	} {
		var got registry.Agent
		if err := tr.api.call(ctx, "POST", "/v1/agents", a, http.StatusCreated, &got); err != nil {
			return err
		}
		note := ""
		if got.Auth != nil {
			if got.Auth.Token != "" {
				return fmt.Errorf("POST /v1/agents returned the auth token of %s: tokens are write-only", got.Name)
			}
			note = "  auth " + got.Auth.Type + " (token write-only: not in the reply)"
		}
		tr.t.say("201 %-9s %-14s protocol %-4s source %s%s", got.Name, "("+got.DisplayName+")", got.Protocol, got.Source, note)
	}
	return nil
}

// discover ranks the agents for a few queries.
func (tr *tour) discover(ctx context.Context) error {
	tr.t.step("Discover: GET /v1/discover?query=…")
	for _, q := range []struct{ query, want string }{
		{"what is the engineering budget", "finance"},
		{"reset my okta password", "helpdesk"},
		{"quarterly spending report", "reports"},
	} {
		var results []discovery.Result
		if err := tr.api.call(ctx, "GET", "/v1/discover?limit=3&query="+url.QueryEscape(q.query), nil, http.StatusOK, &results); err != nil {
			return err
		}
		if len(results) == 0 || results[0].Agent.Name != q.want {
			return fmt.Errorf("discover %q: want %s first, got %v", q.query, q.want, names(results))
		}
		tr.t.say("%q → 200, %d ranked", q.query, len(results))
		for i, r := range results {
			tr.t.say("  %d. %-9s score %.2f  coverage %.2f  matched %s", i+1, r.Agent.Name, r.Score, r.Coverage, strings.Join(r.MatchedTerms, ","))
		}
	}
	return nil
}

// delegate sends a task to each agent: sync HTTP, by query, async HTTP with a callback, and MCP.
func (tr *tour) delegate(ctx context.Context) error {
	tr.t.step("Delegate: POST /v1/delegate")
	d, err := tr.api.delegate(ctx, map[string]any{
		"targetName": "finance", "task": "Budget and cost center of Engineering?", "sourceAgent": "hr-assistant",
	})
	if err != nil {
		return err
	}
	if err := expectStatus(d, delegation.StatusCompleted); err != nil {
		return err
	}
	tr.t.say("finance  (sync http)  200 %s in %d ms: %s", d.Status, d.LatencyMs, d.Result)
	seen := tr.ag.lastFinanceTask()
	if seen.id != d.ID {
		return fmt.Errorf("finance got X-Mesh-Delegation-Id %q, want the record id %q", seen.id, d.ID)
	}
	tr.t.say("         the agent got X-Mesh-Delegation-Id %s… and context %s", d.ID[:8], seen.context)

	d, err = tr.api.delegate(ctx, map[string]any{"query": "engineering budget", "task": "Engineering budget for Q4?"})
	if err != nil {
		return err
	}
	if err := expectStatus(d, delegation.StatusCompleted); err != nil {
		return err
	}
	tr.t.say("by query \"engineering budget\" → the mesh picked %s: %s", d.TargetAgent, d.Status)

	d, err = tr.api.delegate(ctx, map[string]any{"targetName": "reports", "task": "Write the Q3 report", "async": true})
	if err != nil {
		return err
	}
	if err := expectStatus(d, delegation.StatusAccepted); err != nil {
		return err
	}
	tr.t.say("reports  (async http) 200 %s, id %s…", d.Status, d.ID[:8])
	var rec delegation.Record
	if err := tr.api.call(ctx, "GET", "/v1/delegations/"+d.ID+"?wait=10s", nil, http.StatusOK, &rec); err != nil {
		return err
	}
	if rec.Status != delegation.StatusCompleted {
		return fmt.Errorf("reports: delegation %s is %s after waiting 10 s, want completed (did the callback fail?)", rec.ID, rec.Status)
	}
	tr.t.say("         GET /v1/delegations/%s…?wait=10s → %s after the callback: %s", rec.ID[:8], rec.Status, rec.Result)

	d, err = tr.api.delegate(ctx, map[string]any{"targetName": "helpdesk", "task": "Reset the Okta password of ada@example.com"})
	if err != nil {
		return err
	}
	if err := expectStatus(d, delegation.StatusCompleted); err != nil {
		return err
	}
	if d.Response == nil || !d.Response.WorkflowComplete {
		return fmt.Errorf("helpdesk: want the whole AgentResponse with workflow_complete, got %+v", d.Response)
	}
	tr.t.say("helpdesk (mcp)        200 %s in %d ms: %s (workflow_complete %v)", d.Status, d.LatencyMs, d.Result, d.Response.WorkflowComplete)
	return nil
}

// refuse shows the delegation limits: both requests are refused before anything is sent.
func (tr *tour) refuse(ctx context.Context) error {
	tr.t.step("Refused before anything is sent")
	callsBefore := tr.ag.financeCalls.Load()
	for _, r := range []struct {
		what string
		body map[string]any
		code string
	}{
		{"context.depth 5 (the limit)", map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"depth": 5}}, delegation.CodeDepthExceeded},
		{"finance already on context.chain", map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"chain": []string{"finance", "reports"}}}, delegation.CodeDelegationCycle},
	} {
		var e httpserver.ErrorResponse
		if err := tr.api.call(ctx, "POST", "/v1/delegate", r.body, http.StatusUnprocessableEntity, &e); err != nil {
			return err
		}
		if e.Code != r.code {
			return fmt.Errorf("%s: want code %s, got %s (%s)", r.what, r.code, e.Code, e.Error)
		}
		tr.t.say("%-33s → 422 %s: %s", r.what, e.Code, e.Error)
	}
	if n := tr.ag.financeCalls.Load(); n != callsBefore {
		return fmt.Errorf("refused delegations reached finance (%d calls, want %d)", n, callsBefore)
	}
	return nil
}

// openBreaker registers the failing agent and delegates to it until its circuit breaker opens.
func (tr *tour) openBreaker(ctx context.Context) error {
	tr.t.step("Circuit breaker: inventory fails every time")
	if err := tr.api.call(ctx, "POST", "/v1/agents", map[string]any{
		"name":         "inventory",
		"description":  "Stock levels of the warehouse.",
		"capabilities": []string{"stock", "inventory"},
		"endpoint":     tr.ag.inventory.url + "/task",
	}, http.StatusCreated, nil); err != nil {
		return err
	}
	tr.t.say("201 inventory registered")
	for i := 1; i <= 6; i++ {
		d, err := tr.api.delegate(ctx, map[string]any{"targetName": "inventory", "task": "Stock level of SKU 42?"})
		if err != nil {
			return err
		}
		wantCode := delegation.CodeAgentError
		if i == 6 {
			wantCode = delegation.CodeAgentUnavailable
		}
		if d.Status != delegation.StatusFailed || d.Code != wantCode {
			return fmt.Errorf("delegation %d to inventory: want failed %s, got %s %s (%s)", i, wantCode, d.Status, d.Code, d.Error)
		}
		tr.t.say("#%d failed %-17s %s  (agent called %d×)", i, d.Code, strings.TrimSpace(d.Error), tr.ag.inventoryCalls.Load())
	}
	if n := tr.ag.inventoryCalls.Load(); n != 5 {
		return fmt.Errorf("inventory was called %d times, want 5: the open breaker must not call it", n)
	}
	var health httpserver.DeepHealth
	if err := tr.api.call(ctx, "GET", "/health/deep", nil, http.StatusOK, &health); err != nil {
		return err
	}
	snap := health.Breakers["inventory"]
	if snap.State != breaker.StateOpen {
		return fmt.Errorf("GET /health/deep: breaker of inventory is %s, want open", snap.State)
	}
	tr.t.say("GET /health/deep → breaker inventory %s until %s", snap.State, snap.OpenUntil.Format(time.TimeOnly))
	var hidden, shown []discovery.Result
	if err := tr.api.call(ctx, "GET", "/v1/discover?query=stock+levels", nil, http.StatusOK, &hidden); err != nil {
		return err
	}
	if err := tr.api.call(ctx, "GET", "/v1/discover?includeUnavailable=true&query=stock+levels", nil, http.StatusOK, &shown); err != nil {
		return err
	}
	if len(hidden) != 0 || !slices.Contains(names(shown), "inventory") {
		return fmt.Errorf("discover \"stock levels\": want inventory only with includeUnavailable, got %v and %v", names(hidden), names(shown))
	}
	tr.t.say("GET /v1/discover?query=stock+levels → %d results; with includeUnavailable=true → %v", len(hidden), names(shown))
	return nil
}

// records lists the delegation records.
func (tr *tour) records(ctx context.Context) error {
	tr.t.step("Delegation records: GET /v1/delegations (newest first)")
	// Final records of synchronous delegations are group-committed within
	// milliseconds of the reply; the list reads the store, so it may lag
	// the last reply by that much.
	var recs []delegation.Record
	for deadline := time.Now().Add(2 * time.Second); ; {
		if err := tr.api.call(ctx, "GET", "/v1/delegations?limit=50", nil, http.StatusOK, &recs); err != nil {
			return err
		}
		if (len(recs) >= 10 && allFinal(recs)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(recs) != 10 || !allFinal(recs) {
		return fmt.Errorf("GET /v1/delegations: want the 10 delegations that ran, all final, got %d", len(recs))
	}
	for _, r := range recs {
		tr.t.say("%s…  %-9s %-9s %-17s %3d ms  attempts %d", r.ID[:8], r.TargetAgent, r.Status, r.Code, r.LatencyMs, r.Attempts)
	}
	tr.t.say("(the refused delegations left no record)")
	return nil
}

// useMCP connects to the mesh's /mcp endpoint as an MCP client (an IDE,
// an LLM host) would, lists the tools and delegates a task with
// mesh_delegate.
func (tr *tour) useMCP(ctx context.Context) error {
	tr.t.step("The MCP front-end: a go-sdk client at " + tr.m.url + "/mcp")
	client := mcp.NewClient(&mcp.Implementation{Name: "quickstart", Version: "v1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             tr.m.url + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer(tr.m.token)},
		DisableStandaloneSSE: true, // the mesh's endpoint is stateless: request/response only
	}, nil)
	if err != nil {
		return fmt.Errorf("MCP connect: %w", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("MCP tools/list: %w", err)
	}
	var toolNames []string
	for _, tool := range tools.Tools {
		toolNames = append(toolNames, tool.Name)
	}
	tr.t.say("tools/list → %s", strings.Join(toolNames, ", "))

	args := map[string]any{"targetName": "helpdesk", "task": "Unlock the AD account of grace@example.com"}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: args})
	if err != nil {
		return fmt.Errorf("MCP tools/call %s: %w", mcpserver.ToolDelegate, err)
	}
	if res.IsError {
		return fmt.Errorf("%s: error result: %s", mcpserver.ToolDelegate, toolText(res))
	}
	var got mcpserver.DelegateResult
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &got)
	}
	if err != nil || got.Status != string(delegation.StatusCompleted) {
		return fmt.Errorf("%s: want a completed delegation, got %s (%v)", mcpserver.ToolDelegate, toolText(res), err)
	}
	tr.t.say("tools/call %s {targetName: helpdesk, …} → %s: %s", mcpserver.ToolDelegate, got.Status, got.Result)
	return nil
}

// route loads the agent directory examples/agents into the registry as
// `agentmesh serve --agents examples/agents` does, starts its three agents
// on loopback, and holds a short conversation through POST /v1/request.
func (tr *tour) route(ctx context.Context) (err error) {
	tr.t.step("Routing: load examples/agents, start its agents, POST /v1/request")
	ra, err := startRoutedAgents()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ra.close()) }()
	dir, err := agentsDir()
	if err != nil {
		return err
	}
	// The YAML files take their endpoints from ${…_ENDPOINT:-…}: point
	// them at the agents just started.
	envs := map[string]string{
		"BILLING_AGENT_ENDPOINT":        ra.srv["billing"].url + "/task",
		"GENERAL_AGENT_ENDPOINT":        ra.srv["general-assistant"].url + "/task",
		"PASSWORD_RESET_AGENT_ENDPOINT": ra.srv["password-reset"].url + "/task",
	}
	loaded, err := registry.LoadDir(dir, &registry.DirOptions{
		Policy:         tr.m.Policy(),
		RequireDefault: true,
		LookupEnv:      func(k string) (string, bool) { v, ok := envs[k]; return v, ok },
	})
	if err != nil {
		return fmt.Errorf("load %s: %w", dir, err)
	}
	if _, err := tr.m.Registry().ReplaceFileAgents(ctx, loaded); err != nil {
		return fmt.Errorf("register the file agents: %w", err)
	}
	// The classifier retrains in the background; wait for it so the new
	// agents are routable at once.
	if err := tr.m.Lexical().Sync(ctx); err != nil {
		return fmt.Errorf("train the classifier: %w", err)
	}
	for _, a := range loaded {
		note := ""
		if a.IsDefault {
			note = "  default"
		}
		if a.ClarificationRequired {
			note = "  clarification_required"
		}
		var got registry.Agent
		if err := tr.api.call(ctx, "GET", "/v1/agents/"+a.Name, nil, http.StatusOK, &got); err != nil {
			return err
		}
		if got.Source != registry.SourceFile {
			return fmt.Errorf("GET /v1/agents/%s: source %s, want %s", a.Name, got.Source, registry.SourceFile)
		}
		tr.t.say("%-17s source %s  threshold %.2f%s", got.Name, got.Source, got.Threshold(), note)
	}

	say := func(user, input string) (routing.Response, error) {
		var r routing.Response
		err := tr.api.call(ctx, "POST", "/v1/request", routing.Request{UserID: user, Input: input}, http.StatusOK, &r)
		if err != nil {
			return r, err
		}
		fmt.Fprintln(tr.t.w)
		tr.t.say("%s: %q", user, input)
		if r.Decision == routing.ActionClarify {
			tr.t.say("  → decision clarify, reason %s, confidence %.2f, suggested_agent %s, session %s…", r.Reason, r.Confidence, r.SuggestedAgent, short(r.SessionID))
			tr.t.say("    clarification_question: %s", r.ClarificationQuestion)
		} else {
			tr.t.say("  → decision %s, agent_id %s, reason %s, confidence %.2f, session %s…", r.Decision, r.AgentID, r.Reason, r.Confidence, short(r.SessionID))
			tr.t.say("    response: %s (workflow_complete %v)", r.Response, r.WorkflowComplete)
		}
		return r, nil
	}
	expect := func(r routing.Response, decision routing.Action, reason routing.Reason, agent string) error {
		if r.Decision != decision || r.Reason != reason || r.AgentID != agent {
			return fmt.Errorf("POST /v1/request: want %s %q (%s), got %s %q (%s: %s)", decision, agent, reason, r.Decision, r.AgentID, r.Reason, r.Routing.Reason)
		}
		return nil
	}

	// (a) Routed by classification; billing asks a question back, so the
	// workflow — and the session — stays open.
	r1, err := say("alice", "I was charged twice this month, I need a refund")
	if err != nil {
		return err
	}
	if err := expect(r1, routing.ActionRoute, routing.ReasonConfidence, "billing"); err != nil {
		return err
	}
	if r1.SessionID == "" || r1.WorkflowComplete {
		return fmt.Errorf("billing's first reply: want an open session and workflow_complete false, got session %q, %v", r1.SessionID, r1.WorkflowComplete)
	}
	// (b) The follow-up skips classification: alice's session is with
	// billing. Billing completes the workflow, which closes the session.
	r2, err := say("alice", "yes please")
	if err != nil {
		return err
	}
	if err := expect(r2, routing.ActionRoute, routing.ReasonSession, "billing"); err != nil {
		return err
	}
	if r2.SessionID != r1.SessionID || !r2.WorkflowComplete {
		return fmt.Errorf("follow-up: want session %s and workflow_complete true, got %s, %v", r1.SessionID, r2.SessionID, r2.WorkflowComplete)
	}
	var sess session.Session
	if err := tr.api.call(ctx, "GET", "/v1/sessions/"+r1.SessionID, nil, http.StatusOK, &sess); err != nil {
		return err
	}
	if sess.Status != session.StatusCompleted || len(sess.TurnHistory) != 4 {
		return fmt.Errorf("GET /v1/sessions/%s: want completed with 4 turns, got %s with %d", r1.SessionID, sess.Status, len(sess.TurnHistory))
	}
	tr.t.say("GET /v1/sessions/%s… → %s, %d turns, agent %s", short(sess.ID), sess.Status, len(sess.TurnHistory), sess.ActiveAgent)

	// (c) A vague message from another user: password-reset is the best
	// guess but below its threshold, and it requires clarification.
	r3, err := say("bob", "login problem")
	if err != nil {
		return err
	}
	if err := expect(r3, routing.ActionClarify, r3.Reason, ""); err != nil {
		return err
	}
	if r3.SuggestedAgent != "password-reset" || r3.ClarificationQuestion == "" || ra.calls["password-reset"].Load() != 0 {
		return fmt.Errorf("want a clarification question about password-reset before any dispatch, got %q about %q", r3.ClarificationQuestion, r3.SuggestedAgent)
	}
	// The answer is classified together with the first message.
	r4, err := say("bob", "my okta password, I forgot it")
	if err != nil {
		return err
	}
	if err := expect(r4, routing.ActionRoute, routing.ReasonConfidence, "password-reset"); err != nil {
		return err
	}
	if r4.SessionID != r3.SessionID {
		return fmt.Errorf("the answer went to session %s, want the clarification's %s", r4.SessionID, r3.SessionID)
	}

	// (d) Nothing fits well: the default agent answers.
	r5, err := say("carol", "question about a payment")
	if err != nil {
		return err
	}
	if err := expect(r5, routing.ActionFallback, routing.ReasonLowConfidence, "general-assistant"); err != nil {
		return err
	}
	for name, want := range map[string]int32{"billing": 2, "password-reset": 1, "general-assistant": 1} {
		if n := ra.calls[name].Load(); n != want {
			return fmt.Errorf("agent %s was called %d times, want %d", name, n, want)
		}
	}
	return nil
}

// agentsDir finds examples/agents from the module root or from this
// example's directory (where `go test` runs).
func agentsDir() (string, error) {
	for _, d := range []string{filepath.Join("examples", "agents"), filepath.Join("..", "agents")} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
	}
	return "", errors.New("examples/agents not found: run the quickstart from the module root")
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// ---- the mesh ----

// mesh is the library as agentmesh.Open wires it for `agentmesh serve`
// (one bbolt store, the registry, the discovery index following it, the
// circuit breakers, the delegation client and routing), and the HTTP API
// with the MCP tools at /mcp.
type mesh struct {
	*agentmesh.Mesh
	url, token string
	srv        *server
}

func startMesh(ctx context.Context, dbPath string, logger *slog.Logger) (m *mesh, err error) {
	// The agents live on loopback, which `agentmesh serve` refuses unless
	// --allow-private-endpoints is given.
	policy, err := netguard.NewPolicy(netguard.Options{AllowPrivate: true})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m = &mesh{url: "http://" + ln.Addr().String(), token: httpserver.GenerateToken()}
	defer func() {
		if err != nil {
			ln.Close()
			m.close()
		}
	}()
	m.Mesh, err = agentmesh.Open(ctx, &agentmesh.Options{
		Path:      dbPath,
		Policy:    policy,
		PublicURL: m.url, // agents post async results to <url>/v1/delegations/<id>/result
		Logger:    logger,
		// Routing: sessions in the same store, the lexical
		// classifier following the registry (it retrains in the background
		// on every change), and the router dispatching through the
		// delegation client.
		Routing: &agentmesh.RoutingOptions{},
	})
	if err != nil {
		return nil, err
	}
	api, err := httpserver.New(m.Registry(), m.Engine(), m.Delegation(), &httpserver.Options{
		Token:     m.token,
		PublicURL: m.url,
		Logger:    logger,
		StorePing: httpserver.PingStore(m.Store()),
		Breakers:  m.Breakers(),
		Router:    m.Router(),
		Sessions:  m.Sessions(),
	})
	if err != nil {
		return nil, err
	}
	tools, err := mcpserver.New(m.Registry(), m.Engine(), m.Delegation(), &mcpserver.Options{
		Logger: logger,
		Router: m.Router(), // adds mesh_route and handle_message
		// Over HTTP, each tool call needs the token scope of its tool.
		Authorize: func(ctx context.Context, req *mcp.CallToolRequest) error {
			id, ok := httpserver.IdentityFrom(ctx)
			if !ok {
				return errors.New("no authenticated caller")
			}
			if scope := httpserver.Scope(mcpserver.RequiredScope(req.Params.Name)); scope != "" && !id.Has(scope) {
				return fmt.Errorf("token %q lacks the %s scope", id.Name, scope)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	mcpHandler, err := mcpserver.HTTPHandler(tools, &mcpserver.HTTPOptions{Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := api.Handle("/mcp", mcpHandler, ""); err != nil {
		return nil, err
	}
	m.srv = serve(ln, api)
	return m, nil
}

// shutdownGrace bounds each shutdown step, as `agentmesh serve`'s
// --shutdown-timeout does; generous so a busy CI machine does not turn a
// slow but orderly shutdown into a failure.
const shutdownGrace = 15 * time.Second

// close stops the mesh as `agentmesh serve` does on SIGTERM: stop serving,
// let delegations in flight finish, then close the registry and the store.
func (m *mesh) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var errs []error
	if m.srv != nil {
		errs = append(errs, m.srv.shutdown(ctx))
	}
	if m.Mesh != nil {
		errs = append(errs, m.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// bearer is an http.RoundTripper that adds the mesh token to each request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// ---- the HTTP API, as a client sees it ----

// apiClient calls the mesh's REST API with plain net/http, as any user's
// program would.
type apiClient struct {
	base, token string
}

// call sends method path with body (encoded as JSON unless nil) and decodes
// the JSON reply into out (unless nil). A reply whose status is not want is
// an error that quotes the mesh's error code and message.
func (c *apiClient) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the reply: %w", method, path, err)
	}
	if resp.StatusCode != want {
		var e httpserver.ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Code != "" {
			return fmt.Errorf("%s %s: got %d %s (%s), want %d", method, path, resp.StatusCode, e.Code, e.Error, want)
		}
		return fmt.Errorf("%s %s: got %s, want %d: %.300s", method, path, resp.Status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding the reply: %w", method, path, err)
		}
	}
	return nil
}

// delegate posts body to /v1/delegate, which answers 200 for every
// delegation that ran, completed or not.
func (c *apiClient) delegate(ctx context.Context, body map[string]any) (httpserver.DelegateResponse, error) {
	var d httpserver.DelegateResponse
	err := c.call(ctx, "POST", "/v1/delegate", body, http.StatusOK, &d)
	return d, err
}

func expectStatus(d httpserver.DelegateResponse, want delegation.Status) error {
	if d.Status != want {
		return fmt.Errorf("delegation %s to %s: want %s, got %s %s (%s)", d.ID, d.TargetAgent, want, d.Status, d.Code, d.Error)
	}
	return nil
}

func allFinal(recs []delegation.Record) bool {
	for _, r := range recs {
		if !r.Status.Final() {
			return false
		}
	}
	return true
}

func names(results []discovery.Result) []string {
	out := []string{}
	for _, r := range results {
		out = append(out, r.Agent.Name)
	}
	return out
}

// ---- the agents ----

// financeToken is the secret finance expects; the mesh sends it as the
// agent's auth, and never shows it back.
const financeToken = "finance-secret"

type agents struct {
	finance, reports, helpdesk, inventory *server

	financeCalls, inventoryCalls atomic.Int32
	callbacks                    sync.WaitGroup // the reports agent's pending callbacks

	mu          sync.Mutex
	financeSeen financeTask
}

// financeTask is what finance saw of its last task.
type financeTask struct {
	id      string // X-Mesh-Delegation-Id
	context string // the context, as JSON
}

func startAgents() (*agents, error) {
	a := &agents{}
	var err error
	start := func(h http.Handler) *server {
		if err != nil {
			return nil
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil
		}
		return serve(ln, h)
	}
	a.finance = start(http.HandlerFunc(a.serveFinance))
	a.reports = start(http.HandlerFunc(a.serveReports))
	a.helpdesk = start(helpdeskHandler())
	a.inventory = start(http.HandlerFunc(a.serveInventory))
	if err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// close waits for the pending callbacks, then stops the agents.
func (a *agents) close() error {
	a.callbacks.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var errs []error
	for _, s := range []*server{a.finance, a.reports, a.helpdesk, a.inventory} {
		if s != nil {
			errs = append(errs, s.shutdown(ctx))
		}
	}
	return errors.Join(errs...)
}

func (a *agents) lastFinanceTask() financeTask {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.financeSeen
}

// taskRequest is the body of the mesh's POST /task
// (docs/AGENTS.md#the-request).
type taskRequest struct {
	DelegationID string         `json:"delegationId"`
	Task         string         `json:"task"`
	Context      map[string]any `json:"context"`
	CallbackURL  string         `json:"callbackUrl"`
}

// serveFinance answers at once with HTTP 200 and {"result": …}.
func (a *agents) serveFinance(w http.ResponseWriter, r *http.Request) {
	a.financeCalls.Add(1)
	if r.Header.Get("Authorization") != "Bearer "+financeToken {
		http.Error(w, "who are you?", http.StatusUnauthorized)
		return
	}
	var task taskRequest
	if err := json.NewDecoder(r.Body).Decode(&task); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctxJSON, _ := json.Marshal(task.Context)
	a.mu.Lock()
	a.financeSeen = financeTask{id: r.Header.Get("X-Mesh-Delegation-Id"), context: string(ctxJSON)}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"result": map[string]any{"department": "Engineering", "budget": 1200000, "costCenter": "ENG-42"},
	})
}

// serveReports accepts the task with HTTP 202 and posts
// {"status":"completed","result":…} to its callbackUrl a moment later.
func (a *agents) serveReports(w http.ResponseWriter, r *http.Request) {
	var task taskRequest
	if err := json.NewDecoder(r.Body).Decode(&task); err != nil || task.CallbackURL == "" {
		http.Error(w, "want a task with a callbackUrl (delegate with async: true)", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	a.callbacks.Go(func() {
		time.Sleep(100 * time.Millisecond) // the work
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		body, _ := json.Marshal(map[string]any{"status": "completed", "result": "Q3 report: revenue up 12%, 14 pages"})
		req, _ := http.NewRequestWithContext(ctx, "POST", task.CallbackURL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Printf("reports agent: callback: %v", err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			log.Printf("reports agent: callback answered %s", resp.Status)
		}
	})
}

// serveInventory always fails.
func (a *agents) serveInventory(w http.ResponseWriter, r *http.Request) {
	a.inventoryCalls.Add(1)
	http.Error(w, "database unavailable", http.StatusInternalServerError)
}

// routedAgents are the three agents of examples/agents, as HTTP agents
// that answer {"result": {"content": …, "workflow_complete": …}}.
type routedAgents struct {
	srv   map[string]*server
	calls map[string]*atomic.Int32
}

func startRoutedAgents() (*routedAgents, error) {
	ra := &routedAgents{srv: map[string]*server{}, calls: map[string]*atomic.Int32{}}
	for _, name := range []string{"billing", "general-assistant", "password-reset"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ra.close()
			return nil, err
		}
		calls := &atomic.Int32{}
		ra.calls[name] = calls
		ra.srv[name] = serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			var task taskRequest
			if err := json.NewDecoder(r.Body).Decode(&task); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			content, done := routedReply(name, task.Task)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"result": map[string]any{"content": content, "workflow_complete": done},
			})
		}))
	}
	return ra, nil
}

// routedReply is what agent name answers to task, and whether that
// completes the workflow.
func routedReply(name, task string) (string, bool) {
	switch name {
	case "billing":
		if strings.Contains(strings.ToLower(task), "yes") {
			return "Refunded the duplicate charge of $49; it shows in 3-5 days.", true
		}
		return "I see two charges of $49 on 3 March. Shall I refund one?", false
	case "password-reset":
		return "Sent an Okta reset link to your phone.", true
	default:
		return "I'm the general assistant; I've passed your question to the right team.", true
	}
}

func (ra *routedAgents) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var errs []error
	for _, s := range ra.srv {
		errs = append(errs, s.shutdown(ctx))
	}
	return errors.Join(errs...)
}

// handleMessageArgs are the arguments the mesh passes to an MCP agent's
// handle_message tool (docs/AGENTS.md#mcp-agents).
type handleMessageArgs struct {
	SessionID        string           `json:"session_id,omitempty"`
	RequestID        string           `json:"request_id,omitempty"`
	EmployeeID       string           `json:"employee_id,omitempty"`
	DisplayName      string           `json:"display_name,omitempty"`
	RawInput         string           `json:"raw_input"`
	IntentSummary    string           `json:"intent_summary,omitempty"`
	Entities         map[string]any   `json:"entities,omitempty"`
	DetectedLanguage string           `json:"detected_language,omitempty"`
	TurnHistory      []map[string]any `json:"turn_history,omitempty"`
	WorkflowState    map[string]any   `json:"workflow_state,omitempty"`
	Metadata         map[string]any   `json:"metadata,omitempty"`
}

// helpdeskHandler is an MCP agent: a go-sdk server whose handle_message
// tool returns an AgentResponse, served over Streamable HTTP.
func helpdeskHandler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "helpdesk", Version: "v1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "handle_message",
		Description: "Handles one IT helpdesk request.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, in handleMessageArgs) (*mcp.CallToolResult, delegation.AgentResponse, error) {
		verb := "Done"
		switch task := strings.ToLower(in.RawInput); {
		case strings.Contains(task, "reset"):
			verb = "Password reset; a temporary password was sent by SMS"
		case strings.Contains(task, "unlock"):
			verb = "Account unlocked"
		}
		return nil, delegation.AgentResponse{Content: verb + " (ticket IT-1042)", WorkflowComplete: true}, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	return mux
}

// ---- plumbing ----

// server is an http.Server running on its own goroutine.
type server struct {
	url  string
	hs   *http.Server
	done chan error
}

func serve(ln net.Listener, h http.Handler) *server {
	s := &server{
		url:  "http://" + ln.Addr().String(),
		hs:   &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.hs.Serve(ln) }()
	return s
}

// shutdown stops accepting, lets requests in flight finish until ctx is
// done, then closes the connections.
func (s *server) shutdown(ctx context.Context) error {
	err := s.hs.Shutdown(ctx)
	if err != nil {
		s.hs.Close()
	}
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// transcript prints numbered steps and indented lines.
type transcript struct {
	w io.Writer
	n int
}

func (t *transcript) step(title string) {
	t.n++
	fmt.Fprintf(t.w, "\n%d. %s\n", t.n, title)
}

func (t *transcript) say(format string, args ...any) {
	fmt.Fprintf(t.w, "   "+format+"\n", args...)
}
