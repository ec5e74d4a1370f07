package routing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/session"
)

// Limits of a routed [Request].
const (
	// MaxInputRunes is the longest input, in characters (Unicode code
	// points).
	MaxInputRunes = 10000
)

// DefaultRetryAfter is the Retry-After of an [UnavailableError] when no
// breaker says when an agent will be back.
const DefaultRetryAfter = 5 * time.Second

// Errors of [Router.Handle], besides [ErrNoDefaultAgent] (HTTP 503
// no_default_agent), session store errors (500) and the context's error.
// They describe themselves ([apierr.Describe]).
var (
	// ErrInvalidRequest: the request is malformed (HTTP 400,
	// invalid_argument). The error's message names the field.
	ErrInvalidRequest = apierr.New(pkg, apierr.CodeInvalidArgument, "invalid request")
	// ErrUnavailable: no agent could take the request — the chosen agent
	// and the default agent are all down (HTTP 503 with Retry-After). The
	// error is an *[UnavailableError].
	ErrUnavailable = apierr.New(pkg, apierr.CodeUnavailable, "no agent available")
)

// UnavailableError is the error of a request no agent could take. It
// matches [ErrUnavailable].
type UnavailableError struct {
	// Agents are the agents tried, in order, with the code of each
	// failure ("agent_unavailable", "agent_error", …).
	Agents []string
	Codes  []string
	// RetryAfter is when the caller may retry: when the first of the
	// tried agents' breakers half-opens, else RouterOptions.RetryAfter.
	// At least one second.
	RetryAfter time.Duration
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	b.WriteString("routing: no agent available")
	for i, a := range e.Agents {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", a, e.Codes[i])
	}
	return b.String()
}

// Is makes errors.Is(err, ErrUnavailable) hold.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Describe returns code unavailable and a message saying when to retry,
// in whole seconds rounded up; the agents tried are left out.
func (e *UnavailableError) Describe() (code, message string) {
	ra := e.RetryAfter
	if ra <= 0 {
		ra = DefaultRetryAfter
	}
	secs := max(1, int64((ra+time.Second-1)/time.Second))
	return apierr.CodeUnavailable, fmt.Sprintf("no agent available; retry in %d s", secs)
}

// Dispatcher sends a routed message to an agent: *delegation.Client
// implements it, so routed turns use the same transports, breakers, limits
// and records as delegations. A delegation that ran and failed is a record
// with a status other than completed, not an error.
type Dispatcher interface {
	Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error)
}

