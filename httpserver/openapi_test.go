package httpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/a2aserver"
	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
	"github.com/agentmesh/agentmesh/ui"
)

// openAPIPath is the OpenAPI document, the file people edit.
const openAPIPath = "../docs/openapi.yaml"

// loadOpenAPI loads and validates the document.
func loadOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(loader.Context), "the document is not valid OpenAPI")
	return doc
}

// The token-holding scopes of the test tokens, for the validator's
// AuthenticationFunc: a request passes the document's security
// requirements only when its token has a scope the requirement lists.
var tokenScopes = map[string][]string{
	adminToken:    {"read", "register", "delegate", "route", "admin"},
	readToken:     {"read"},
	registerToken: {"register", "read"},
	delegateToken: {"delegate", "read"},
	routeToken:    {"route"},
	otherToken:    {"register", "read"},
}

// otherToken acts for another principal than the test tokens.
const otherToken = "other-principal-secret"

// authenticate is the AuthenticationFunc of the contract checks: it
// accepts the document's schemes as the server does, and the scopes a
// requirement lists only for a token that has one of them.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	var tok string
	switch in.SecuritySchemeName {
	case "bearerAuth", "metricsToken":
		scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || t == "" {
			return errors.New("no bearer token")
		}
		tok = t
	case "apiKeyAuth":
		if tok = r.Header.Get("X-API-Key"); tok == "" {
			return errors.New("no X-API-Key")
		}
	case "callbackToken":
		if r.URL.Query().Get("token") == "" {
			return errors.New("no callback token")
		}
		return nil
	default:
		return fmt.Errorf("unknown scheme %q", in.SecuritySchemeName)
	}
	if in.SecuritySchemeName == "metricsToken" {
		return errors.New("no metrics token is configured")
	}
	if len(in.Scopes) == 0 {
		return nil // any valid token
	}
	for _, s := range in.Scopes {
		if slices.Contains(tokenScopes[tok], s) {
			return nil
		}
	}
	return fmt.Errorf("the token has none of the scopes %v", in.Scopes)
}

func filterOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:    authenticate,
		IncludeResponseStatus: true, // an undocumented status is drift
		MultiError:            false,
	}
}

func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	scopes := []string{"read", "register", "delegate", "route", "admin"}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			n++
			where := method + " " + path
			assert.NotEmpty(t, op.OperationID, "%s: no operationId", where)
			assert.NotEmpty(t, op.Summary, "%s: no summary", where)
			has4xx := false
			for code := range op.Responses.Map() {
				if len(code) == 3 && code[0] == '4' {
					has4xx = true
				}
			}
			assert.True(t, has4xx, "%s: no 4xx response", where)

			scope, ok := op.Extensions["x-required-scope"].(string)
			require.True(t, ok, "%s: no x-required-scope", where)
			require.NotNil(t, op.Security, "%s: no security requirements of its own", where)
			switch {
			case slices.Contains(scopes, scope):
				// Every requirement names the scheme of a token and that
				// scope, and both token schemes are offered.
				schemes := map[string]bool{}
				for _, req := range *op.Security {
					for name, listed := range req {
						schemes[name] = true
						if name == "metricsToken" {
							continue
						}
						assert.Equal(t, []string{scope}, listed, "%s: scheme %s", where, name)
					}
				}
				assert.True(t, schemes["bearerAuth"], "%s: bearer not accepted", where)
				if path != "/metrics" {
					assert.True(t, schemes["apiKeyAuth"], "%s: X-API-Key not accepted", where)
				}
				assert.Contains(t, op.Responses.Map(), "401", where)
				assert.Contains(t, op.Responses.Map(), "403", where)
			case scope == "any":
				assert.Equal(t, openapi3.SecurityRequirements{{"bearerAuth": {}}, {"apiKeyAuth": {}}}, *op.Security, where)
				assert.Contains(t, op.Responses.Map(), "401", where)
			case scope == "none":
				if path == "/v1/delegations/{id}/result" {
					assert.Equal(t, openapi3.SecurityRequirements{{"callbackToken": {}}}, *op.Security, where)
				} else if path != "/metrics" {
					assert.Empty(t, *op.Security, "%s: public, yet with requirements", where)
				}
			default:
				t.Errorf("%s: x-required-scope %q is not a scope, any or none", where, scope)
			}
		}
	}
	assert.GreaterOrEqual(t, n, 29)
}

// TestOpenAPICopy: the package embeds a copy of docs/openapi.yaml (go:embed
// cannot reach outside the package); run go generate ./httpserver after
// editing the document.
func TestOpenAPICopy(t *testing.T) {
	want, err := os.ReadFile(openAPIPath)
	require.NoError(t, err)
	got, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "httpserver/openapi.yaml differs from docs/openapi.yaml: run go generate ./httpserver")
}

