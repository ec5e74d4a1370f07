package agentkit

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/delegation"
)

// DefaultAsyncTimeout is how long an async handler may run when
// Options.AsyncTimeout is not set: the mesh's default wait for a callback.
const DefaultAsyncTimeout = time.Hour

// maxTaskBody caps a task's body: a task of at most 1 MiB, and a session
// of turns of at most 10,000 characters each.
const maxTaskBody = 8 << 20

// maxErrorText caps the error text of a failed task, in the 500 reply or
// the callback (the mesh keeps the first KiB of a reply, 4 KiB of a
// callback's error).
const maxErrorText = 1 << 10

// ErrShutdown is the error of [Agent.Shutdown] and [Agent.Run] when the
// agent was already shut down.
var ErrShutdown = errors.New("agentkit: the agent is shut down")

// Options configures an [Agent]. A nil *Options, like the zero value of
// every field, means the documented default; [New] copies the options.
type Options struct {
	// Token, if set, is the bearer token the mesh must send: a request
	// without "Authorization: Bearer <Token>" is refused with 401 before
	// the handler runs. [Agent.Register] and [Agent.Run] register it as
	// the agent's auth ({"type": "bearer", "token": Token}), so the mesh
	// sends it. Empty accepts every request: only for an agent that only
	// the mesh can reach.
	Token string

	// Async makes the agent answer each task with 202 at once, run the
	// handler in the background and POST its outcome to the task's
	// callbackUrl (docs/AGENTS.md, "Async agents"). A task without a
	// callback URL is answered synchronously. False answers every task
	// in the reply (200, or 500 when the handler fails).
	Async bool

	// AsyncTimeout bounds an async handler's run (its ctx). Zero or
	// less means DefaultAsyncTimeout.
	AsyncTimeout time.Duration

	// HTTPClient posts the callbacks of async tasks. Nil means a client
	// of the agent's own with a 30 s timeout per attempt.
	HTTPClient *http.Client

	// ShutdownTimeout is how long [Agent.Run] waits, once its ctx is
	// done, for the tasks in flight and the unregistration. Zero or less
	// means 30 s.
	ShutdownTimeout time.Duration

	// Logger receives the agent's lifecycle events (registered,
	// unregistered) and the errors it cannot return (a failed heartbeat
	// or callback). Nil discards them.
	Logger *slog.Logger
}

// Agent is an agent of the http protocol: an [http.Handler] that answers
// the mesh's POST of a task by running a [Handler], synchronously or,
// with Options.Async, by accepting the task and calling back.
// [Agent.Register] keeps it registered with a mesh; [Agent.Run] does
// everything: listener, registration, heartbeats and a clean shutdown.
//
// An Agent is safe for concurrent use. Use [New]: a nil or zero Agent
// answers every request 503.
type Agent struct {
	h               Handler
	tokenSum        [32]byte // SHA-256 of the token
	token           string
	async           bool
	asyncTimeout    time.Duration
	shutdownTimeout time.Duration
	hc              *http.Client
	log             *slog.Logger

	mu       sync.Mutex
	closed   bool
	inflight map[string]bool // delegation ids of the async tasks running
	jobs     sync.WaitGroup
	abort    chan struct{} // closed when Shutdown stops waiting
	stopOnce sync.Once
}

