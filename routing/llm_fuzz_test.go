package routing

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzParseLLMReply checks the reply parser on arbitrary model output: it
// never panics, every failure wraps ErrLLMReply, and every success is a
// valid classification for one of the candidate ids. The content is also
// parsed inside a chat-completions body, with the same outcome.
func FuzzParseLLMReply(f *testing.F) {
	for _, s := range []string{
		`{"agent_id":"billing","confidence":0.9,"ambiguous":false,"intent_summary":"x","detected_language":"en","entities":[]}`,
		`{"agent_id":"general","confidence":0,"intent_summary":"","detected_language":"pt-BR","entities":{"a":1,"b":"c"}}`,
		"```json\n{\"agent_id\":\"it-support\",\"confidence\":1,\"intent_summary\":\"x\",\"detected_language\":\"EN\"}\n```",
		`{"agent_id":"billing","confidence":2.0,"intent_summary":"x","detected_language":"en"}`,
		`{"agent_id":"admin","confidence":0.5,"intent_summary":"x","detected_language":"en"}`,
		`{"agent_id":"billing","confidence":"0.5","intent_summary":"x","detected_language":"en"}`,
		`{"agent_id":"billing","confidence":1e400,"intent_summary":"x","detected_language":"en"}`,
		`{"agent_id":"billing","confidence":0.5,"intent_summary":"x","detected_language":"en","entities":[{"name":"n","value":{"deep":[1,2]}}]}`,
		`{"agent_id":"billing"} {}`,
		`null`, `[]`, `"billing"`, ``, "```", "```json\n```", `{`,
	} {
		f.Add(s)
	}
	ids := map[string]struct{}{"billing": {}, "general": {}, "it-support": {}}
	f.Fuzz(func(t *testing.T, content string) {
		c, err := parseLLMContent(content, ids)
		body, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": content}}}})
		c2, err2 := parseLLMReply(body, ids)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("content and body parses disagree: %v / %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrLLMReply) || !errors.Is(err2, ErrLLMReply) {
				t.Fatalf("error does not wrap ErrLLMReply: %v", err)
			}
			return
		}
		if _, ok := ids[c.AgentID]; !ok {
			t.Fatalf("agent %q is not a candidate", c.AgentID)
		}
		if !(c.Confidence >= 0 && c.Confidence <= 1) {
			t.Fatalf("confidence %v outside [0, 1]", c.Confidence)
		}
		if c.Entities == nil || len(c.Entities) > llmMaxEntities {
			t.Fatalf("entities %v", c.Entities)
		}
		if len(c.DetectedLanguage) != 2 {
			t.Fatalf("language %q", c.DetectedLanguage)
		}
		if utf8.RuneCountInString(c.IntentSummary) > llmMaxIntentRunes {
			t.Fatalf("intent too long")
		}
		if c.AgentID != c2.AgentID || c.Confidence != c2.Confidence {
			t.Fatalf("content and body parses differ")
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("classification does not marshal: %v", err)
		}
	})
}