func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, envConfig{})
	r := e.get("/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assertSecurityHeaders(t, r.Header)

	// The same document as the YAML, and loadable as it is.
	doc := loadOpenAPI(t)
	want, err := json.Marshal(doc)
	require.NoError(t, err)
	served, err := openapi3.NewLoader().LoadFromData(r.Body)
	require.NoError(t, err)
	got, err := json.Marshal(served)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	exported, err := httpserver.OpenAPI()
	require.NoError(t, err)
	assert.Equal(t, string(r.Body), string(exported))

	// Other methods are refused as on every route; a token is not needed
	// but does no harm.
	expectError(t, e.post("/openapi.json", "", nil), http.StatusMethodNotAllowed, "method_not_allowed")
	assert.Equal(t, http.StatusOK, e.get("/openapi.json", readToken).Status)
}

// contract drives a live server through the document's validator.
type contract struct {
	t      *testing.T
	base   string
	client *http.Client
	router routers.Router

	mu   sync.Mutex
	seen map[string][]int // "GET /v1/agents/{name}" → statuses answered
}

func newContract(t *testing.T, doc *openapi3.T, base string, client *http.Client) *contract {
	t.Helper()
	// Requests are matched by path alone: the document's server is its
	// own origin.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &contract{t: t, base: base, client: client, router: router, seen: map[string][]int{}}
}

// call is one request of the contract test and what it must get.
type call struct {
	method, path string
	token        string // as a bearer token
	apiKey       string // as X-API-Key
	body         any    // JSON-encoded unless a string
	contentType  string // default application/json when there is a body
	header       map[string]string

	status int    // the status the server must answer
	code   string // the error code, for an error status
	// invalid is the document's own verdict on the request: "" (valid),
	// "security" (no credentials, or none with the scope) or "request"
	// (a parameter or the body breaks the document).
	invalid string
}

// do sends c, checks the request and the response against the document
// and c's expectations, and returns the response.
func (k *contract) do(c call) *response {
	t := k.t
	t.Helper()
	var body []byte
	switch b := c.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	default:
		var err error
		body, err = json.Marshal(b)
		require.NoError(t, err)
	}
	newReq := func(target string) *http.Request {
		var rd io.Reader
		if c.body != nil {
			rd = bytes.NewReader(body)
		}
		r, err := http.NewRequest(c.method, target, rd)
		require.NoError(t, err)
		if c.body != nil {
			ct := c.contentType
			if ct == "" {
				ct = "application/json"
			}
			r.Header.Set("Content-Type", ct)
		}
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.apiKey != "" {
			r.Header.Set("X-API-Key", c.apiKey)
		}
		for h, v := range c.header {
			r.Header.Set(h, v)
		}
		return r
	}
	where := c.method + " " + c.path

	// The request, against the document.
	vr := newReq(c.path)
	route, params, err := k.router.FindRoute(vr)
	require.NoError(t, err, "%s: the document has no such operation", where)
	if p := vr.URL.Path; strings.HasSuffix(p, "/") != strings.HasSuffix(route.Path, "/") {
		// The router ignores a trailing slash, and /ui and /ui/ are two
		// operations: take the one of the path as written.
		item := route.Spec.Paths.Value(p)
		require.NotNil(t, item, "%s: the document has no such path", where)
		route = &routers.Route{Spec: route.Spec, Server: route.Server, Path: p, PathItem: item,
			Method: c.method, Operation: item.GetOperation(c.method)}
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: filterOptions()}
	verr := openapi3filter.ValidateRequest(context.Background(), in)
	var secErr *openapi3filter.SecurityRequirementsError
	switch c.invalid {
	case "":
		require.NoError(t, verr, "%s: the document refuses a request the server must take", where)
	case "security":
		require.ErrorAs(t, verr, &secErr, "%s: the document's security requirements accept it", where)
	case "request":
		require.Error(t, verr, "%s: the document accepts the request", where)
		require.False(t, errors.As(verr, &secErr), "%s: refused for its credentials, not its content: %v", where, verr)
	default:
		t.Fatalf("bad invalid %q", c.invalid)
	}

	// The request, to the server.
	resp, err := k.client.Do(newReq(k.base + c.path))
	require.NoError(t, err)
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	r := &response{Status: resp.StatusCode, Header: resp.Header, Body: data}
	require.Equalf(t, c.status, r.Status, "%s: body %s", where, data)
	if c.code != "" {
		assert.Equal(t, c.code, r.Err(t).Code, "%s", where)
	}
	h := r.Header.Clone()
	switch {
	case route.Path == "/.well-known/agent-card.json" && r.Status == http.StatusOK:
		// The card may be cached; the rest of the headers are the usual.
		assert.Equal(t, "public, max-age=60", h.Get("Cache-Control"))
		h.Set("Cache-Control", "no-store")
	case route.Path == "/ui/" && r.Status == http.StatusOK:
		// The page's own policy lets it load its assets.
		assert.Equal(t, ui.ContentSecurityPolicy, h.Get("Content-Security-Policy"))
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	case route.Operation.Extensions["x-opaque"] == true:
		h.Set("Cache-Control", "no-store") // the protocol handler sets its own
	}
	assertSecurityHeaders(t, h)

	// The response, against the document.
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.Status, Header: r.Header, Options: filterOptions()}
	out.SetBodyBytes(data)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out), "%s: the response breaks the document: %s", where, data)

	k.mu.Lock()
	op := route.Method + " " + route.Path
	k.seen[op] = append(k.seen[op], r.Status)
	k.mu.Unlock()
	return r
}