// RouterOptions configures a [Router]. A nil *RouterOptions, like the zero
// value of every field, means the documented default. New copies it.
type RouterOptions struct {
	// DisableClarification turns clarification off (gate rule 4): a
	// message below its agent's threshold then always falls back to the
	// default agent. False (the default) means clarification is enabled.
	DisableClarification bool

	// Breakers are the per-agent circuit breakers, used to skip an agent
	// whose breaker is open without a delegation, and to compute the
	// Retry-After of an [UnavailableError]. Pass the Set the dispatcher
	// uses. Nil means the router does not look at breakers (the
	// delegation client still refuses open ones, and Retry-After is
	// RetryAfter).
	Breakers *breaker.Set

	// DispatchTimeout bounds one dispatch (all its attempts). Zero means
	// the dispatcher's default (120 s for a delegation client).
	DispatchTimeout time.Duration

	// RetryAfter is the Retry-After of an [UnavailableError] when no open
	// breaker says better. Zero or negative means [DefaultRetryAfter].
	RetryAfter time.Duration

	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// Logger receives each decision at Debug level (request and session
	// ids, decision, reason, agents, confidence, and the input's length
	// and hash — never its text), and session bookkeeping failures that do
	// not fail the request at Warn. Nil means discard.
	Logger *slog.Logger

	// OnDecision, if set, is called once for every request that passed
	// validation, as Handle returns, for metrics and audit: with the
	// response, or with Handle's error and a Response holding only the
	// request id and what was decided before the failure (Decision empty
	// when nothing was). ctx is the request's. It runs on the caller's
	// goroutine without any lock held, so it must be quick and safe for
	// concurrent use. Nil means none. ctx carries the request as Handle
	// got it, its user completed by Identity ([RequestFrom]), so that a
	// hook may record what was asked whichever front-end asked it.
	OnDecision func(ctx context.Context, resp Response, err error)

	// Identity, if set, completes the user of every request that names
	// one (user_id, employee_id, display_name or slack_user_id), once per
	// request, before its session is looked up: the session is keyed on
	// the resolved identity and the agent gets its employee id and
	// display name. A resolver that does not know the user, fails or
	// takes longer than IdentityTimeout leaves the request as it came;
	// failures are logged at Warn and reported to OnIdentityFailure, and
	// never fail the request. Wrap a slow resolver in an [IdentityCache].
	// Nil means the request's identity is used as it is.
	Identity IdentityResolver

	// IdentityTimeout bounds one call of Identity. Zero or negative
	// means [DefaultIdentityTimeout].
	IdentityTimeout time.Duration

	// OnIdentityFailure, if set, is called for every request whose
	// identity Identity failed to resolve (an error other than
	// [ErrIdentityNotFound], a cached failure included), with that
	// error, for metrics. It runs on the caller's goroutine without any
	// lock held. Nil means none.
	OnIdentityFailure func(ctx context.Context, err error)

	// TracerProvider creates the spans of routed requests:
	// "routing.route" for each Handle call and, under it,
	// "routing.classify", "routing.gate" and "routing.dispatch" (whose
	// children are the dispatcher's, such as the delegation spans), with
	// the decision, reason, agents, confidence and the input's length —
	// never its text. Nil means the global provider
	// (otel.GetTracerProvider), a no-op unless the host installs one.
	TracerProvider trace.TracerProvider
}

// Router is the routing orchestrator: session bypass,
// classification, the confidence gate, clarification, dispatch with one
// fallback to the default agent, and the session lifecycle.
//
// A Router keeps its own view of the registered agents, fed by the
// registry's subscription, so routing reads no store. It is safe for
// concurrent use. Create it with [New] and stop it with [Router.Close].
type Router struct {
	classifier Classifier
	dispatcher Dispatcher
	sessions   *session.Manager
	breakers   *breaker.Set
	clarify    bool
	timeout    time.Duration
	retryAfter time.Duration
	now        func() time.Time
	log        *slog.Logger
	onDecision func(context.Context, Response, error)
	tracer     trace.Tracer

	identity          IdentityResolver
	identityTimeout   time.Duration
	onIdentityFailure func(context.Context, error)

	mu     sync.RWMutex
	agents map[string]routeAgent
	def    string // the default agent, "" if none

	cancel    func()
	closeOnce sync.Once
}

// New returns a Router that classifies with classifier, follows the
// agents of dir, dispatches through dispatcher and keeps conversations in
// sessions. classifier, dir and dispatcher are required; a nil sessions
// makes every request anonymous (no session is kept). opts may be nil.
func New(classifier Classifier, dir registry.Subscriber, dispatcher Dispatcher, sessions *session.Manager, opts *RouterOptions) (*Router, error) {
	switch {
	case classifier == nil:
		return nil, errors.New("routing: new router: nil classifier")
	case dir == nil:
		return nil, errors.New("routing: new router: nil directory")
	case dispatcher == nil:
		return nil, errors.New("routing: new router: nil dispatcher")
	}
	var o RouterOptions
	if opts != nil {
		o = *opts
	}
	r := &Router{
		classifier: classifier,
		dispatcher: dispatcher,
		sessions:   sessions,
		breakers:   o.Breakers,
		clarify:    !o.DisableClarification,
		timeout:    o.DispatchTimeout,
		retryAfter: o.RetryAfter,
		now:        o.Now,
		log:        o.Logger,
		onDecision: o.OnDecision,
		tracer:     tracing.Tracer(o.TracerProvider, tracerName),
		agents:     make(map[string]routeAgent),

		identity:          o.Identity,
		identityTimeout:   o.IdentityTimeout,
		onIdentityFailure: o.OnIdentityFailure,
	}
	if r.identityTimeout <= 0 {
		r.identityTimeout = DefaultIdentityTimeout
	}
	if r.retryAfter <= 0 {
		r.retryAfter = DefaultRetryAfter
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.mu.Lock()
	snapshot, cancel := dir.Subscribe(r.apply)
	for _, a := range snapshot {
		r.putLocked(a)
	}
	r.cancel = cancel
	r.mu.Unlock()
	return r, nil
}

// Close stops following the registry. The Router must not be used after.
// It is idempotent and returns nil.
func (r *Router) Close() error {
	r.closeOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
		}
	})
	return nil
}

