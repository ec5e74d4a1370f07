package a2aserver

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Metadata keys a client may set on a message (or on the SendMessage
// request; the message's win) to choose a skill and shape the call. Every
// other metadata key of a delegation is its context (see the package
// documentation); keys with the prefix agentmesh/ that are not listed
// here are refused.
const (
	// MetaSkill picks the skill: [a2acard.SkillDelegate] (the default) or
	// [a2acard.SkillDiscover].
	MetaSkill = "skill"
	// MetaTarget names the agent to delegate to, instead of the best
	// discovery match for the text.
	MetaTarget = "agentmesh/target"
	// MetaQuery is the discovery query that picks the target, when it
	// should differ from the text (which stays the task).
	MetaQuery = "agentmesh/query"
	// MetaSourceAgent names the delegating agent, when the caller is a
	// registered agent: the task cannot come back to it.
	MetaSourceAgent = "agentmesh/sourceAgent"
	// MetaTimeoutMs bounds the delegation, in milliseconds (default
	// 120000, at most 3600000).
	MetaTimeoutMs = "agentmesh/timeoutMs"
	// MetaLimit is the maximum number of discovery results (default 10,
	// at most 100).
	MetaLimit = "agentmesh/limit"
)

// metaPrefix is the prefix of the metadata keys of this package.
const metaPrefix = "agentmesh/"

// requestKeys are the metadata keys a client may set, besides the context.
var requestKeys = map[string]bool{
	MetaSkill: true, MetaTarget: true, MetaQuery: true, MetaSourceAgent: true, MetaTimeoutMs: true, MetaLimit: true,
}

// Metadata keys the server sets on tasks (and on their status messages
// and artifacts).
const (
	// MetaDelegationID is the id of the delegation record, readable with
	// GET /v1/delegations/{id} on any replica.
	MetaDelegationID = "agentmesh/delegationId"
	// MetaTargetAgent is the agent the task was delegated to; a reply to
	// an input-required task goes to it.
	MetaTargetAgent = "agentmesh/targetAgent"
	// MetaCode is the error code of a failed task, one of the HTTP API's
	// codes (docs/API.md#errors).
	MetaCode = "agentmesh/code"
)

// intent is what a SendMessage asks for, read from its message.
type intent struct {
	skill   string // a2acard.SkillDelegate or a2acard.SkillDiscover
	text    string // the task, or the discovery query
	target  string
	query   string
	context map[string]any
	source  string
	timeout time.Duration
	limit   int
	// reply is set when the message continues a task (its taskId is
	// set): the answer to an input-required question.
	reply bool
}

// parseIntent reads the intent of a SendMessage: the skill and options
// from the metadata (message over request), the delegation context from
// the rest of the metadata, the text from the message's text parts. It
// refuses, with an invalid params error whose text says
// what to fix, anything it cannot honour rather than ignoring it.
func parseIntent(msg *a2a.Message, reqMeta map[string]any) (intent, error) {
	if msg == nil {
		return intent{}, invalidParams("the request has no message")
	}
	var in intent
	text, err := messageText(msg)
	if err != nil {
		return intent{}, err
	}
	in.text = text
	in.reply = msg.TaskID != ""

	meta := make(map[string]any, len(reqMeta)+len(msg.Metadata))
	for k, v := range reqMeta {
		meta[k] = v
	}
	for k, v := range msg.Metadata {
		meta[k] = v
	}

	in.skill = a2acard.SkillDelegate
	if v, ok := meta[MetaSkill]; ok {
		s, ok := v.(string)
		switch {
		case !ok:
			return intent{}, invalidParams("metadata %s: must be a string, %s or %s", MetaSkill, a2acard.SkillDelegate, a2acard.SkillDiscover)
		case s == a2acard.SkillDelegate, s == "":
		case s == a2acard.SkillDiscover:
			in.skill = s
		default:
			return intent{}, invalidParams("metadata %s: unknown skill %q; the mesh's skills are %s and %s", MetaSkill, s, a2acard.SkillDelegate, a2acard.SkillDiscover)
		}
	}
	if in.reply && in.skill != a2acard.SkillDelegate {
		return intent{}, invalidParams("a message that continues a task (taskId set) answers the agent's question: it cannot use the %s skill", in.skill)
	}

	if in.target, err = metaString(meta, MetaTarget); err != nil {
		return intent{}, err
	}
	if in.query, err = metaString(meta, MetaQuery); err != nil {
		return intent{}, err
	}
	if in.source, err = metaString(meta, MetaSourceAgent); err != nil {
		return intent{}, err
	}
	for k, v := range meta {
		switch {
		case requestKeys[k]:
		case strings.HasPrefix(k, metaPrefix):
			return intent{}, invalidParams("metadata %s: unknown key; the keys of the mesh are %s, %s, %s, %s and %s (other keys are the delegation context)",
				k, MetaTarget, MetaQuery, MetaSourceAgent, MetaTimeoutMs, MetaLimit)
		default:
			if in.context == nil {
				in.context = make(map[string]any)
			}
			in.context[k] = v
		}
	}
	maxMs := delegation.MaxTimeout.Milliseconds()
	ms, err := metaInt(meta, MetaTimeoutMs, 1, maxMs)
	if err != nil {
		return intent{}, err
	}
	in.timeout = time.Duration(ms) * time.Millisecond
	limit, err := metaInt(meta, MetaLimit, 1, discovery.MaxLimit)
	if err != nil {
		return intent{}, err
	}
	in.limit = int(limit)

	if in.skill == a2acard.SkillDiscover {
		in.context = nil // the context is a delegation's
		for _, k := range []string{MetaTarget, MetaQuery, MetaSourceAgent, MetaTimeoutMs} {
			if _, ok := meta[k]; ok {
				return intent{}, invalidParams("metadata %s: applies to the %s skill only (for %s, the text is the query)", k, a2acard.SkillDelegate, a2acard.SkillDiscover)
			}
		}
		return in, nil
	}
	if _, ok := meta[MetaLimit]; ok {
		return intent{}, invalidParams("metadata %s: applies to the %s skill only", MetaLimit, a2acard.SkillDiscover)
	}
	switch {
	case in.target != "" && in.query != "":
		return intent{}, invalidParams("metadata: give %s or %s, not both", MetaTarget, MetaQuery)
	case in.reply && (in.target != "" || in.query != ""):
		return intent{}, invalidParams("metadata %s and %s do not apply to a message that continues a task: the reply goes to the agent that asked", MetaTarget, MetaQuery)
	}
	return in, nil
}

// messageText joins the text parts of msg with newlines. Other parts are
// refused: the mesh's skills take text (the card's input mode is
// text/plain).
func messageText(msg *a2a.Message) (string, error) {
	if len(msg.Parts) == 0 {
		return "", invalidParams("the message has no parts: send the task (or, for %s, the query) as a text part", a2acard.SkillDiscover)
	}
	texts := make([]string, 0, len(msg.Parts))
	for i, p := range msg.Parts {
		if p == nil {
			return "", invalidParams("message part %d is empty", i+1)
		}
		t, ok := p.Content.(a2a.Text)
		if !ok {
			return "", invalidParams("message part %d is %s: only text parts are accepted (the task, or for %s the query, is text)", i+1, partKind(p), a2acard.SkillDiscover)
		}
		texts = append(texts, string(t))
	}
	text := strings.Join(texts, "\n")
	if strings.TrimSpace(text) == "" {
		return "", invalidParams("the message text is empty: it is the task to delegate (or, for %s, the query)", a2acard.SkillDiscover)
	}
	return text, nil
}

func partKind(p *a2a.Part) string {
	switch p.Content.(type) {
	case a2a.Data:
		return "a data part"
	case a2a.Raw:
		return "a raw (file) part"
	case a2a.URL:
		return "a file URL part"
	}
	return "not a text part"
}

// metaString reads an optional string; "" means absent.
func metaString(meta map[string]any, key string) (string, error) {
	v, ok := meta[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalidParams("metadata %s: must be a string", key)
	}
	return strings.TrimSpace(s), nil
}

// metaInt reads an optional integer in [lo, hi]; 0 means absent.
func metaInt(meta map[string]any, key string, lo, hi int64) (int64, error) {
	v, ok := meta[key]
	if !ok || v == nil {
		return 0, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, invalidParams("metadata %s: must be an integer from %d to %d", key, lo, hi)
		}
	default:
		return 0, invalidParams("metadata %s: must be an integer from %d to %d", key, lo, hi)
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, invalidParams("metadata %s: must be an integer from %d to %d", key, lo, hi)
	}
	return int64(f), nil
}

// invalidParams is a JSON-RPC invalid params error whose message starts
// with the error code (docs/API.md#errors) and whose details carry it.
func invalidParams(format string, args ...any) error {
	return codedError(a2a.ErrInvalidParams, apierr.CodeInvalidArgument, fmt.Sprintf(format, args...))
}

// codedError is an A2A error of kind (which picks the JSON-RPC code) whose
// message is "<code>: <msg>" and whose details are {"code": code}.
func codedError(kind error, code, msg string) error {
	return a2a.NewError(kind, code+": "+msg).WithDetails(map[string]any{"code": code})
}
