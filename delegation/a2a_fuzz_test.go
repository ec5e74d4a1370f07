package delegation

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
)

// FuzzA2AReply feeds arbitrary agent replies to the reading of SendMessage
// and GetTask results: the JSON is decoded by a2a-go's types, as the SDK
// does on the wire, then read by a2aContent and a2aTaskOutcome. They must
// never panic; a result must be JSON, a failure a *TransportError with a
// code and a bounded, valid UTF-8 message.
func FuzzA2AReply(f *testing.F) {
	for _, s := range []string{
		`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"hi"},{"text":" there"}]}}`,
		`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"data":{"a":1}}]}}`,
		`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[null,{"url":"https://x"},{"raw":"AQI=","mediaType":"image/png","filename":"a.png"}]}}`,
		`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","parts":[{"text":"done"}]},null]}}`,
		`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"q","role":"ROLE_AGENT","parts":[{"text":"Which?"}]}}}}`,
		`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"q","role":"ROLE_AGENT","parts":[{"text":"\xff"}]}}}}`,
		`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"},"history":[null,{"messageId":"h","role":"ROLE_AGENT","parts":[]}]}}`,
		`{"task":{"id":"t","contextId":"c","status":{"state":"working"}}}`,
		`{"id":"t","contextId":"c","status":{"state":"TASK_STATE_AUTH_REQUIRED"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var sr a2a.StreamResponse
		if json.Unmarshal(data, &sr) == nil {
			switch ev := sr.Event.(type) {
			case *a2a.Message:
				checkA2AContent(t, a2aContent(ev.Parts))
			case *a2a.Task:
				checkA2ATask(t, ev)
			}
		}
		var task a2a.Task // a GetTask result
		if json.Unmarshal(data, &task) == nil {
			checkA2ATask(t, &task)
		}
	})
}

// checkA2ATask reads task's outcome and checks it.
func checkA2ATask(t *testing.T, task *a2a.Task) {
	t.Helper()
	content, final, err := a2aTaskOutcome(task)
	switch {
	case err != nil:
		var te *TransportError
		if !errors.As(err, &te) || te.Code == "" || te.Retryable {
			t.Fatalf("failure %v is not a final *TransportError with a code", err)
		}
		if !utf8.ValidString(te.Message) || len(te.Message) > a2aTextLimit+64 {
			t.Fatalf("failure message is %d bytes, valid UTF-8 %v", len(te.Message), utf8.ValidString(te.Message))
		}
		if !final {
			t.Fatalf("a failure must be final")
		}
	case final:
		checkA2AContent(t, content)
		if a2aNeedsInput(task.Status.State) && content.empty() {
			t.Fatalf("a question without text")
		}
	}
}

// checkA2AContent checks that content gives a usable result.
func checkA2AContent(t *testing.T, content a2aResult) {
	t.Helper()
	if !utf8.ValidString(content.text) {
		t.Fatalf("content text is not valid UTF-8: %q", content.text)
	}
	if res := content.json(); !json.Valid(res) {
		t.Fatalf("result %q is not JSON", res)
	}
}

// a2aContent renders parts as the delegation result of an A2A agent
// (docs/AGENTS.md#a2a-agents): text concatenated, other parts on lines of
// their own, one data part alone kept as JSON.
func TestA2AContent(t *testing.T) {
	text, data, url := a2a.NewTextPart, a2a.NewDataPart, a2a.NewFileURLPart
	for _, tc := range []struct {
		name   string
		groups []a2a.ContentParts
		want   string
	}{
		{"none", nil, `""`},
		{"text", []a2a.ContentParts{{text("a"), text("b")}}, `"ab"`},
		{"groups", []a2a.ContentParts{{text("a")}, {}, {text("b")}}, `"a\nb"`},
		{"data alone", []a2a.ContentParts{{data(map[string]any{"k": []any{1.0}})}}, `{"k":[1]}`},
		{"data alone, nil parts", []a2a.ContentParts{{nil, data(7.0)}, {nil}}, `7`},
		{"data and text", []a2a.ContentParts{{text("n = "), data(7.0), text("ok")}}, `"n = \n7\nok"`},
		{"two data", []a2a.ContentParts{{data(1.0)}, {data(2.0)}}, `"1\n2"`},
		{"url", []a2a.ContentParts{{text("see"), url("https://x.example/r.pdf", "application/pdf")}}, `"see\nhttps://x.example/r.pdf"`},
		{"raw", []a2a.ContentParts{{&a2a.Part{Content: a2a.Raw{1, 2}, MediaType: "image/png", Filename: "a.png"}}}, `"[2 bytes of image/png \"a.png\"]"`},
		{"invalid utf-8", []a2a.ContentParts{{text("\xff")}}, `"\ufffd"`},
	} {
		assert.JSONEq(t, tc.want, string(a2aContent(tc.groups...).json()), tc.name)
	}
}