// contractEnv is a mesh with every optional route: the routing routes,
// the audit log, reload, import, the mesh's agent card, and /mcp and /a2a
// mounted as cmd/agentmesh mounts them.
type contractEnv struct {
	*env
	reloadFails atomic.Bool
	storeDown   atomic.Bool
	notReady    atomic.Bool
	events      *httpserver.Events
	decisions   *activity.Routing
}

// contractRouter forwards to a Router built after the server.
type contractRouter struct {
	r atomic.Pointer[routing.Router]
}

func (l *contractRouter) Handle(ctx context.Context, req routing.Request) (routing.Response, error) {
	return l.r.Load().Handle(ctx, req)
}

// budgetClassifier routes what mentions a budget to finance, the rest to
// helpdesk with a low confidence.
type budgetClassifier struct{}

func (budgetClassifier) Classify(_ context.Context, text string) (routing.Classification, error) {
	if strings.Contains(strings.ToLower(text), "budget") {
		return routing.Classification{AgentID: "finance", Confidence: 0.9, IntentSummary: "budget", DetectedLanguage: "en", Entities: map[string]any{}}, nil
	}
	return routing.Classification{AgentID: "helpdesk", Confidence: 0.2, DetectedLanguage: "en", Entities: map[string]any{}}, nil
}

func newContractEnv(t *testing.T) *contractEnv {
	t.Helper()
	ce := &contractEnv{}
	sstore, sessions := newSessions(t)
	astore := memstore.New()
	t.Cleanup(func() { _ = astore.Close() })
	rec, err := audit.NewRecorder(astore, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rec.Close() })
	lr := &contractRouter{}
	ce.events = httpserver.NewEvents(nil)
	ce.decisions = activity.NewRouting(nil)

	e := newEnv(t, envConfig{onRegistryWrite: rec.RegistryWrote, opts: func(o *httpserver.Options) {
		o.Tokens = append(o.Tokens, httpserver.Token{Name: "other", Token: otherToken, Principal: "other",
			Scopes: []httpserver.Scope{httpserver.ScopeRegister, httpserver.ScopeRead}})
		o.Router, o.Sessions = lr, sessions
		o.Events = ce.events
		hist := activity.NewBreakers(nil)
		hist.Record("finance", breaker.StateClosed, breaker.StateOpen)
		o.BreakerHistory = hist
		o.Activity = &httpserver.Activity{Decisions: ce.decisions, Delegations: activity.NewTimeline(nil), Sessions: sstore}
		o.Audit = rec
		o.CardClient = http.DefaultClient
		o.AgentCard = a2acard.MeshCard("https://mesh.example", "1.0.0")
		o.UI = ui.Handler()
		o.Reload = func(context.Context) (any, error) {
			if ce.reloadFails.Load() {
				return map[string]string{"agents": "refused"}, errors.New("agents/finance.yaml: capabilities is required")
			}
			return map[string]int{"agents": 2}, nil
		}
		o.StorePing = func(context.Context) error {
			if ce.storeDown.Load() {
				return errors.New("store down")
			}
			return nil
		}
		o.Ready = func(context.Context) error {
			if ce.notReady.Load() {
				return errors.New("the router has not learned its agents yet")
			}
			return nil
		}
	}})
	ce.env = e
	router, err := routing.New(budgetClassifier{}, e.reg, e.del, sessions, &routing.RouterOptions{Breakers: e.breakers, OnDecision: ce.decisions.Observe})
	require.NoError(t, err)
	t.Cleanup(func() { _ = router.Close() })
	lr.r.Store(router)

	mcpSrv, err := mcpserver.New(e.reg, e.engine, e.del, nil)
	require.NoError(t, err)
	mcpHandler, err := mcpserver.HTTPHandler(mcpSrv, nil)
	require.NoError(t, err)
	require.NoError(t, e.srv.Handle("/mcp", mcpHandler, ""))
	a2aHandler, err := a2aserver.New(e.engine, e.del, nil)
	require.NoError(t, err)
	require.NoError(t, e.srv.Handle(a2acard.MeshEndpointPath, a2aHandler, ""))
	return ce
}

// routeProblems compares the server's route patterns with the document's
// operations: a route the document lacks, or an operation no route
// serves. A pattern without a method ("/mcp") serves every method of its
// path.
func routeProblems(doc *openapi3.T, patterns []string) []string {
	var problems []string
	served := map[string]bool{}    // "GET /v1/agents"
	anyMethod := map[string]bool{} // "/mcp"
	for _, p := range patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			path, method = p, ""
		}
		item := doc.Paths.Value(path)
		switch {
		case item == nil:
			problems = append(problems, "route "+p+": path not in the document")
		case method == "":
			anyMethod[path] = true
			if len(item.Operations()) == 0 {
				problems = append(problems, "route "+p+": no operation in the document")
			}
		case item.GetOperation(method) == nil:
			problems = append(problems, "route "+p+": method not in the document")
		default:
			served[method+" "+path] = true
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] && !anyMethod[path] {
				problems = append(problems, "operation "+method+" "+path+": the server has no such route")
			}
		}
	}
	sort.Strings(problems)
	return problems
}

