package routing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/retryafter"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// Defaults of [LLMOptions].
const (
	// DefaultLLMTimeout bounds one classification by the endpoint, all
	// attempts included.
	DefaultLLMTimeout = 10 * time.Second
	// DefaultLLMRetries is how many times a request answered 429 or 5xx
	// is sent again.
	DefaultLLMRetries = 2
	// DefaultLLMPromptBytes caps the agent catalogue in the system
	// message; past it, agents are described more briefly.
	DefaultLLMPromptBytes = 48 << 10
)

// maxLLMReplyBytes caps the body of a chat-completions reply.
const maxLLMReplyBytes = 1 << 20

// llmBackoff is the wait before the first retry when the endpoint sends no
// Retry-After; it doubles on each retry, plus up to 50% jitter.
const llmBackoff = 250 * time.Millisecond

// Errors of the [LLM] classifier.
var (
	// ErrLLMReply: the endpoint answered 2xx but the reply is not a valid
	// classification (not JSON, a field missing or of the wrong type, an
	// agent id that is not a candidate, a confidence outside [0, 1], a
	// refusal).
	ErrLLMReply = errors.New("routing: llm: invalid reply")
	// ErrLLMConfig: NewLLM was given unusable options.
	ErrLLMConfig = errors.New("routing: llm: invalid options")
)

// LLMStatusError is the error for a chat-completions reply whose HTTP
// status is not 2xx (after any retries). It never holds the reply body,
// which may quote the request or the API key.
type LLMStatusError struct {
	// StatusCode is the HTTP status of the last attempt.
	StatusCode int
	// Code is the error's "code" (or else "type") of an OpenAI-style error
	// body, when it is a short identifier such as "invalid_api_key";
	// otherwise "".
	Code string
	// Attempts is how many requests were sent.
	Attempts int
}

func (e *LLMStatusError) Error() string {
	s := "routing: llm endpoint answered HTTP " + strconv.Itoa(e.StatusCode)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Attempts > 1 {
		s += " after " + strconv.Itoa(e.Attempts) + " attempts"
	}
	return s
}

// LLMOptions configure an [LLM] classifier. BaseURL and Model are required;
// the zero value of every other field means the documented default.
//
// The options hold the API key: do not log them.
type LLMOptions struct {
	// BaseURL is the API root of an OpenAI-compatible endpoint, such as
	// "https://api.openai.com/v1" or "http://localhost:11434/v1"; requests
	// go to BaseURL + "/chat/completions" (a query string is kept).
	// Required.
	BaseURL string

	// Model is the model name sent with each request. Required.
	Model string

	// APIKey is sent as "Authorization: Bearer <APIKey>". Empty sends no
	// Authorization header (local servers). It is never logged and never
	// appears in errors.
	APIKey string

	// Timeout bounds one classification by the endpoint, every retry
	// included. ≤ 0 means [DefaultLLMTimeout] (10 s).
	Timeout time.Duration

	// MaxRetries is how many times a request answered 429 or 5xx is sent
	// again, after the endpoint's Retry-After (when it fits in Timeout) or
	// an exponential backoff. Nothing else is retried. 0 means
	// [DefaultLLMRetries]; negative means no retries.
	MaxRetries int

	// Fallback classifies a request when the endpoint fails for it: a
	// network error, a timeout, a non-2xx status after retries, or an
	// invalid reply. Only that request is affected: the next one tries the
	// endpoint again. It is normally the [Lexical] classifier following
	// the same registry. Nil means Classify returns the error instead.
	Fallback Classifier

	// Policy is the endpoint policy of the HTTP client
	// ([netguard.Policy.NewClient]). BaseURL must pass it at NewLLM and
	// every address dialled is checked against it. Nil, the default,
	// allows private addresses (the endpoint is chosen by the operator,
	// and local model servers are common) but still refuses the
	// always-refused ones such as cloud metadata addresses. A host that
	// refuses private addresses can allow its LLM endpoint by listing the
	// endpoint's host in the Policy's AllowHosts.
	Policy *netguard.Policy

	// Client configures the HTTP client built from Policy, e.g. a
	// TLSClientConfig that trusts a private CA. Nil means defaults.
	Client *netguard.ClientOptions

	// Temperature is sent as the request's "temperature" when set. Nil
	// (the default) leaves it out, since some models accept only their
	// own default.
	Temperature *float64

	// MaxPromptBytes caps the agent catalogue in the system message. When
	// the full catalogue (description, capabilities, three examples per
	// agent) is larger, agents are described more briefly, down to id and
	// display name; every candidate is always listed. ≤ 0 means
	// [DefaultLLMPromptBytes].
	MaxPromptBytes int

	// Now returns the current time; stale agents (registry.Agent.StaleAt)
	// are not candidates. Nil means time.Now.
	Now func() time.Time

	// Logger receives a Warn record when the fallback answers a request
	// (with the endpoint's error), an Info record when the endpoint turns
	// out not to support json_schema, and Debug records per
	// classification. It never receives the user's text or the API key.
	// Nil means discard.
	Logger *slog.Logger
}