// apply follows one registry change.
func (r *Router) apply(ev registry.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.Type {
	case registry.EventPut, registry.EventHeartbeat:
		r.putLocked(ev.Agent)
	case registry.EventDelete:
		delete(r.agents, ev.Agent.Name)
		if r.def == ev.Agent.Name {
			r.def = ""
		}
	}
}

// routeAgent is what a Router keeps of an agent: the fields the gate, the
// staleness check and the clarification question read, sharing their
// strings with the registry's record (which the registry never modifies).
// At 96 bytes it is stored in the map's own slots, where a copy of the
// whole registry.Agent took a separate 350-byte allocation per agent.
type routeAgent struct {
	displayName, description, clarificationContext string
	lastSeen                                       time.Time
	threshold                                      *float64
	ttlSeconds                                     int
	isDefault, clarificationRequired               bool
}

func (r *Router) putLocked(a registry.Agent) {
	r.agents[a.Name] = routeAgent{
		displayName:           a.DisplayName,
		description:           a.Description,
		clarificationContext:  a.ClarificationContext,
		lastSeen:              a.LastSeen,
		threshold:             a.ConfidenceThreshold,
		ttlSeconds:            a.TTLSeconds,
		isDefault:             a.IsDefault,
		clarificationRequired: a.ClarificationRequired,
	}
	switch {
	case a.IsDefault:
		r.def = a.Name
	case r.def == a.Name:
		r.def = ""
	}
}

// agent returns what the Router knows of the registered agent called
// name, as a registry.Agent holding only the fields routing reads (no
// endpoint, no auth: dispatching looks the agent up itself).
func (r *Router) agent(name string) (registry.Agent, bool) {
	r.mu.RLock()
	ra, ok := r.agents[name]
	r.mu.RUnlock()
	if !ok {
		return registry.Agent{}, false
	}
	return registry.Agent{
		Name:                  name,
		DisplayName:           ra.displayName,
		Description:           ra.description,
		ClarificationContext:  ra.clarificationContext,
		LastSeen:              ra.lastSeen,
		ConfidenceThreshold:   ra.threshold,
		TTLSeconds:            ra.ttlSeconds,
		IsDefault:             ra.isDefault,
		ClarificationRequired: ra.clarificationRequired,
	}, true
}

// defaultAgent returns the default agent's name, "" if none.
func (r *Router) defaultAgent() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.def
}

