package a2aserver

import (
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/jsonlimit"
	"github.com/agentmesh/agentmesh/principal"
)

// Delegations runs delegations: *delegation.Client implements it.
type Delegations interface {
	Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error)
}

// Operations a call can perform, as [Options].Authorize sees them. The
// two skills are the skill ids of the mesh's card.
const (
	OpDiscover   = a2acard.SkillDiscover // SendMessage with the discovery skill
	OpDelegate   = a2acard.SkillDelegate // SendMessage with the delegation skill (the default), or a reply
	OpReadTasks  = "tasks.read"          // GetTask, ListTasks
	OpCancelTask = "tasks.cancel"        // CancelTask
)

// RequiredScope returns the HTTP API token scope an operation needs
// (docs/API.md#authentication) — "read" for discovery and reading tasks, "delegate" for
// delegating and cancelling — or "" for a string that is not one of the
// operations. A host mounting the handler behind the HTTP API's
// authentication checks it in Options.Authorize.
func RequiredScope(op string) string {
	switch op {
	case OpDiscover, OpReadTasks:
		return "read"
	case OpDelegate, OpCancelTask:
		return "delegate"
	}
	return ""
}

// Defaults of [Options].
const (
	DefaultMaxBodyBytes  = 1 << 20
	DefaultTaskRetention = time.Hour
	DefaultMaxTaskBytes  = 64 << 20
)

// Options configures the handler built by [New]. A nil *Options, like the
// zero value of every field, means the documented default.
type Options struct {
	// Authorize, if set, is called before every call with the operation
	// it performs (OpDiscover, OpDelegate, OpReadTasks, OpCancelTask) and
	// the request's context (which carries what the host's HTTP
	// middleware put there, such as the caller's identity). A non-nil
	// error refuses the call with a JSON-RPC "permission denied" error
	// (code -31403) whose message is "permission_denied: <error text>", so
	// the text must be safe to show; nothing runs and no task is created.
	// [RequiredScope] maps operations to the HTTP API's scopes. Nil
	// allows every call. It must be safe for concurrent use.
	Authorize func(ctx context.Context, op string) error

	// Caller, if set, names the caller of a request's context (a token
	// name, a user): a task belongs to the caller that created it, and
	// other callers can neither read, continue nor cancel it (task not
	// found). Nil names the principal the context carries (package
	// principal), as the front-ends of the mesh attach it; a context
	// without one is one shared caller, whose tasks every client sees.
	// It must be safe for concurrent use.
	Caller func(ctx context.Context) string

	// Logger receives failures that are not shown to clients (store
	// errors, panics) at Error level, and the A2A SDK's own logs. Nil
	// means discard.
	Logger *slog.Logger

	// MaxBodyBytes caps the size of a request body; a larger one gets a
	// JSON-RPC parse error, as does a body whose arrays and objects nest
	// more than 64 deep. ≤ 0 means DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64

	// TaskRetention is how long a task that is no longer running stays
	// readable with GetTask (and can be answered, when input-required)
	// after its last update. ≤ 0 means DefaultTaskRetention (1 h).
	TaskRetention time.Duration

	// MaxTaskBytes caps the memory held by tasks (their JSON size):
	// beyond it, the least recently updated tasks that are not running
	// are dropped first (never the one written last). ≤ 0 means
	// DefaultMaxTaskBytes (64 MiB).
	MaxTaskBytes int64
}

// New returns the A2A endpoint of the mesh: an [http.Handler] serving the
// A2A JSON-RPC binding (POST, one JSON-RPC request per body) whose skills
// are discovery over search and delegation through del (both required),
// as the package documentation describes. Mount it at the path the mesh's
// card declares ([a2acard.MeshEndpointPath]) behind the host's
// authentication.
//
// The handler keeps tasks in memory (see Options.TaskRetention) and
// starts a goroutine per running task, which ends with the task. It is
// safe for concurrent use, as search and del must be.
func New(search discovery.Searcher, del Delegations, opts *Options) (http.Handler, error) {
	if search == nil || del == nil {
		return nil, errors.New("a2aserver: New needs a searcher and a delegation client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.TaskRetention <= 0 {
		o.TaskRetention = DefaultTaskRetention
	}
	if o.MaxTaskBytes <= 0 {
		o.MaxTaskBytes = DefaultMaxTaskBytes
	}
	// Data parts carry json.RawMessage values (see resultPart), which the
	// SDK's gob copies of tasks need registered. Registering the same
	// type again is a no-op.
	gob.Register(json.RawMessage(nil))
	log := o.Logger
	panicked := func(where string) func(r any) error {
		return func(r any) error {
			log.Error("a2aserver: panic", "in", where, "panic", fmt.Sprint(r))
			return a2a.NewError(a2a.ErrInternalError, apierr.CodeInternal+": "+msgInternal)
		}
	}
	rh := a2asrv.NewHandler(&executor{search: search, del: del, log: log},
		a2asrv.WithTaskStore(newTaskStore(o.TaskRetention, o.MaxTaskBytes, time.Now)),
		// What the mesh's card declares: no streaming, push
		// notifications or extended card.
		a2asrv.WithCapabilityChecks(&a2a.AgentCapabilities{}),
		a2asrv.WithCallInterceptors(&guard{authorize: o.Authorize, caller: o.Caller}),
		a2asrv.WithLogger(log),
		a2asrv.WithExecutionPanicHandler(panicked("execution")),
	)
	rpc := a2asrv.NewJSONRPCHandler(rh, a2asrv.WithTransportPanicHandler(panicked("transport")))
	limit := o.MaxBodyBytes
	guarded := jsonlimit.Handler(rpc, limit, refuseDeep)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		guarded.ServeHTTP(w, r)
	}), nil
}