// New returns an agent that answers tasks with h. A nil h is an error.
func New(h Handler, opts *Options) (*Agent, error) {
	if h == nil {
		return nil, errors.New("agentkit: New: nil Handler")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if strings.ContainsFunc(o.Token, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, errors.New("agentkit: New: the token has control characters")
	}
	a := &Agent{
		h:               h,
		token:           o.Token,
		async:           o.Async,
		asyncTimeout:    o.AsyncTimeout,
		shutdownTimeout: o.ShutdownTimeout,
		hc:              o.HTTPClient,
		log:             o.Logger,
		inflight:        make(map[string]bool),
		abort:           make(chan struct{}),
	}
	if a.token != "" {
		a.tokenSum = sha256.Sum256([]byte(a.token))
	}
	if a.asyncTimeout <= 0 {
		a.asyncTimeout = DefaultAsyncTimeout
	}
	if a.shutdownTimeout <= 0 {
		a.shutdownTimeout = 30 * time.Second
	}
	if a.hc == nil {
		a.hc = &http.Client{Timeout: 30 * time.Second}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// ServeHTTP answers a POST of a task, on any path: mount it at the path
// of the agent's endpoint. Other methods get 405, a request without the
// token 401, a body that is not a task 400, and every request once the
// agent is shutting down 503 (the mesh retries it).
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a == nil || a.h == nil {
		http.Error(w, "agent not initialised: use agentkit.New", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a task", http.StatusMethodNotAllowed)
		return
	}
	if !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent"`)
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	var t Task
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTaskBody)).Decode(&t); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, "the task is too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "the body is not a task (a JSON object)", http.StatusBadRequest)
		return
	}
	if a.async && callbackOK(t.CallbackURL) {
		a.accept(w, t)
		return
	}
	if a.isClosed() {
		shuttingDown(w)
		return
	}
	reply, err := a.call(r.Context(), t)
	if err != nil {
		http.Error(w, errorText(err), http.StatusInternalServerError)
		return
	}
	body, err := json.Marshal(syncBody{Result: reply.Result, WorkflowComplete: reply.WorkflowComplete, WorkflowState: reply.WorkflowState})
	if err != nil {
		http.Error(w, "the reply does not encode as JSON", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// authorized reports whether r carries the agent's token as a bearer
// token (compared in constant time), or the agent has none.
func (a *Agent) authorized(r *http.Request) bool {
	if a.token == "" {
		return true
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	got := sha256.Sum256([]byte(token))
	return strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare(got[:], a.tokenSum[:]) == 1
}

func (a *Agent) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

func shuttingDown(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, "the agent is shutting down", http.StatusServiceUnavailable)
}

// callbackOK reports whether u is an absolute http or https URL.
func callbackOK(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// accept answers 202 and runs t in the background. A delegation already
// running (the mesh, or a proxy, sent it again) is acknowledged again
// without a second run.
func (a *Agent) accept(w http.ResponseWriter, t Task) {
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		shuttingDown(w)
		return
	case t.DelegationID != "" && a.inflight[t.DelegationID]:
		a.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if t.DelegationID != "" {
		a.inflight[t.DelegationID] = true
	}
	a.jobs.Add(1)
	a.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	go a.run(t)
}

// run is the background run of an accepted task: the handler, then the
// callback with its outcome.
func (a *Agent) run(t Task) {
	defer func() {
		a.mu.Lock()
		delete(a.inflight, t.DelegationID)
		a.mu.Unlock()
		a.jobs.Done()
	}()
	ctx, cancel := a.background(a.asyncTimeout)
	defer cancel()
	reply, err := a.call(ctx, t)
	out := delegation.Outcome{Status: delegation.StatusCompleted}
	if err == nil {
		out.Result, err = json.Marshal(reply.Result)
		if err != nil {
			err = errors.New("the reply does not encode as JSON")
		}
		out.WorkflowComplete, out.WorkflowState = reply.WorkflowComplete, reply.WorkflowState
	}
	if err != nil {
		out = delegation.Outcome{Status: delegation.StatusFailed, Error: errorText(err)}
	}
	if err := a.callback(t.CallbackURL, out); err != nil {
		a.log.Warn("agentkit: the callback failed", "delegation_id", t.DelegationID, "err", err)
	}
}

// background returns the context of an async task's work: it ends after
// d, or when Shutdown stops waiting (abort).
func (a *Agent) background(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-a.abort:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// call runs the handler, turning a panic into an error.
func (a *Agent) call(ctx context.Context, t Task) (r Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("agentkit: the handler panicked", "delegation_id", t.DelegationID,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("the agent's handler panicked: %v", p)
		}
	}()
	return a.h(ctx, t)
}

// syncBody is the body of a 200 reply: the result, and the conversation
// fields next to it.
type syncBody struct {
	Result           any            `json:"result"`
	WorkflowComplete bool           `json:"workflowComplete,omitempty"`
	WorkflowState    map[string]any `json:"workflowState,omitempty"`
}

// errorText is err's text for the mesh: valid UTF-8, at most
// maxErrorText bytes, never empty.
func errorText(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if s == "" {
		s = "the agent failed"
	}
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// Shutdown stops the agent taking tasks (they get 503, which the mesh
// retries) and waits for the async tasks in flight to finish and call
// back. When ctx ends first, it cancels their contexts and returns
// ctx's error without waiting further: a handler that ignores its ctx is
// left running. Sync tasks are the HTTP server's: shut it down too.
// Shutdown may be called more than once, and concurrently; a call after
// the first waits again for the tasks left.
func (a *Agent) Shutdown(ctx context.Context) error {
	if a == nil || a.h == nil {
		return nil
	}
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	done := make(chan struct{})
	go func() {
		a.jobs.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		a.stopOnce.Do(func() { close(a.abort) })
		return fmt.Errorf("agentkit: shutdown: async tasks still running: %w", ctx.Err())
	}
}