// Request is a message to route: the body of POST /v1/request,
// with the seed orchestrator's snake_case names.
type Request struct {
	// Input is the user's message: 1 to MaxInputRunes characters of
	// valid UTF-8, not blank.
	Input string `json:"input"`
	// UserID identifies the user; EmployeeID is used when it is empty.
	// Without either the request is anonymous: no session is kept.
	UserID     string `json:"user_id,omitempty"`
	EmployeeID string `json:"employee_id,omitempty"`
	// DisplayName is passed to the agent.
	DisplayName string `json:"display_name,omitempty"`
	// SlackUserID is the user's Slack member id (U… or W…, see
	// [IsSlackUserID]), for RouterOptions.Identity to resolve; it keys
	// the session when neither UserID nor EmployeeID is given.
	SlackUserID string `json:"slack_user_id,omitempty"`
	// SessionID, if given, must be a UUID. An identified user's active
	// session always wins over it (one active session per user); an
	// anonymous request gets it echoed back.
	SessionID string `json:"session_id,omitempty"`
	// Locale (a BCP 47 tag) is the language of a session bypass's
	// classification and of a clarification question when the classifier
	// detected none.
	Locale string `json:"locale,omitempty"`
	// EntryPoint names the client (the seed's "slack"); informational.
	EntryPoint string `json:"entry_point,omitempty"`
	// Metadata is passed to the agent (MCP handle_message metadata) and
	// stored on a new session; keys starting with
	// [ReservedMetadataPrefix] are stored but not passed.
	Metadata map[string]any `json:"metadata,omitempty"`
	// RequestID is the front-end's id for the request; empty means a new
	// UUID. Not part of the wire form.
	RequestID string `json:"-"`
}

func (req *Request) validate() error {
	n := utf8.RuneCountInString(req.Input)
	switch {
	case !utf8.ValidString(req.Input):
		return apierr.Errorf(ErrInvalidRequest, "input is not valid UTF-8")
	case n == 0:
		return apierr.Errorf(ErrInvalidRequest, "input is required")
	case n > MaxInputRunes:
		return apierr.Errorf(ErrInvalidRequest, "input is %d characters, more than %d", n, MaxInputRunes)
	case strings.TrimSpace(req.Input) == "":
		return apierr.Errorf(ErrInvalidRequest, "input is blank")
	case req.SessionID != "" && !IsSessionID(req.SessionID):
		return apierr.Errorf(ErrInvalidRequest, "session_id is not a UUID")
	case len(req.UserID) > session.MaxUserIDLen:
		return apierr.Errorf(ErrInvalidRequest, "user_id is longer than %d bytes", session.MaxUserIDLen)
	case len(req.EmployeeID) > session.MaxUserIDLen:
		return apierr.Errorf(ErrInvalidRequest, "employee_id is longer than %d bytes", session.MaxUserIDLen)
	case len(req.DisplayName) > MaxDisplayNameLen:
		return apierr.Errorf(ErrInvalidRequest, "display_name is longer than %d bytes", MaxDisplayNameLen)
	case len(req.SlackUserID) > MaxSlackUserIDLen:
		return apierr.Errorf(ErrInvalidRequest, "slack_user_id is longer than %d bytes", MaxSlackUserIDLen)
	case req.SlackUserID != "" && !IsSlackUserID(req.SlackUserID):
		return apierr.Errorf(ErrInvalidRequest, "slack_user_id is not a Slack user id (U or W, then upper-case letters and digits)")
	}
	return nil
}

// Response is the reply to a routed request, with the
// seed orchestrator's snake_case names.
type Response struct {
	RequestID string `json:"request_id"`
	// SessionID is the user's session; for an anonymous request, the
	// request's session_id echoed (often empty).
	SessionID string `json:"session_id"`
	// AgentID is the agent that answered; empty for clarify.
	AgentID string `json:"agent_id"`
	// Decision is route, clarify or fallback; Reason its code.
	Decision Action `json:"decision"`
	Reason   Reason `json:"reason"`
	// Confidence is the classifier's confidence in its top agent, whatever
	// the decision (1 for a session bypass, 0 when the classifier failed).
	Confidence float64 `json:"confidence"`
	// Response is the agent's answer, or the clarification question.
	Response         string `json:"response"`
	WorkflowComplete bool   `json:"workflow_complete"`
	// Classification is what the classifier said about the message.
	Classification ResponseClassification `json:"classification"`
	// ClarificationQuestion and SuggestedAgent are set for clarify.
	ClarificationQuestion string `json:"clarification_question,omitempty"`
	SuggestedAgent        string `json:"suggested_agent,omitempty"`
	// DelegationID is the id of the delegation record of the answering
	// dispatch; empty for clarify.
	DelegationID string `json:"delegation_id,omitempty"`
	DurationMs   int64  `json:"duration_ms"`
	// Routing repeats the decision in the seed's form, with the human
	// reason text.
	Routing RoutingInfo `json:"routing"`
}

