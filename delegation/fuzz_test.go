package delegation_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/delegation"
)

// FuzzDecodeResult: interpreting a 200 body never panics and always gives
// valid JSON: the "result" value of an object that has one, else the body
// itself if it is JSON, else the body as a string.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{
		`{"result":1}`, `{"result":null}`, `{"a":{"result":2}}`, `[{"result":3}]`, `"x"`, ``, `  `,
		`{"result":1,"result":2}`, `{"Result":1}`, "\xff", `{"result":`, `nan`, `{"result":"\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := delegation.DecodeResult(body)
		if !json.Valid(got) {
			t.Fatalf("DecodeResult(%q) = %q: not JSON", body, got)
		}
		trimmed := bytes.TrimSpace(body)
		if !json.Valid(trimmed) || len(trimmed) == 0 {
			var s string
			if err := json.Unmarshal(got, &s); err != nil {
				t.Fatalf("DecodeResult(%q) = %q: not a string", body, got)
			}
			if s != strings.ToValidUTF8(string(body), "\uFFFD") {
				t.Fatalf("DecodeResult(%q) = %q: not the body", body, got)
			}
			return
		}
		var obj map[string]json.RawMessage
		if trimmed[0] == '{' && json.Unmarshal(trimmed, &obj) == nil {
			if want, ok := exactKey(trimmed); ok {
				if !jsonEqual(want, got) {
					t.Fatalf("DecodeResult(%q) = %q, want the result value %q", body, got, want)
				}
				return
			}
		}
		if !bytes.Equal(got, trimmed) {
			t.Fatalf("DecodeResult(%q) = %q, want the whole body", body, got)
		}
	})
}

// exactKey finds the last top-level "result" key, case-sensitively
// (encoding/json's map decoding keeps keys as written).
func exactKey(obj []byte) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, false
	}
	v, ok := m["result"]
	return v, ok
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// FuzzDecodeOutcome: decoding a callback body never panics, and whatever
// it accepts has a valid status and valid JSON.
func FuzzDecodeOutcome(f *testing.F) {
	for _, s := range []string{
		`{"status":"completed","result":{"a":1}}`, `{"status":"failed","error":"x"}`, `{"status":"failed","error":{"a":1}}`,
		`{"status":"done"}`, `{}`, `[]`, ``, `{"status":null}`, `{"status":"completed"} trailing`, "{\"status\":\"failed\",\"error\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := delegation.DecodeOutcome(bytes.NewReader(body))
		if err != nil {
			return
		}
		if out.Status != delegation.StatusCompleted && out.Status != delegation.StatusFailed {
			t.Fatalf("accepted status %q", out.Status)
		}
		if len(out.Result) > 0 && !json.Valid(out.Result) {
			t.Fatalf("accepted invalid result %q", out.Result)
		}
	})
}

// An http agent's conversation fields, next to result: decodeReply keeps
// the result as it is and reports them as an AgentResponse; a reply
// without them has none.
func TestDecodeReplyConversationFields(t *testing.T) {
	for _, tc := range []struct {
		body string
		want *delegation.AgentResponse
	}{
		{`{"result":"done"}`, nil},
		{`{"result":{"workflow":1}}`, nil},
		{`"workflowComplete"`, nil},
		{`{"result":"done","workflowComplete":true}`, &delegation.AgentResponse{Content: "done", WorkflowComplete: true}},
		{`{"result":{"content":"hi"},"workflowState":{"step":2}}`, &delegation.AgentResponse{Content: "hi", WorkflowState: map[string]any{"step": float64(2)}}},
		{`{"result":{"total":3},"workflowComplete":false}`, &delegation.AgentResponse{Content: `{"total":3}`}},
		{`{"result":"x","workflowComplete":"yes"}`, nil}, // not a bool: ignored, the result stays
	} {
		r := delegation.DecodeReply([]byte(tc.body))
		if !jsonEqual(delegation.DecodeResult([]byte(tc.body)), r.Result) {
			t.Errorf("%s: Result = %s, want what DecodeResult gives", tc.body, r.Result)
		}
		if got, want := fmt.Sprint(r.Response), fmt.Sprint(tc.want); got != want {
			t.Errorf("%s: Response = %s, want %s", tc.body, got, want)
		}
	}
}
