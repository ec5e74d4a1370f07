package activity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/principal"
	"github.com/agentmesh/agentmesh/routing"
)

// DefaultDecisions is how many decisions a [Routing] keeps when
// [RoutingOptions.Size] is zero.
const DefaultDecisions = 500

// DefaultMaxTextRunes is how much of a message's text a [Decision] keeps
// when [RoutingOptions.MaxTextRunes] is zero: with DefaultDecisions, at
// most 2 MB of text (the router takes messages of up to
// routing.MaxInputRunes, ten times more).
const DefaultMaxTextRunes = 1000

// Decision is one routing decision as the dashboard shows it: what the
// router decided for a message, and enough about the message to tell two
// apart (its length and a hash) without its text. Text is kept for the
// admin scope only: [Decision.Redacted] drops it.
type Decision struct {
	// Time is when the router returned.
	Time time.Time `json:"time"`
	// RequestID is the router's id of the request.
	RequestID string `json:"request_id"`
	// Decision is route, clarify or fallback; empty when the request
	// failed before the gate decided.
	Decision routing.Action `json:"decision"`
	// Reason is the router's machine-friendly code of the decision.
	Reason routing.Reason `json:"reason"`
	// Agent is the agent that answered (route, fallback) or the one the
	// clarification question is about (clarify).
	Agent string `json:"agent"`
	// Confidence is the classifier's confidence in its top agent.
	Confidence float64 `json:"confidence"`
	// InputLen is the length of the message in characters (runes); 0
	// when the message was not seen (the hook's ctx carried no
	// request: see routing.RequestFrom).
	InputLen int `json:"input_len"`
	// InputHash is the first 8 bytes of the message's SHA-256, in hex
	// (the input_sha256 of the router's debug log), empty when the
	// message was not seen.
	InputHash string `json:"input_sha256,omitempty"`
	// Error is the code of the error the request failed with
	// (unavailable, no_default_agent, …), empty when it succeeded.
	Error string `json:"error,omitempty"`
	// SessionID is the user's session, empty for an anonymous request.
	SessionID string `json:"session_id,omitempty"`
	// DurationMs is how long the request took.
	DurationMs int64 `json:"duration_ms"`
	// Principal is the principal of the caller that sent the message
	// ([principal.Default] for a caller without one).
	Principal string `json:"principal"`
	// Text is the message itself, for the admin scope only: its first
	// RoutingOptions.MaxTextRunes characters.
	Text string `json:"text,omitempty"`
	// TextTruncated is set when Text is only the start of the message.
	TextTruncated bool `json:"text_truncated,omitempty"`
}

// Redacted returns d without the message's text.
func (d Decision) Redacted() Decision {
	d.Text, d.TextTruncated = "", false
	return d
}

// RoutingOptions configures [NewRouting]. The zero value of every field
// means its default.
type RoutingOptions struct {
	// Size is how many decisions are kept, the newest replacing the
	// oldest. Zero or less means DefaultDecisions.
	Size int
	// MaxTextRunes is how many characters of a message's text are kept.
	// Zero or less means DefaultMaxTextRunes.
	MaxTextRunes int
	// Now is the clock stamping decisions. Nil means time.Now.
	Now func() time.Time
	// OnRecord, if set, is called with every decision recorded (its
	// text included), after the lock is released, for the host to
	// publish (without the text) to its event feed.
	OnRecord func(Decision)
}

// Routing keeps the most recent routing decisions of this process in a
// fixed ring. Feed it with [Routing.Observe] as a
// routing.RouterOptions.OnDecision hook (or [Routing.Record]); read it
// with [Routing.Recent].
//
// A Routing is safe for concurrent use. Use [NewRouting]; the zero value
// is not usable, and a nil *Routing records nothing and returns none.
type Routing struct {
	now      func() time.Time
	onRecord func(Decision)
	maxText  int

	mu   sync.Mutex
	ring []Decision // oldest first until full, then from next
	next int        // where the next decision goes, once full
}

// NewRouting returns an empty Routing configured by opts (nil means the
// defaults).
func NewRouting(opts *RoutingOptions) *Routing {
	var o RoutingOptions
	if opts != nil {
		o = *opts
	}
	if o.Size <= 0 {
		o.Size = DefaultDecisions
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxTextRunes <= 0 {
		o.MaxTextRunes = DefaultMaxTextRunes
	}
	return &Routing{now: o.Now, onRecord: o.OnRecord, maxText: o.MaxTextRunes, ring: make([]Decision, 0, o.Size)}
}

// Observe records the decision of one routed request: its signature is
// routing.RouterOptions.OnDecision's. The message comes from the request
// the router puts in ctx (routing.RequestFrom), the principal from ctx's
// caller (package principal).
func (r *Routing) Observe(ctx context.Context, resp routing.Response, err error) {
	if r == nil {
		return
	}
	d := Decision{
		RequestID:  resp.RequestID,
		Decision:   resp.Decision,
		Reason:     resp.Reason,
		Agent:      resp.AgentID,
		Confidence: resp.Confidence,
		SessionID:  resp.SessionID,
		DurationMs: resp.DurationMs,
		Principal:  principal.Default,
	}
	if resp.Decision == routing.ActionClarify && resp.SuggestedAgent != "" {
		d.Agent = resp.SuggestedAgent
	}
	if err != nil {
		d.Error = apierr.Code(err)
		if d.Error == "" {
			d.Error = apierr.CodeInternal
		}
	}
	if p, ok := principal.FromContext(ctx); ok {
		d.Principal = principal.Of(p.Name)
	}
	if req, ok := routing.RequestFrom(ctx); ok {
		text := req.Input
		d.InputLen = utf8.RuneCountInString(text)
		d.InputHash = InputHash(text)
		d.Text = text
		if d.InputLen > r.maxText {
			d.Text, d.TextTruncated = strings.Clone(prefix(text, r.maxText)), true
		}
	}
	r.Record(d)
}

// prefix returns the first n runes of s.
func prefix(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// InputHash is the hash a [Decision] shows of a message: the first 8
// bytes of its SHA-256, in hex.
func InputHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}

// Record keeps d, the oldest decision making room once the ring is full.
// A zero d.Time is stamped with the clock.
func (r *Routing) Record(d Decision) {
	if r == nil {
		return
	}
	if d.Time.IsZero() {
		d.Time = r.now()
	}
	r.mu.Lock()
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, d)
	} else {
		r.ring[r.next] = d
		r.next = (r.next + 1) % len(r.ring)
	}
	r.mu.Unlock()
	if r.onRecord != nil {
		r.onRecord(d)
	}
}

// Recent returns up to limit decisions, newest first, that keep returns
// true for (nil keeps all). Zero or less means every decision kept. The
// decisions carry their text: redact them ([Decision.Redacted]) for
// anyone but an admin.
func (r *Routing) Recent(limit int, keep func(Decision) bool) []Decision {
	if r == nil {
		return []Decision{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.ring)
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Decision, 0, limit)
	for i := n - 1; i >= 0 && len(out) < limit; i-- {
		d := r.ring[(r.next+i)%n]
		if keep == nil || keep(d) {
			out = append(out, d)
		}
	}
	return out
}

// Len returns how many decisions are kept.
func (r *Routing) Len() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ring)
}