// ResponseClassification is the classification object of a [Response].
type ResponseClassification struct {
	Intent     string         `json:"intent"`
	Confidence float64        `json:"confidence"`
	Language   string         `json:"language"`
	Entities   map[string]any `json:"entities"`
}

// RoutingInfo is the seed orchestrator's routing object.
type RoutingInfo struct {
	Action Action `json:"action"`
	Reason string `json:"reason"`
}

// turn is the state of one request through the pipeline.
type turn struct {
	req      Request // its identity fields resolved (RouterOptions.Identity)
	id       string
	user     string // "" for anonymous
	start    time.Time
	text     string // the text classified and dispatched
	resolved bool   // the message answered a clarification question
	cls      Classification
	dec      Decision
	// sess is the user's live active session found at step 2, if any.
	sess *session.Session
}

// Handle routes one message through the pipeline below and returns
// the reply. Errors: [ErrInvalidRequest] (400), [ErrNoDefaultAgent] (503
// no_default_agent), an *[UnavailableError] (503 with Retry-After), ctx's
// error, or a wrapped session store error (500).
//
// Pipeline: validate; resolve the user's identity (RouterOptions.Identity)
// and identify the user (user_id ?? employee_id ?? slack_user_id, none →
// anonymous, nothing stored); resolve a pending clarification, or bypass
// classification for a user with an active session whose agent is still
// registered (an agent gone closes the session abandoned); classify; gate;
// ask (clarify) or dispatch, falling back to the default agent once when
// the chosen agent's breaker is open or its dispatch fails; record the
// turns and workflow state on the session, closing it completed on
// workflow_complete and error when no agent could answer.
//
// Anonymous users cannot have a pending clarification: they get the
// question, and their next message is classified on its own.
func (r *Router) Handle(ctx context.Context, req Request) (resp Response, err error) {
	ctx, span := r.tracer.Start(ctx, spanRoute)
	var t *turn
	defer func() { endRoute(span, t, &resp, err) }()
	if err := req.validate(); err != nil {
		return Response{}, err
	}
	t = &turn{req: req, id: req.RequestID, start: r.now(), text: req.Input}
	if t.id == "" {
		t.id = uuid.NewString()
	}
	r.resolveIdentity(ctx, t)
	if r.sessions != nil {
		t.user = t.req.Identity().key()
	}
	defer func() {
		r.logDecision(t, resp, err)
		if r.onDecision != nil {
			r.onDecision(WithRequest(ctx, t.req), decided(t, resp, err), err)
		}
	}()

	// Step 2: pending clarification or session bypass.
	var pending *session.Clarification
	if t.user != "" {
		s, err := r.sessions.Active(ctx, t.user)
		switch {
		case err == nil:
			t.sess = &s
		case !errors.Is(err, session.ErrNotFound):
			return Response{}, fmt.Errorf("routing: session lookup: %w", err)
		}
		if t.sess != nil && t.sess.PendingClarification != nil {
			pending, err = r.sessions.TakeClarification(ctx, t.sess.ID)
			switch {
			case err == nil:
			case gone(err):
				t.sess = nil
			default:
				return Response{}, fmt.Errorf("routing: session clarification: %w", err)
			}
		}
		if t.sess != nil && pending == nil && t.sess.ActiveAgent != "" {
			if _, ok := r.agent(t.sess.ActiveAgent); ok {
				t.cls = Classification{
					AgentID:          t.sess.ActiveAgent,
					Confidence:       1,
					DetectedLanguage: localeLanguage(req.Locale),
					Entities:         map[string]any{},
				}
				t.dec = Decision{
					Action: ActionRoute,
					Reason: ReasonSession,
					Detail: "Active session bypass to " + quoteID(t.sess.ActiveAgent),
					Agent:  t.sess.ActiveAgent,
				}
				return r.dispatch(ctx, t)
			}
			// The session's agent is gone: close the session, reclassify.
			if _, err := r.sessions.CloseSession(ctx, t.sess.ID, session.StatusAbandoned); err != nil && !gone(err) {
				return Response{}, fmt.Errorf("routing: close session: %w", err)
			}
			t.sess = nil
		}
	}
	if pending != nil {
		t.resolved = true
		t.text = pending.OriginalInput + " " + req.Input
	}

	// Steps 3 and 4: classify and gate.
	if err := r.decide(ctx, t); err != nil {
		return Response{}, err
	}
	// Step 5: clarify.
	if t.dec.Action == ActionClarify {
		return r.ask(ctx, t)
	}
	// Steps 6 and 7: dispatch.
	return r.dispatch(ctx, t)
}