// deepError is the JSON-RPC parse error of a body nested deeper than
// jsonlimit.MaxDepth, answered before the SDK reads it.
var deepError = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"%s: the request body nests arrays and objects more than %d deep"}}`+"\n",
	apierr.CodeInvalidArgument, jsonlimit.MaxDepth)

// refuseDeep answers a body nested too deep as the SDK answers a
// malformed one: a JSON-RPC parse error, with HTTP 200.
func refuseDeep(w http.ResponseWriter, _ *http.Request, _ error) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(deepError)
}

// Methods of the A2A request handler, as [a2asrv.CallContext.Method]
// names them.
const (
	methodSendMessage     = "SendMessage"
	methodSendStreaming   = "SendStreamingMessage"
	methodSubscribeToTask = "SubscribeToTask"
	methodGetTask         = "GetTask"
	methodListTasks       = "ListTasks"
	methodCancelTask      = "CancelTask"
	methodGetPushConfig   = "GetTaskPushConfig"
	methodListPushConfigs = "ListTaskPushConfigs"
	methodSetPushConfig   = "CreateTaskPushConfig"
	methodDelPushConfig   = "DeleteTaskPushConfig"
)

// guard is the call interceptor that runs before every call: it names the
// caller (the owner of the tasks the call creates or reads), refuses what
// the mesh does not offer, authorises the operation, and checks a message
// before any task exists, so that a refused or malformed call is a
// JSON-RPC error, not a failed task.
type guard struct {
	a2asrv.PassthroughCallInterceptor
	authorize func(ctx context.Context, op string) error
	caller    func(ctx context.Context) string
}

// Before implements [a2asrv.CallInterceptor].
func (g *guard) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	switch p, ok := principal.FromContext(ctx); {
	case g.caller != nil:
		cc.User = a2asrv.NewAuthenticatedUser(g.caller(ctx), nil)
	case ok:
		cc.User = a2asrv.NewAuthenticatedUser(principal.Of(p.Name), nil)
	}
	switch cc.Method() {
	case methodSendMessage:
		p, ok := req.Payload.(*a2a.SendMessageRequest)
		if !ok || p == nil || p.Message == nil {
			return ctx, nil, invalidParams("the request has no message")
		}
		if err := g.allow(ctx, skillOf(p)); err != nil {
			return ctx, nil, err
		}
		if _, err := parseIntent(p.Message, p.Metadata); err != nil {
			return ctx, nil, err
		}
		if p.Config != nil && p.Config.PushConfig != nil {
			return ctx, nil, a2a.NewError(a2a.ErrPushNotificationNotSupported, "push notifications are not supported: SendMessage blocks until the task is final, or poll GetTask")
		}
		if p.Config == nil || !p.Config.ReturnImmediately {
			ctx = context.WithValue(ctx, originKey{}, ctx)
		}
		return ctx, nil, nil
	case methodSendStreaming, methodSubscribeToTask:
		return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, "streaming is not supported: use SendMessage, which blocks until the task is final")
	case methodGetTask, methodListTasks:
		return ctx, nil, g.allow(ctx, OpReadTasks)
	case methodCancelTask:
		return ctx, nil, g.allow(ctx, OpCancelTask)
	case methodGetPushConfig, methodListPushConfigs, methodSetPushConfig, methodDelPushConfig:
		return ctx, nil, a2a.NewError(a2a.ErrPushNotificationNotSupported, "push notifications are not supported")
	}
	return ctx, nil, nil
}

// allow applies Options.Authorize.
func (g *guard) allow(ctx context.Context, op string) error {
	if g.authorize == nil {
		return nil
	}
	if err := g.authorize(ctx, op); err != nil {
		return codedError(a2a.ErrUnauthorized, apierr.CodePermissionDenied, err.Error())
	}
	return nil
}

// skillOf is the operation of a SendMessage, read leniently so that
// authorisation comes before the checks of the message: discovery when
// the metadata asks for it, else delegation.
func skillOf(p *a2a.SendMessageRequest) string {
	skill, _ := p.Message.Metadata[MetaSkill].(string)
	if _, set := p.Message.Metadata[MetaSkill]; !set {
		skill, _ = p.Metadata[MetaSkill].(string)
	}
	if skill == OpDiscover && p.Message.TaskID == "" {
		return OpDiscover
	}
	return OpDelegate
}