func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	e := newContractEnv(t)
	routes := e.srv.Routes()
	assert.Contains(t, routes, "GET /openapi.json")
	assert.Contains(t, routes, "/mcp")
	assert.Contains(t, routes, "GET /ui/")
	assert.Empty(t, routeProblems(doc, routes))

	// The comparison sees drift both ways.
	assert.Equal(t, []string{"route GET /v1/secret: path not in the document"},
		routeProblems(doc, append(slices.Clone(routes), "GET /v1/secret")))
	assert.Equal(t, []string{"route PUT /v1/agents/{name}: method not in the document"},
		routeProblems(doc, append(slices.Clone(routes), "PUT /v1/agents/{name}")))
	without := slices.DeleteFunc(slices.Clone(routes), func(p string) bool { return p == "GET /v1/audit" })
	assert.Equal(t, []string{"operation GET /v1/audit: the server has no such route"}, routeProblems(doc, without))

	// Without the optional collaborators the routes are fewer, and every
	// one left is still documented.
	plain := newEnv(t, envConfig{noDelegation: true})
	assert.NotContains(t, plain.srv.Routes(), "POST /v1/delegate")
	for _, p := range routeProblems(doc, plain.srv.Routes()) {
		assert.True(t, strings.HasPrefix(p, "operation "), p)
	}
}

// The route table of the package documentation (doc.go) lists every
// route the server registers, and no other: godoc readers see the same
// routes as the OpenAPI document.
func TestDocRouteTable(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	row := regexp.MustCompile(`(?m)^//\t(GET|POST|PUT|PATCH|DELETE) +(/\S*) `)
	var listed []string
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	var served []string
	for _, p := range newContractEnv(t).srv.Routes() {
		if strings.Contains(p, " ") { // mounted handlers (/mcp, /a2a) are in the prose
			served = append(served, p)
		}
	}
	sort.Strings(listed)
	sort.Strings(served)
	assert.Equal(t, served, listed, "doc.go's route table and the server's routes differ")
}

// samplePath fills the path parameters of a document path.
func samplePath(path string) string {
	r := strings.NewReplacer("{name}", "finance", "{id}", "00000000-0000-4000-8000-000000000000")
	return r.Replace(path)
}