// decide classifies t.text and runs the gate, setting t.cls and t.dec.
func (r *Router) decide(ctx context.Context, t *turn) error {
	cctx, span := r.startClassify(ctx, t.text)
	cls, err := r.classifier.Classify(cctx, t.text)
	endClassify(span, &cls, err)
	def := r.defaultAgent()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrNotReady) {
			// Falling back would misroute every request of a mesh that
			// is still learning its agents: the caller retries instead.
			return err
		}
		t.cls = Classification{DetectedLanguage: localeLanguage(t.req.Locale), Entities: map[string]any{}}
		t.dec = Decision{
			Action: ActionFallback,
			Reason: ReasonClassifierError,
			Detail: "Classifier failed, falling back to default",
			Agent:  def,
		}
		if def == "" {
			return fmt.Errorf("%w (classifier: %w)", ErrNoDefaultAgent, err)
		}
		return nil
	}
	if cls.Entities == nil {
		cls.Entities = map[string]any{}
	}
	if cls.DetectedLanguage == "" {
		cls.DetectedLanguage = localeLanguage(t.req.Locale)
	}
	t.cls = cls
	in := GateInput{
		Classification: cls,
		Default:        def,
		// At most one clarification round per turn.
		Clarification: r.clarify && !t.resolved,
	}
	if a, ok := r.agent(cls.AgentID); ok && !a.StaleAt(r.now()) {
		in.Agent = &a
	}
	t.dec, err = r.gate(ctx, in)
	if t.resolved && t.dec.Action == ActionFallback {
		t.dec.Reason = ReasonClarificationUnresolved
		t.dec.Detail = "Still unclear after clarification: " + t.dec.Detail
	}
	return err
}

// ask answers with the clarification question and, for an
// identified user, stores the pending clarification and the exchange on
// the user's session.
func (r *Router) ask(ctx context.Context, t *turn) (Response, error) {
	a, _ := r.agent(t.dec.Agent)
	q := ClarificationQuestion(a, t.cls.DetectedLanguage)
	sid := t.req.SessionID
	if t.user != "" {
		s, err := r.openSession(ctx, t, "")
		if err != nil {
			return Response{}, err
		}
		sid = s.ID
		bg := context.WithoutCancel(ctx)
		if _, err := r.sessions.SetClarification(bg, sid, t.dec.Agent, t.text); err != nil {
			return Response{}, fmt.Errorf("routing: store clarification: %w", err)
		}
		if _, err := r.sessions.AppendTurns(bg, sid, session.Turn{Role: session.RoleAgent, Content: q}); err != nil {
			r.log.Warn("routing: append clarification turn failed", "request_id", t.id, "session_id", sid, "err", err)
		}
	}
	resp := r.reply(t, sid)
	resp.Response = q
	resp.ClarificationQuestion = q
	resp.SuggestedAgent = t.dec.Agent
	return resp, nil
}