// LLM is the "llm" classifier: it asks a model behind an
// OpenAI-compatible chat-completions endpoint which agent should handle a
// message.
//
// The system message describes the candidate agents (the registered,
// non-stale ones, the default agent marked as the choice for messages no
// other agent fits) as JSON data. The user message is a JSON object
// {"message": "<the text>"}: the user's text is only ever a JSON string
// value, never part of the instructions, and the system message says it is
// data to classify, not instructions. The reply is requested as structured
// output whose agent_id is an enum of the candidate ids
// (response_format json_schema, strict); an endpoint that refuses that
// with HTTP 400 is asked again with response_format json_object, and the
// LLM remembers to use json_object from then on. Either way the reply is
// validated: an agent id outside the candidates, a confidence outside
// [0, 1] or a missing field is an error (wrapping [ErrLLMReply]), never a
// route.
//
// On any failure, Classify returns the answer of [LLMOptions.Fallback] for
// that request, or the error when there is none; it does not stop using the
// endpoint. When the caller's ctx is done, Classify returns its error
// without consulting the fallback.
//
// Give it agents with [LLM.Reset], or keep it current from a registry with
// [LLM.Follow]. An LLM is safe for concurrent use and starts no
// goroutines. The zero LLM has no endpoint: Classify returns
// [ErrNoAgents] without agents and an error wrapping [ErrLLMConfig] with
// them; build one with [NewLLM].
type LLM struct {
	opts      LLMOptions
	url       string
	client    *http.Client
	userAgent string
	backoff   time.Duration // first retry wait without Retry-After

	// jsonObject is set once the endpoint refused json_schema and
	// accepted json_object.
	jsonObject atomic.Bool

	mu      sync.Mutex
	agents  map[string]registry.Agent
	gen     uint64 // bumped by every change to the agents' text
	prompt  *llmPrompt
	cancels []func()
	closed  bool
}

