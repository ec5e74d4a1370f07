package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/jsonlimit"
	"github.com/agentmesh/agentmesh/registry"
)

// ImplementationName is the server name reported to MCP clients.
const ImplementationName = "agentmesh"

// Registry is what the tools need from the agent registry:
// *registry.Registry implements it.
type Registry interface {
	Register(ctx context.Context, a registry.Agent) (registry.Agent, bool, error)
	List(ctx context.Context, opts registry.ListOptions) (registry.Page, error)
	Delete(ctx context.Context, name string) error
}

// ContextSearcher is a [discovery.Searcher] whose search can be cancelled
// (another mesh over the network): the tools call it, with the call's
// context, when the searcher they are given implements it.
type ContextSearcher interface {
	SearchContext(ctx context.Context, query string, q *discovery.Query) ([]discovery.Result, error)
}

// Delegations is what the tools need from the delegation client:
// *delegation.Client implements it.
type Delegations interface {
	Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error)
	Get(ctx context.Context, id string) (delegation.Record, error)
	Wait(ctx context.Context, id string) (delegation.Record, error)
}

// Options configures the server built by [New]. A nil *Options, like the
// zero value of every field, means the documented default.
type Options struct {
	// Instructions are the server instructions sent to clients at
	// initialization, which many clients put in the model's context. Empty
	// means [DefaultInstructions].
	Instructions string

	// Authorize, if set, is called before every tool call with the call's
	// request (its Params.Name is the tool; over HTTP, ctx carries the
	// values the HTTP middleware put on the request's context, and
	// req.Extra the request's headers). A non-nil error refuses the call:
	// the client gets an isError result "permission_denied: <error text>",
	// so the text must be safe to show. [RequiredScope] gives the scope a
	// tool needs under the HTTP API's token scopes. Nil allows every call
	// (stdio: the user who started the process is the caller). It must be
	// safe for concurrent use.
	Authorize func(ctx context.Context, req *mcp.CallToolRequest) error

	// Logger receives failures that are not shown to clients (store
	// errors and other internal errors, with the tool name) at Error
	// level. Nil means discard. The SDK's own logging is not affected.
	Logger *slog.Logger

	// Router, if set, adds the routing tools mesh_route and
	// handle_message (scope route), so that this mesh can be an mcp agent
	// of another. Nil leaves them out.
	Router Router

	// RouteMetadata, if set, returns metadata merged over (and winning
	// against) the caller's into every routed request, for the caller
	// of ctx: over HTTP, the host records the token that created a
	// session this way. Nil adds none.
	RouteMetadata func(ctx context.Context) map[string]any
}

// DefaultInstructions are the server instructions when
// Options.Instructions is empty.
const DefaultInstructions = `agentmesh is a service mesh for AI agents: agents register what they can do, and you can find them and hand them tasks.

Typical flow:
1. mesh_discover with what you need in plain words: returns matching agents, best first, with scores and the capabilities that matched.
2. mesh_delegate with targetName (an agent name from discovery) or query (the mesh picks the best match), and the task. It waits for the agent's answer unless async is true.
3. For async delegations or long tasks, poll mesh_get_delegation with the returned id and waitSeconds (up to 60) until status is completed, failed, timeout or canceled.

mesh_list_agents lists every registered agent. mesh_register adds an agent or replaces the one with the same name; mesh_unregister removes one permanently.

Failures are tool errors whose text starts with a code: invalid_argument (fix the named argument), not_found or no_match (discover first), depth_exceeded or delegation_cycle (do not delegate further), agent_error, agent_unreachable, agent_unavailable or timeout (the agent failed: try another agent, or later), endpoint_not_allowed (the mesh refuses that URL).`

// New returns the MCP server of the mesh: the tools mesh_register,
// mesh_discover, mesh_unregister, mesh_delegate, mesh_get_delegation and
// mesh_list_agents over reg, search and del (all required), and, with
// Options.Router, mesh_route and handle_message; configured by opts (nil
// means defaults).
//
// The server holds no state of its own and starts no goroutines: serve it
// on stdio with Server.Run(ctx, &mcp.StdioTransport{}), or over HTTP with
// [HTTPHandler]. It is safe for concurrent use, as reg, search and del
// must be.
func New(reg Registry, search discovery.Searcher, del Delegations, opts *Options) (*mcp.Server, error) {
	srv, _, err := newServer(reg, search, del, opts)
	return srv, err
}