// reply returns the parts of the response common to every decision.
func (r *Router) reply(t *turn, sid string) Response {
	return Response{
		RequestID:  t.id,
		SessionID:  sid,
		Decision:   t.dec.Action,
		Reason:     t.dec.Reason,
		Confidence: t.cls.Confidence,
		Classification: ResponseClassification{
			Intent:     t.cls.IntentSummary,
			Confidence: t.cls.Confidence,
			Language:   t.cls.DetectedLanguage,
			Entities:   t.cls.Entities,
		},
		DurationMs: r.now().Sub(t.start).Milliseconds(),
		Routing:    RoutingInfo{Action: t.dec.Action, Reason: t.dec.Detail},
	}
}

type requestKey struct{}

// WithRequest returns a copy of ctx carrying req, as the Router passes it
// to RouterOptions.OnDecision; a test of such a hook may call it.
func WithRequest(ctx context.Context, req Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

// RequestFrom returns the request ctx carries ([WithRequest]): in
// RouterOptions.OnDecision, the one being decided. ok is false when ctx
// carries none.
func RequestFrom(ctx context.Context) (req Request, ok bool) {
	req, ok = ctx.Value(requestKey{}).(Request)
	return req, ok
}

// decided is what OnDecision gets: resp, or for a failed request what was
// decided before it failed.
func decided(t *turn, resp Response, err error) Response {
	if err == nil {
		return resp
	}
	return Response{RequestID: t.id, Decision: t.dec.Action, Reason: t.dec.Reason, AgentID: t.dec.Agent, Confidence: t.cls.Confidence}
}

// logDecision logs the outcome of a request at Debug level, without the
// input's text.
func (r *Router) logDecision(t *turn, resp Response, err error) {
	ctx := context.Background()
	if !r.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	sum := sha256.Sum256([]byte(t.req.Input))
	attrs := []slog.Attr{
		slog.String("request_id", t.id),
		slog.Int("input_len", len(t.req.Input)),
		slog.String("input_sha256", hex.EncodeToString(sum[:8])),
		slog.Bool("anonymous", t.user == ""),
	}
	if err != nil {
		attrs = append(attrs, slog.String("decision", string(t.dec.Action)), slog.String("reason", string(t.dec.Reason)), slog.Any("err", err))
		r.log.LogAttrs(ctx, slog.LevelDebug, "routing: request failed", attrs...)
		return
	}
	attrs = append(attrs,
		slog.String("session_id", resp.SessionID),
		slog.String("decision", string(resp.Decision)),
		slog.String("reason", string(resp.Reason)),
		slog.String("agent", resp.AgentID),
		slog.String("classified_agent", t.cls.AgentID),
		slog.Float64("confidence", resp.Confidence),
		slog.Bool("ambiguous", t.cls.Ambiguous),
		slog.Bool("clarification_resolved", t.resolved),
		slog.Int64("duration_ms", resp.DurationMs),
	)
	if resp.SuggestedAgent != "" {
		attrs = append(attrs, slog.String("suggested_agent", resp.SuggestedAgent))
	}
	r.log.LogAttrs(ctx, slog.LevelDebug, "routing: decision", attrs...)
}

// gone reports whether a session error means the session is no longer
// there to update: closed, expired or deleted meanwhile.
func gone(err error) bool {
	return errors.Is(err, session.ErrNotFound) || errors.Is(err, session.ErrNotActive)
}

// localeLanguage returns the language of a locale tag, "en" when empty.
func localeLanguage(locale string) string {
	if l := baseLanguage(locale); l != "" {
		return l
	}
	return "en"
}

// IsSessionID reports whether s has the form of a session id: a UUID in
// its canonical 8-4-4-4-12 hex form (any version, either case). Braced,
// URN and unhyphenated forms, which uuid.Parse also takes, are not
// session ids.
func IsSessionID(s string) bool {
	return len(s) == 36 && uuid.Validate(s) == nil
}
