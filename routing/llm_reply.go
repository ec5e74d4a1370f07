package routing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Limits applied to a parsed reply.
const (
	llmMaxIntentRunes    = 300
	llmMaxEntities       = 32
	llmMaxEntityName     = 64
	llmMaxEntityValueLen = 500
)

// parseLLMReply parses a chat-completions reply body and validates the
// classification in its first choice against the candidate ids. Every
// error wraps [ErrLLMReply]; none quotes the reply (which may echo the
// user's text).
func parseLLMReply(body []byte, ids map[string]struct{}) (Classification, error) {
	var r struct {
		Choices []struct {
			Message struct {
				Content json.RawMessage `json:"content"`
				Refusal json.RawMessage `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Classification{}, fmt.Errorf("%w: not a chat completion (%s)", ErrLLMReply, jsonErrKind(err))
	}
	if len(r.Choices) == 0 {
		return Classification{}, fmt.Errorf("%w: no choices", ErrLLMReply)
	}
	m := r.Choices[0].Message
	if s, ok := rawString(m.Refusal); ok && s != "" {
		return Classification{}, fmt.Errorf("%w: the model refused", ErrLLMReply)
	}
	content, ok := rawString(m.Content)
	if !ok {
		return Classification{}, fmt.Errorf("%w: message content is not a string", ErrLLMReply)
	}
	c, err := parseLLMContent(content, ids)
	if err != nil && r.Choices[0].FinishReason == "length" {
		return Classification{}, fmt.Errorf("%w (the reply was cut at the token limit)", err)
	}
	return c, err
}

// parseLLMContent parses and validates the JSON object the model wrote.
// Required: agent_id (a string in ids), confidence (a number in [0, 1]),
// intent_summary and detected_language (strings). Optional: ambiguous (a
// boolean, default false) and entities (a list of {name, value} objects or
// an object; default empty). Fields of the wrong type are errors; unknown
// fields are ignored. One surrounding Markdown code fence is tolerated.
func parseLLMContent(content string, ids map[string]struct{}) (Classification, error) {
	s := stripCodeFence(strings.TrimSpace(content))
	dec := json.NewDecoder(strings.NewReader(s))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return Classification{}, fmt.Errorf("%w: content is not a JSON object (%s)", ErrLLMReply, jsonErrKind(err))
	}
	if obj == nil {
		return Classification{}, fmt.Errorf("%w: content is not a JSON object", ErrLLMReply)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Classification{}, fmt.Errorf("%w: content has data after the JSON object", ErrLLMReply)
	}

	c := Classification{Entities: map[string]any{}}
	id, ok := rawString(obj["agent_id"])
	switch {
	case obj["agent_id"] == nil:
		return Classification{}, fmt.Errorf("%w: agent_id missing", ErrLLMReply)
	case !ok:
		return Classification{}, fmt.Errorf("%w: agent_id is not a string", ErrLLMReply)
	}
	if _, ok := ids[id]; !ok {
		return Classification{}, fmt.Errorf("%w: agent_id is not one of the %d candidate agents", ErrLLMReply, len(ids))
	}
	c.AgentID = id

	raw := obj["confidence"]
	if raw == nil {
		return Classification{}, fmt.Errorf("%w: confidence missing", ErrLLMReply)
	}
	if !rawIsNumber(raw) || json.Unmarshal(raw, &c.Confidence) != nil {
		return Classification{}, fmt.Errorf("%w: confidence is not a number", ErrLLMReply)
	}
	if !(c.Confidence >= 0 && c.Confidence <= 1) {
		return Classification{}, fmt.Errorf("%w: confidence %g is outside [0, 1]", ErrLLMReply, c.Confidence)
	}

	intent, ok := rawString(obj["intent_summary"])
	if !ok {
		return Classification{}, fmt.Errorf("%w: intent_summary missing or not a string", ErrLLMReply)
	}
	c.IntentSummary = llmClip(intent, llmMaxIntentRunes)

	lang, ok := rawString(obj["detected_language"])
	if !ok {
		return Classification{}, fmt.Errorf("%w: detected_language missing or not a string", ErrLLMReply)
	}
	c.DetectedLanguage = llmLanguage(lang)

	if raw := obj["ambiguous"]; raw != nil {
		switch string(raw) {
		case "true":
			c.Ambiguous = true
		case "false", "null":
		default:
			return Classification{}, fmt.Errorf("%w: ambiguous is not a boolean", ErrLLMReply)
		}
	}

	if err := parseLLMEntities(obj["entities"], c.Entities); err != nil {
		return Classification{}, err
	}
	return c, nil
}

// parseLLMEntities adds the entities of raw to into: a list of
// {"name": string, "value": any} objects (what the schema asks for) or an
// object (what a model in json_object mode may write). Absent or null
// adds nothing. Entries with an empty name are skipped, the first of
// duplicate names wins, names and string values are cut, and at most
// llmMaxEntities are kept.
func parseLLMEntities(raw json.RawMessage, into map[string]any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	add := func(name string, v any) {
		name = llmClip(name, llmMaxEntityName)
		if name == "" || len(into) >= llmMaxEntities {
			return
		}
		if _, dup := into[name]; dup {
			return
		}
		if s, ok := v.(string); ok {
			v = llmClip(s, llmMaxEntityValueLen)
		}
		into[name] = v
	}
	switch raw[0] {
	case '[':
		var list []struct {
			Name  *string `json:"name"`
			Value any     `json:"value"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("%w: entities is not a list of {name, value} objects", ErrLLMReply)
		}
		for _, e := range list {
			if e.Name != nil {
				add(*e.Name, e.Value)
			}
		}
	case '{':
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%w: entities is not an object", ErrLLMReply)
		}
		// Deterministic choice of which to keep past the cap.
		for _, k := range slices.Sorted(maps.Keys(m)) {
			add(k, m[k])
		}
	default:
		return fmt.Errorf("%w: entities is neither a list nor an object", ErrLLMReply)
	}
	return nil
}

// stripCodeFence removes one Markdown code fence around s (```json … ```),
// which some models add even in JSON mode.
func stripCodeFence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	inner := s[3 : len(s)-3]
	nl := strings.IndexByte(inner, '\n')
	if nl < 0 {
		return s
	}
	if lang := strings.TrimSpace(inner[:nl]); lang != "" && !strings.EqualFold(lang, "json") {
		return s
	}
	return strings.TrimSpace(inner[nl+1:])
}

// rawString decodes raw when it is a JSON string.
func rawString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// rawIsNumber reports whether raw is a JSON number (not a string, null or
// boolean, which json.Unmarshal into a float64 would accept or zero).
func rawIsNumber(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// llmLanguage normalises a language tag to an ISO 639-1 code: "pt-BR" →
// "pt", "EN" → "en"; anything else → "en".
func llmLanguage(tag string) string {
	tag = strings.TrimSpace(tag)
	if i := strings.IndexAny(tag, "-_"); i >= 0 {
		tag = tag[:i]
	}
	if len(tag) != 2 {
		return "en"
	}
	tag = strings.ToLower(tag)
	for i := range 2 {
		if tag[i] < 'a' || tag[i] > 'z' {
			return "en"
		}
	}
	return tag
}

// jsonErrKind describes a JSON decoding error without quoting the input.
func jsonErrKind(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return "wrong type for " + strings.Join(strings.Fields(typ.Field), "")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	}
	return "invalid JSON"
}