// newServer is [New], also returning the tools it serves.
func newServer(reg Registry, search discovery.Searcher, del Delegations, opts *Options) (*mcp.Server, *tools, error) {
	if reg == nil || search == nil || del == nil {
		return nil, nil, errors.New("mcpserver: New needs a registry, a searcher and a delegation client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Instructions == "" {
		o.Instructions = DefaultInstructions
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &tools{reg: reg, search: search, del: del, authorize: o.Authorize, log: o.Logger, router: o.Router, routeMeta: o.RouteMetadata}

	srv := mcp.NewServer(&mcp.Implementation{
		Name:    ImplementationName,
		Title:   "agentmesh: agent discovery and delegation",
		Version: buildinfo.Version(),
	}, &mcp.ServerOptions{
		Instructions: o.Instructions,
		// Tools only: no logging capability (the SDK's default), and no
		// list_changed notifications (the tool list never changes).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	if err := t.add(srv); err != nil {
		return nil, nil, fmt.Errorf("mcpserver: %w", err)
	}
	srv.AddReceivingMiddleware(argumentErrors, advertiseOutputs(t.outputs), fastCalls(t.fast))
	return srv, t, nil
}

// DefaultMaxBodyBytes is the request body limit of [HTTPHandler] when
// HTTPOptions.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// HTTPOptions configures [HTTPHandler]. A nil *HTTPOptions, like the zero
// value of every field, means the documented default.
type HTTPOptions struct {
	// MaxBodyBytes caps the size of a request body; a larger one gets 413.
	// ≤ 0 means DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64

	// TrustedOrigins are origins ("https://inspector.example.com") whose
	// browsers may call the endpoint cross-origin. Empty means none:
	// same-origin browser requests and non-browser clients only.
	TrustedOrigins []string

	// Logger receives the SDK transport's logs. Nil means discard.
	Logger *slog.Logger
}

// HTTPHandler returns the MCP Streamable HTTP endpoint for srv
// (docs/MCP.md#host-configuration): in stateless mode (no Mcp-Session-Id;
// each POST is self-contained, so replicas behind a load balancer work;
// GET and DELETE answer 405), with application/json responses instead of
// event streams, a body limit (413), a nesting limit (400 for a body whose
// arrays and objects nest more than 64 deep, refused before the SDK reads
// it), the SDK's DNS-rebinding protection for loopback listeners, and
// http.CrossOriginProtection (a cross-origin browser POST gets 403 with a
// JSON-RPC error body). Authentication is the mounting server's job.
//
// It fails only for a malformed TrustedOrigins entry.
func HTTPHandler(srv *mcp.Server, opts *HTTPOptions) (http.Handler, error) {
	if srv == nil {
		return nil, errors.New("mcpserver: HTTPHandler needs a server")
	}
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	cop := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("mcpserver: trusted origin: %w", err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"cross-origin request refused"}}` + "\n"))
	}))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: o.MaxBodyBytes,
		Logger:              o.Logger,
	})
	return cop.Handler(jsonlimit.Handler(h, o.MaxBodyBytes, refuseDeep)), nil
}

// refuseDeep answers a body nested deeper than jsonlimit.MaxDepth as the
// SDK answers a malformed one: 400, in plain text.
func refuseDeep(w http.ResponseWriter, _ *http.Request, _ error) {
	http.Error(w, fmt.Sprintf("the request body nests arrays and objects more than %d deep", jsonlimit.MaxDepth), http.StatusBadRequest)
}

// callState marks, on a tools/call context, whether the tool's handler
// ran: an isError result from a call whose handler did not run is the
// SDK's rejection of the arguments (schema validation or decoding).
type callState struct{ ran bool }

type callStateKey struct{}

// argumentErrors is the receiving middleware that gives the SDK's argument
// rejections the invalid_argument code, so every isError result of this
// server starts with a documented code (docs/MCP.md#errors).
func argumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		st := &callState{}
		res, err := next(context.WithValue(ctx, callStateKey{}, st), method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.IsError && !st.ran {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					tc.Text = apierr.CodeInvalidArgument + ": " + argumentMessage(tc.Text) + " (see the tool's inputSchema)"
				}
			}
		}
		return res, err
	}
}

// validatingPrefix matches the chain of "validating <JSON pointer>: "
// prefixes of a schema validation error.
var validatingPrefix = regexp.MustCompile(`^(?:validating (/[^:]*|root): )+`)

// argumentMessage shortens the SDK's text for a rejected argument: the
// chain of "validating …" prefixes becomes the argument's path, as in
// "resources[].access: enum: …".
func argumentMessage(msg string) string {
	msg = strings.TrimPrefix(msg, `validating "arguments": `)
	m := validatingPrefix.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	rest := msg[len(m[0]):]
	if strings.HasPrefix(rest, "anyOf:") {
		rest = anyOfMessage(rest)
	}
	path := m[1]
	if path == "root" {
		return rest
	}
	path = strings.ReplaceAll(path, "/properties/", ".")
	path = strings.ReplaceAll(path, "/items", "[]")
	path = strings.ReplaceAll(path, "/additionalProperties", "{}")
	return strings.TrimPrefix(path, ".") + ": " + rest
}

var (
	wantType = regexp.MustCompile(`want "(\w+)"`)
	hasType  = regexp.MustCompile(`has type "(\w+)"`)
)

// anyOfMessage shortens the SDK's text for a value that matches no branch
// of an anyOf whose branches are types (the context of mesh_delegate):
// "must be an object or a string, not integer".
func anyOfMessage(msg string) string {
	var want []string
	for _, m := range wantType.FindAllStringSubmatch(msg, -1) {
		want = append(want, m[1])
	}
	got := hasType.FindStringSubmatch(msg)
	if len(want) == 0 || got == nil {
		return msg
	}
	return "must be of type " + strings.Join(want, " or ") + ", not " + got[1]
}

// markRan records on ctx that a tool handler ran.
func markRan(ctx context.Context) {
	if st, ok := ctx.Value(callStateKey{}).(*callState); ok {
		st.ran = true
	}
}