// NewLLM returns an LLM classifier for the endpoint in opts. It returns an
// error wrapping [ErrLLMConfig] when opts is nil, BaseURL or Model is
// missing, or BaseURL is not an http(s) URL, and one wrapping
// [netguard.ErrNotAllowed] when the Policy refuses BaseURL. The options
// are copied. The classifier has no agents until [LLM.Reset] or
// [LLM.Follow].
func NewLLM(opts *LLMOptions) (*LLM, error) {
	if opts == nil {
		return nil, fmt.Errorf("%w: BaseURL and Model are required", ErrLLMConfig)
	}
	o := *opts
	if o.Temperature != nil {
		t := *o.Temperature
		o.Temperature = &t
	}
	if strings.TrimSpace(o.Model) == "" {
		return nil, fmt.Errorf("%w: Model is required", ErrLLMConfig)
	}
	if o.BaseURL == "" {
		return nil, fmt.Errorf("%w: BaseURL is required", ErrLLMConfig)
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: BaseURL must be an http or https URL", ErrLLMConfig)
	}
	if err := o.Policy.CheckURL(o.BaseURL); err != nil {
		return nil, fmt.Errorf("routing: llm BaseURL: %w", err)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/chat/completions"
	u.RawPath = ""
	if strings.ContainsAny(o.APIKey, "\r\n") {
		return nil, fmt.Errorf("%w: APIKey contains a line break", ErrLLMConfig)
	}
	return &LLM{
		opts:      o,
		url:       u.String(),
		client:    o.Policy.NewClient(o.Client),
		userAgent: "agentmesh/" + buildinfo.Version(),
		backoff:   llmBackoff,
	}, nil
}

func (l *LLM) now() time.Time {
	if l.opts.Now != nil {
		return l.opts.Now()
	}
	return time.Now()
}

func (l *LLM) logger() *slog.Logger {
	if l.opts.Logger != nil {
		return l.opts.Logger
	}
	return llmDiscardLogger
}

var llmDiscardLogger = slog.New(slog.DiscardHandler)

// Reset replaces the classifier's agents. It returns [ErrClosed] after
// [LLM.Close].
func (l *LLM) Reset(agents []registry.Agent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.agents = make(map[string]registry.Agent, len(agents))
	for _, a := range agents {
		l.agents[a.Name] = a.Redacted()
	}
	l.gen++
	return nil
}

// Apply applies one registry change to the classifier's agents. Changes
// take effect with the next Classify.
func (l *LLM) Apply(ev registry.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.agents == nil {
		l.agents = make(map[string]registry.Agent)
	}
	a := ev.Agent
	switch ev.Type {
	case registry.EventHeartbeat:
		if old, ok := l.agents[a.Name]; ok {
			old.LastSeen, old.TTLSeconds = a.LastSeen, a.TTLSeconds
			l.agents[a.Name] = old
		}
	case registry.EventPut:
		l.agents[a.Name] = a.RedactedView()
		l.gen++
	case registry.EventDelete:
		if _, ok := l.agents[a.Name]; ok {
			delete(l.agents, a.Name)
			l.gen++
		}
	}
}

// Follow makes the classifier track src's agents: it takes src's current
// agents before returning, then applies every change. stop ends the
// following; it is idempotent. [LLM.Close] also ends it.
func (l *LLM) Follow(src registry.Subscriber) (stop func()) {
	stop, err := registry.Follow(src, l.Reset, l.Apply)
	if err != nil {
		return stop // closed
	}
	return keepFollowing(&l.mu, &l.closed, &l.cancels, stop)
}

// Close ends every [LLM.Follow]; Classify then returns [ErrClosed]. It does
// not close the Fallback. Close is idempotent and always returns nil.
func (l *LLM) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	cancels := l.cancels
	l.cancels, l.agents, l.prompt = nil, nil, nil
	l.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	if l.client != nil {
		l.client.CloseIdleConnections()
	}
	return nil
}

// Classify asks the endpoint which candidate agent should handle text. On
// failure it returns the Fallback's classification of text, or the error
// when there is no Fallback (the fallback's error is joined to it when the
// fallback fails too). It returns ctx's error as soon as ctx is done, and
// [ErrClosed] after Close.
func (l *LLM) Classify(ctx context.Context, text string) (Classification, error) {
	if err := ctx.Err(); err != nil {
		return Classification{}, err
	}
	start := time.Now()
	c, info, err := l.classify(ctx, text)
	if err == nil {
		l.logger().Debug("routing: llm classified", "agent", c.AgentID, "confidence", c.Confidence,
			"attempts", info.attempts, "format", info.format, "duration", time.Since(start))
		return c, nil
	}
	if errors.Is(err, ErrClosed) || ctx.Err() != nil || l.opts.Fallback == nil {
		return Classification{}, err
	}
	c, fbErr := l.opts.Fallback.Classify(ctx, text)
	if fbErr != nil {
		return Classification{}, fmt.Errorf("%w (fallback: %w)", err, fbErr)
	}
	l.logger().Warn("routing: llm classification failed; the fallback classified this request",
		"err", err, "attempts", info.attempts, "duration", time.Since(start))
	return c, nil
}

// llmCallInfo describes one classification by the endpoint, for logs.
type llmCallInfo struct {
	attempts int
	format   string
}