func TestOpenAPIContract(t *testing.T) {
	doc := loadOpenAPI(t)
	ce := newContractEnv(t)
	e := ce.env
	// Redirects are answers of their own here (GET /ui is one).
	client := *e.ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	k := newContract(t, doc, e.ts.URL, &client)

	// Agents that answer: finance synchronously, reports asynchronously
	// (its callback URLs arrive on callbacks).
	finance := okAgent(t, map[string]any{"budget": 1200000})
	callbacks := make(chan string, 4)
	reports := asyncAgent(t, callbacks)
	card := agentServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"name": "Weather Agent", "description": "Forecasts the weather.", "version": "2.1.0",
			"supportedInterfaces": [{"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
			"capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
			"skills": [{"id": "forecast", "name": "Forecast", "description": "Forecasts.", "tags": ["weather"], "examples": ["Rain in Oslo?"]}]}`)
	})

	// ---- public routes ----
	k.do(call{method: "GET", path: "/health", status: 200})
	k.do(call{method: "GET", path: "/health/ready", status: 200})
	ce.notReady.Store(true)
	r := k.do(call{method: "GET", path: "/health/ready", status: 503, code: "unavailable"})
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	ce.notReady.Store(false)
	k.do(call{method: "GET", path: "/metrics", status: 200})
	k.do(call{method: "GET", path: "/openapi.json", status: 200})
	k.do(call{method: "GET", path: "/.well-known/agent-card.json", status: 200})
	r = k.do(call{method: "GET", path: "/ui/", status: 200})
	assert.Contains(t, r.Header.Get("Content-Type"), "text/html")
	r = k.do(call{method: "GET", path: "/ui", status: 301})
	assert.Equal(t, "/ui/", r.Header.Get("Location"))

	// ---- agents ----
	fin := agentJSON("finance", finance.URL+"/task", "budget", "cost-center")
	fin["resources"] = []map[string]string{{"uri": "https://erp.example.com/finance/*"}}
	fin["labels"] = map[string]string{"team": "finance"}
	fin["auth"] = map[string]string{"type": "bearer", "token": "agent-secret"}
	helpdesk := agentJSON("helpdesk", finance.URL+"/task", "help")
	helpdesk["isDefault"] = true
	r = k.do(call{method: "POST", path: "/v1/agents", token: registerToken, body: fin, status: 201})
	assert.NotContains(t, string(r.Body), "agent-secret")
	k.do(call{method: "POST", path: "/v1/agents", apiKey: registerToken, body: fin, status: 200})
	k.do(call{method: "POST", path: "/v1/agents", token: registerToken, body: agentJSON("reports", reports.URL+"/task", "reports"), status: 201})
	k.do(call{method: "POST", path: "/v1/agents", token: registerToken, body: helpdesk, status: 201})
	k.do(call{method: "POST", path: "/v1/agents", token: registerToken, status: 400, code: "invalid_argument", invalid: "request",
		body: map[string]any{"name": "vague", "endpoint": finance.URL}})
	k.do(call{method: "POST", path: "/v1/agents", token: registerToken, status: 400, code: "invalid_argument", invalid: "request",
		body: map[string]any{"name": "x", "description": "x", "capabilities": []string{"a"}, "endpoint": finance.URL, "colour": "red"}})
	k.do(call{method: "POST", path: "/v1/agents", token: registerToken, status: 400, code: "endpoint_not_allowed",
		body: agentJSON("sneaky", "file:///etc/passwd")})
	k.do(call{method: "POST", path: "/v1/agents", token: registerToken, body: "name: x", contentType: "application/yaml",
		status: 415, code: "unsupported_media_type", invalid: "request"})
	huge := agentJSON("huge", finance.URL+"/task")
	huge["description"] = strings.Repeat("x", 2<<20)
	k.do(call{method: "POST", path: "/v1/agents", token: registerToken, body: huge, status: 413, code: "payload_too_large"})
	k.do(call{method: "POST", path: "/v1/agents", token: readToken, body: fin, status: 403, code: "permission_denied", invalid: "security"})
	k.do(call{method: "POST", path: "/v1/agents", token: otherToken, body: fin, status: 403, code: "permission_denied"})

	k.do(call{method: "GET", path: "/v1/agents", token: readToken, status: 200})
	r = k.do(call{method: "GET", path: "/v1/agents?limit=1&label=team%3Dfinance", token: readToken, status: 200})
	k.do(call{method: "GET", path: "/v1/agents?limit=1", apiKey: readToken, status: 200})
	r = k.do(call{method: "GET", path: "/v1/agents?limit=2", token: readToken, status: 200})
	require.Contains(t, r.Header.Get("Link"), `rel="next"`)
	k.do(call{method: "GET", path: "/v1/agents?limit=-1", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "GET", path: "/v1/agents?label=nokey", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "GET", path: "/v1/agents?colour=red", token: readToken, status: 400, code: "invalid_argument"})
	k.do(call{method: "GET", path: "/v1/agents?cursor=garbage", token: readToken, status: 400, code: "invalid_argument"})

	k.do(call{method: "GET", path: "/v1/agents/finance", token: readToken, status: 200})
	k.do(call{method: "GET", path: "/v1/agents/nobody", token: readToken, status: 404, code: "not_found"})
	k.do(call{method: "GET", path: "/v1/agents/-bad", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "GET", path: "/v1/agents/finance/breaker", token: readToken, status: 200})
	k.do(call{method: "GET", path: "/v1/agents/nobody/breaker", token: readToken, status: 404, code: "not_found"})
	k.do(call{method: "GET", path: "/v1/agents/-bad/breaker", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "POST", path: "/v1/agents/finance/heartbeat", token: registerToken, status: 200})
	k.do(call{method: "POST", path: "/v1/agents/finance/heartbeat", token: registerToken, body: "{}", status: 200})
	k.do(call{method: "POST", path: "/v1/agents/finance/heartbeat", token: otherToken, status: 403, code: "permission_denied"})
	k.do(call{method: "POST", path: "/v1/agents/nobody/heartbeat", token: registerToken, status: 404, code: "not_found"})

	r = k.do(call{method: "POST", path: "/v1/agents/import", token: registerToken, body: map[string]string{"cardUrl": card.URL + "/.well-known/agent-card.json"}, status: 201})
	var imported struct{ Name string }
	r.JSON(t, &imported)
	k.do(call{method: "POST", path: "/v1/agents/import", token: registerToken, body: map[string]string{}, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "POST", path: "/v1/agents/import", token: registerToken, body: map[string]string{"cardUrl": "ftp://example.com/card"}, status: 400, code: "invalid_argument"})

	k.do(call{method: "DELETE", path: "/v1/agents/" + imported.Name, token: otherToken, status: 403, code: "permission_denied"})
	k.do(call{method: "DELETE", path: "/v1/agents/" + imported.Name, token: registerToken, status: 204})
	k.do(call{method: "DELETE", path: "/v1/agents/" + imported.Name, token: registerToken, status: 404, code: "not_found"})

	// ---- discovery ----
	r = k.do(call{method: "GET", path: "/v1/discover?query=cost+center+budget&limit=3&includeUnavailable", token: readToken, status: 200})
	require.Contains(t, string(r.Body), `"finance"`)
	k.do(call{method: "GET", path: "/v1/discover?query=budget&scorer=overlap&protocol=http&label=team%3Dfinance&resources=%5B%7B%22uri%22%3A%22https%3A%2F%2Ferp.example.com%2Ffinance%2Fq3%22%7D%5D", token: readToken, status: 200})
	k.do(call{method: "GET", path: "/v1/discover?limit=3", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "GET", path: "/v1/discover?query=x&protocol=smtp", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "POST", path: "/v1/discover", token: readToken, status: 200,
		body: map[string]any{"query": "budget", "limit": 2, "labels": map[string]string{"team": "finance"}, "requiredResources": []string{"https://erp.example.com/finance/q3"}}})
	k.do(call{method: "POST", path: "/v1/discover", token: readToken, body: map[string]any{"query": "budget", "top": 2}, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "POST", path: "/v1/discover", token: routeToken, body: map[string]any{"query": "budget"}, status: 403, code: "permission_denied", invalid: "security"})

	// ---- delegation ----
	r = k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, status: 200,
		body: map[string]any{"targetName": "finance", "task": "Budget for Engineering?", "sourceAgent": "hr-agent", "context": map[string]any{"accountId": 7}}})
	var done httpserver.DelegateResponse
	r.JSON(t, &done)
	require.Equal(t, "completed", string(done.Status))
	k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, body: map[string]any{"query": "cost center budget", "task": "x"}, status: 200})
	k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, body: map[string]any{"targetName": "nobody", "task": "x"}, status: 404, code: "not_found"})
	k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, body: map[string]any{"query": "quantum spaceship repair", "task": "x"}, status: 404, code: "no_match"})
	k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, body: map[string]any{"targetName": "finance"}, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, status: 403, code: "resource_not_covered",
		body: map[string]any{"targetName": "finance", "task": "x", "resources": []map[string]string{{"uri": "https://erp.example.com/hr/salaries"}}}})
	k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, body: map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"depth": 5}}, status: 422, code: "depth_exceeded"})
	k.do(call{method: "POST", path: "/v1/delegate", token: readToken, body: map[string]any{"targetName": "finance", "task": "x"}, status: 403, code: "permission_denied", invalid: "security"})

	r = k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, body: map[string]any{"targetName": "reports", "task": "Q3 report", "async": true}, status: 200})
	var accepted httpserver.DelegateResponse
	r.JSON(t, &accepted)
	require.Equal(t, "accepted", string(accepted.Status))
	cb := receive(t, callbacks)

	k.do(call{method: "GET", path: "/v1/delegations", token: readToken, status: 200})
	r = k.do(call{method: "GET", path: "/v1/delegations?limit=1&status=completed&target=finance", token: readToken, status: 200})
	require.Contains(t, r.Header.Get("Link"), `rel="next"`)
	k.do(call{method: "GET", path: "/v1/delegations?status=lost", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "GET", path: "/v1/delegations/" + done.ID, token: readToken, status: 200})
	k.do(call{method: "GET", path: "/v1/delegations/" + accepted.ID + "?wait=50ms", token: readToken, status: 200})
	k.do(call{method: "GET", path: "/v1/delegations/" + done.ID + "?wait=soon", token: readToken, status: 400, code: "invalid_argument"})
	k.do(call{method: "GET", path: "/v1/delegations/00000000-0000-4000-8000-000000000000", token: readToken, status: 404, code: "not_found"})

	// The callback: by its secret only.
	u, err := url.Parse(cb)
	require.NoError(t, err)
	secret := u.Query().Get("token")
	require.NotEmpty(t, secret)
	result := u.Path + "?token=" + url.QueryEscape(secret)
	k.do(call{method: "POST", path: u.Path, token: delegateToken, body: map[string]any{"status": "completed"}, status: 401, code: "unauthenticated", invalid: "security"})
	k.do(call{method: "POST", path: u.Path + "?token=wrong", body: map[string]any{"status": "completed"}, status: 401, code: "unauthenticated"})
	k.do(call{method: "POST", path: result, body: map[string]any{"status": "done"}, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "POST", path: result, body: map[string]any{"status": "completed", "result": "Q3 report: 14 pages"}, status: 200})
	k.do(call{method: "POST", path: result, body: map[string]any{"status": "completed", "result": "again"}, status: 409, code: "conflict"})
	k.do(call{method: "POST", path: "/v1/delegations/00000000-0000-4000-8000-000000000000/result?token=x", body: map[string]any{"status": "completed"}, status: 404, code: "not_found"})

	// Cancel a second accepted delegation.
	r = k.do(call{method: "POST", path: "/v1/delegate", token: delegateToken, body: map[string]any{"targetName": "reports", "task": "Q4 report", "async": true}, status: 200})
	var second httpserver.DelegateResponse
	r.JSON(t, &second)
	receive(t, callbacks)
	k.do(call{method: "POST", path: "/v1/delegations/" + second.ID + "/cancel", token: readToken, status: 403, code: "permission_denied", invalid: "security"})
	k.do(call{method: "POST", path: "/v1/delegations/" + second.ID + "/cancel", token: delegateToken, status: 200})
	k.do(call{method: "POST", path: "/v1/delegations/" + second.ID + "/cancel", token: delegateToken, status: 409, code: "conflict"})
	k.do(call{method: "POST", path: "/v1/delegations/00000000-0000-4000-8000-000000000000/cancel", token: delegateToken, status: 404, code: "not_found"})

	// ---- routing and sessions ----
	r = k.do(call{method: "POST", path: "/v1/request", token: routeToken, body: map[string]any{"input": "What is the budget?", "user_id": "u1", "locale": "en", "metadata": map[string]any{"channel": "web"}}, status: 200})
	var routed routing.Response
	r.JSON(t, &routed)
	require.Equal(t, "finance", routed.AgentID)
	require.NotEmpty(t, routed.SessionID)
	k.do(call{method: "POST", path: "/v1/request", token: routeToken, body: map[string]any{"input": "I need help"}, status: 200})
	k.do(call{method: "POST", path: "/v1/request", token: routeToken, body: map[string]any{"user_id": "u1"}, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "POST", path: "/v1/request", token: routeToken, body: map[string]any{"input": "   "}, status: 400, code: "invalid_argument"})
	k.do(call{method: "POST", path: "/v1/request", token: readToken, body: map[string]any{"input": "budget"}, status: 403, code: "permission_denied", invalid: "security"})

	sess := "/v1/sessions/" + routed.SessionID
	k.do(call{method: "GET", path: sess, token: routeToken, status: 200})
	k.do(call{method: "GET", path: "/v1/sessions/00000000-0000-4000-8000-000000000000", token: routeToken, status: 404, code: "not_found"})
	k.do(call{method: "DELETE", path: sess, token: routeToken, status: 200})
	k.do(call{method: "DELETE", path: sess, token: routeToken, status: 409, code: "conflict"})
	r = k.do(call{method: "POST", path: sess + "/resume", token: routeToken, status: 200})
	var resumed session.Session
	r.JSON(t, &resumed)
	assert.NotEqual(t, routed.SessionID, resumed.ID)
	assert.Equal(t, session.StatusActive, resumed.Status)
	k.do(call{method: "POST", path: "/v1/sessions/00000000-0000-4000-8000-000000000000/resume", token: routeToken, status: 404, code: "not_found"})

	// ---- the dashboard's routing activity and stats ----
	k.do(call{method: "GET", path: "/v1/routing/decisions", token: readToken, status: 200})
	r = k.do(call{method: "GET", path: "/v1/routing/decisions?limit=2", token: adminToken, status: 200})
	assert.Contains(t, string(r.Body), `"text":"I need help"`)
	k.do(call{method: "GET", path: "/v1/routing/decisions?limit=-1", token: readToken, status: 400, code: "invalid_argument", invalid: "request"})
	k.do(call{method: "GET", path: "/v1/routing/decisions", token: routeToken, status: 403, code: "permission_denied", invalid: "security"})
	k.do(call{method: "GET", path: "/v1/stats/delegations", token: readToken, status: 200})
	k.do(call{method: "GET", path: "/v1/stats/delegations", status: 401, code: "unauthenticated", invalid: "security"})
	r = k.do(call{method: "GET", path: "/v1/stats/sessions", token: readToken, status: 200})
	assert.JSONEq(t, `{"active":1}`, string(r.Body))

	// ---- admin ----
	k.do(call{method: "POST", path: "/v1/admin/reload", token: adminToken, status: 200})
	ce.reloadFails.Store(true)
	r = k.do(call{method: "POST", path: "/v1/admin/reload", token: adminToken, status: 422, code: "reload_failed"})
	assert.Contains(t, string(r.Body), "refused")
	k.do(call{method: "POST", path: "/v1/admin/reload", token: registerToken, status: 403, code: "permission_denied", invalid: "security"})
	r = k.do(call{method: "GET", path: "/v1/audit?limit=2", token: adminToken, status: 200})
	require.Contains(t, r.Header.Get("Link"), `rel="next"`)
	k.do(call{method: "GET", path: "/v1/audit?since=2026-01-02T15:04:05Z", token: adminToken, status: 200})
	k.do(call{method: "GET", path: "/v1/audit?since=yesterday", token: adminToken, status: 400, code: "invalid_argument", invalid: "request"})

	// ---- health with a token ----
	k.do(call{method: "GET", path: "/health/deep", token: readToken, status: 200})
	ce.storeDown.Store(true)
	k.do(call{method: "GET", path: "/health/deep", token: readToken, status: 503})
	ce.storeDown.Store(false)

	// ---- the mounted protocols ----
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"contract","version":"1"}}}`
	r = k.do(call{method: "POST", path: "/mcp", token: readToken, body: mcpInit, header: map[string]string{"Accept": "application/json, text/event-stream"}, status: 200})
	assert.Contains(t, string(r.Body), `"protocolVersion"`)
	k.do(call{method: "GET", path: "/mcp", token: readToken, header: map[string]string{"Accept": "text/event-stream"}, status: 405})
	k.do(call{method: "DELETE", path: "/mcp", token: readToken, status: 405})
	r = k.do(call{method: "POST", path: "/a2a", token: readToken, body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`, status: 200})
	assert.Contains(t, string(r.Body), `"jsonrpc"`)

	// ---- every authenticated operation: 401 without a token, 403 with
	// a token lacking its scope ----
	lacking := map[string]string{"read": routeToken, "register": delegateToken, "delegate": registerToken, "route": readToken, "admin": registerToken}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			scope := op.Extensions["x-required-scope"].(string)
			if scope == "none" && path != "/v1/delegations/{id}/result" {
				continue
			}
			p := samplePath(path)
			var body any
			if op.RequestBody != nil {
				body = map[string]any{}
			}
			k.do(call{method: method, path: p, body: body, status: 401, code: "unauthenticated", invalid: "security"})
			if tok, ok := lacking[scope]; ok {
				k.do(call{method: method, path: p, token: tok, body: body, status: 403, code: "permission_denied", invalid: "security"})
			}
		}
	}

	// The event stream answers 200 and streams until the feed closes (as
	// at shutdown), which lets the contract read its whole body.
	go func() {
		for ce.events.Clients() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		_ = ce.events.Publish("agent.registered", map[string]string{"name": "finance"}, "")
		ce.events.Close()
	}()
	stream := k.do(call{method: "GET", path: "/v1/events", token: readToken, status: 200})
	assert.Contains(t, string(stream.Body), "event: agent.registered\ndata: {\"name\":\"finance\"}\n\n")
	k.do(call{method: "GET", path: "/v1/events", token: readToken, status: 503, code: "unavailable"})

	// Every operation was driven, and answered with success where it has
	// one.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			statuses := k.seen[where]
			require.NotEmpty(t, statuses, "%s was never called", where)
			documented2xx := false
			for code := range op.Responses.Map() {
				documented2xx = documented2xx || code[0] == '2'
			}
			if documented2xx {
				assert.True(t, slices.ContainsFunc(statuses, func(s int) bool { return s/100 == 2 }), "%s: no success among %v", where, statuses)
			}
		}
	}
	var all []int
	for _, s := range k.seen {
		all = append(all, s...)
	}
	for _, s := range []int{400, 401, 403, 404, 409, 413, 415, 422, 503} {
		assert.Contains(t, all, s)
	}
}

// receive returns the next callback URL an async agent was sent.
func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not called")
		return ""
	}
}

func TestOpenAPIRateLimited(t *testing.T) {
	doc := loadOpenAPI(t)
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.RateLimit = httpserver.RateLimit{Requests: 1, Per: time.Hour}
	}})
	k := newContract(t, doc, e.ts.URL, e.ts.Client())
	k.do(call{method: "GET", path: "/v1/agents", token: readToken, status: 200})
	r := k.do(call{method: "GET", path: "/v1/agents", token: readToken, status: 429, code: "rate_limited"})
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
}

// TestOpenAPICatchesDrift: the validator the contract test relies on
// refuses responses and requests that stray from the document.
func TestOpenAPICatchesDrift(t *testing.T) {
	doc := loadOpenAPI(t)
	e := newEnv(t, envConfig{})
	ok := okAgent(t, "fine")
	e.register(agentJSON("finance", ok.URL+"/task", "budget"))
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)

	validate := func(method, path string, status int, body []byte) error {
		t.Helper()
		req, err := http.NewRequest(method, path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+readToken)
		route, params, err := router.FindRoute(req)
		require.NoError(t, err)
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: filterOptions()}
		require.NoError(t, openapi3filter.ValidateRequest(context.Background(), in))
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status,
			Header: http.Header{"Content-Type": {"application/json"}}, Options: filterOptions()}
		out.SetBodyBytes(body)
		return openapi3filter.ValidateResponse(context.Background(), out)
	}
	mutate := func(body []byte, f func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(body, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}

	r := e.get("/v1/agents/finance", readToken)
	require.Equal(t, http.StatusOK, r.Status)
	require.NoError(t, validate("GET", "/v1/agents/finance", 200, r.Body), "the real response is valid")
	assert.Error(t, validate("GET", "/v1/agents/finance", 200, mutate(r.Body, func(m map[string]any) { delete(m, "name") })), "a required field dropped")
	assert.Error(t, validate("GET", "/v1/agents/finance", 200, mutate(r.Body, func(m map[string]any) { m["colour"] = "red" })), "an undocumented field")
	assert.Error(t, validate("GET", "/v1/agents/finance", 200, mutate(r.Body, func(m map[string]any) { m["capabilities"] = "budget" })), "a field of another type")
	assert.Error(t, validate("GET", "/v1/agents/finance", 200, mutate(r.Body, func(m map[string]any) {
		m["auth"] = map[string]any{"type": "bearer", "token": "leaked"}
	})), "the write-only credential returned")
	assert.Error(t, validate("GET", "/v1/agents/finance", 200, []byte(`[]`)), "an array for an object")
	assert.Error(t, validate("GET", "/v1/agents/finance", 418, r.Body), "an undocumented status")

	r = e.get("/v1/agents/nobody", readToken)
	require.Equal(t, http.StatusNotFound, r.Status)
	require.NoError(t, validate("GET", "/v1/agents/nobody", 404, r.Body))
	assert.Error(t, validate("GET", "/v1/agents/nobody", 404, mutate(r.Body, func(m map[string]any) { m["code"] = "no_such_agent" })), "an unknown error code")
	assert.Error(t, validate("GET", "/v1/agents/nobody", 404, mutate(r.Body, func(m map[string]any) { delete(m, "error") })), "an error without its message")

	r = e.get("/v1/agents", readToken)
	require.NoError(t, validate("GET", "/v1/agents", 200, r.Body))
	assert.Error(t, validate("GET", "/v1/agents", 200, []byte(`{"agents": []}`)), "a wrapped list")

	// A request that breaks the document is refused too.
	req, err := http.NewRequest("POST", "/v1/agents", strings.NewReader(`{"name": "x", "endpoint": "http://a"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+registerToken)
	route, params, err := router.FindRoute(req)
	require.NoError(t, err)
	assert.Error(t, openapi3filter.ValidateRequest(context.Background(),
		&openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: filterOptions()}), "neither a description nor capabilities")
}