// classify is Classify without the fallback.
func (l *LLM) classify(ctx context.Context, text string) (Classification, llmCallInfo, error) {
	var info llmCallInfo
	p, err := l.currentPrompt()
	if err != nil {
		return Classification{}, info, err
	}
	if l.client == nil {
		return Classification{}, info, fmt.Errorf("%w: not built with NewLLM", ErrLLMConfig)
	}
	timeout := l.opts.Timeout
	if timeout <= 0 {
		timeout = DefaultLLMTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	user, err := llmUserMessage(text)
	if err != nil {
		return Classification{}, info, err
	}
	retries := l.opts.MaxRetries
	if retries == 0 {
		retries = DefaultLLMRetries
	}
	schema := !l.jsonObject.Load()
	downgraded := false
	for retried := 0; ; {
		info.format = "json_schema"
		if !schema {
			info.format = "json_object"
		}
		body, err := l.requestBody(p, user, schema)
		if err != nil {
			return Classification{}, info, err
		}
		info.attempts++
		res, err := l.post(ctx, body)
		if err != nil {
			return Classification{}, info, err
		}
		switch {
		case res.status >= 200 && res.status < 300:
			if downgraded && l.jsonObject.CompareAndSwap(false, true) {
				l.logger().Info("routing: llm endpoint refused json_schema output; using json_object from now on")
			}
			c, err := parseLLMReply(res.body, p.ids)
			return c, info, err
		case res.status == http.StatusBadRequest && schema:
			// Possibly an endpoint without structured outputs: ask again
			// with json_object, and remember only if that is accepted.
			schema, downgraded = false, true
			continue
		case res.status == http.StatusTooManyRequests || res.status >= 500:
			if retried >= retries {
				return Classification{}, info, res.statusError(info.attempts)
			}
			wait := res.retryAfter
			if wait <= 0 {
				wait = l.backoff << retried
				wait += rand.N(wait/2 + 1)
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return Classification{}, info, res.statusError(info.attempts)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return Classification{}, info, fmt.Errorf("routing: llm request: %w", ctx.Err())
			case <-t.C:
			}
			retried++
		default:
			return Classification{}, info, res.statusError(info.attempts)
		}
	}
}

// llmUserMessage is the user message: the text as the JSON string value of
// "message", and nothing else.
func llmUserMessage(text string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Message string `json:"message"`
	}{text}); err != nil {
		return "", fmt.Errorf("routing: llm: encoding the message: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// llmRequest is the chat-completions request body.
type llmRequest struct {
	Model          string          `json:"model"`
	Messages       []llmMessage    `json:"messages"`
	ResponseFormat json.RawMessage `json:"response_format"`
	Temperature    *float64        `json:"temperature,omitempty"`
}

type llmMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

var jsonObjectFormat = json.RawMessage(`{"type":"json_object"}`)

func (l *LLM) requestBody(p *llmPrompt, user string, schema bool) ([]byte, error) {
	format := jsonObjectFormat
	if schema {
		format = p.schemaFormat
	}
	b, err := json.Marshal(llmRequest{
		Model: l.opts.Model,
		Messages: []llmMessage{
			{Role: "system", Content: p.system},
			{Role: "user", Content: user},
		},
		ResponseFormat: format,
		Temperature:    l.opts.Temperature,
	})
	if err != nil {
		return nil, fmt.Errorf("routing: llm: encoding the request: %w", err)
	}
	return b, nil
}

// llmResult is one HTTP exchange with the endpoint.
type llmResult struct {
	status     int
	code       string
	retryAfter time.Duration
	body       []byte // 2xx only
}

func (r *llmResult) statusError(attempts int) error {
	return &LLMStatusError{StatusCode: r.status, Code: r.code, Attempts: attempts}
}

// post sends one request. An error means no usable HTTP reply (network,
// timeout, oversized body); statuses are left to the caller.
func (l *LLM) post(ctx context.Context, body []byte) (*llmResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("routing: llm request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", l.userAgent)
	if l.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.opts.APIKey)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("routing: llm request: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLLMReplyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("routing: llm reply: %w", err)
	}
	res := &llmResult{status: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if len(data) > maxLLMReplyBytes {
			return nil, fmt.Errorf("%w: body over %d bytes", ErrLLMReply, maxLLMReplyBytes)
		}
		res.body = data
		return res, nil
	}
	res.code = llmErrorCode(data)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		res.retryAfter = llmRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return res, nil
}

// llmCodeRE matches the error codes worth reporting: short identifiers,
// never free text that could quote the request or the key.
var llmCodeRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// llmErrorCode returns the "code" (else "type") of an OpenAI-style error
// body {"error": {"code": …, "type": …}} when it is a short identifier.
func llmErrorCode(body []byte) string {
	var e struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	for _, c := range []any{e.Error.Code, e.Error.Type} {
		var s string
		switch v := c.(type) {
		case string:
			s = v
		case float64:
			s = strconv.FormatFloat(v, 'f', -1, 64)
		}
		if llmCodeRE.MatchString(s) {
			return s
		}
	}
	return ""
}

// maxLLMRetryAfter caps a Retry-After header; the call's deadline caps it
// further.
const maxLLMRetryAfter = time.Hour

// llmRetryAfter parses a Retry-After header at now, capped at
// maxLLMRetryAfter; see [retryafter.Parse].
func llmRetryAfter(v string, now time.Time) time.Duration {
	return retryafter.Parse(v, now, maxLLMRetryAfter)
}
