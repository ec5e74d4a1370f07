package delegation

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzParseAgentReply feeds arbitrary tool results to the reply parser: a
// whole CallToolResult as the agent would send it (decoded by the SDK, as on
// the wire), and arbitrary structured content and text. The parser must
// never panic, and whatever it accepts must be a usable AgentResponse.
func FuzzParseAgentReply(f *testing.F) {
	for _, seed := range []struct{ result, structured, text string }{
		{`{"content":[{"type":"text","text":"hello"}]}`, `{"content":"x","workflow_complete":true}`, "plain"},
		{`{"content":[],"structuredContent":{"content":"s","workflow_state":{"a":1}}}`, `"a string"`, `{"content":"j"}`},
		{`{"content":[{"type":"text","text":"{\"content\":\"\"}"}],"isError":true}`, `[1,2]`, `{"content":42}`},
		{`{"content":[{"type":"image","data":"AQ==","mimeType":"image/png"}]}`, `null`, "  "},
		{`{"structuredContent":"{\"content\":\"nested\"}"}`, `{"content":"x","workflow_state":[]}`, "\xff\xfe"},
		{`{}`, `{"content":"x","workflow_complete":"yes"}`, `{"content":"x","workflow_state":null}`},
	} {
		f.Add(seed.result, seed.structured, seed.text)
	}
	f.Fuzz(func(t *testing.T, result, structured, text string) {
		var res mcp.CallToolResult
		if json.Unmarshal([]byte(result), &res) == nil {
			checkAgentReply(t, &res)
		}

		var sc any
		if json.Unmarshal([]byte(structured), &sc) != nil {
			sc = structured
		}
		checkAgentReply(t, &mcp.CallToolResult{
			StructuredContent: sc,
			Content:           []mcp.Content{&mcp.TextContent{Text: text}, nil},
		})
		checkAgentReply(t, &mcp.CallToolResult{StructuredContent: json.RawMessage(structured)})
		checkAgentReply(t, &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}})
	})
}

// checkAgentReply runs the parser and the isError text on res and checks
// what they return.
func checkAgentReply(t *testing.T, res *mcp.CallToolResult) {
	t.Helper()
	if msg := mcpErrorText(res); len(msg) > mcpTextLimit || !utf8.ValidString(msg) {
		t.Fatalf("error text is %d bytes, valid UTF-8 %v", len(msg), utf8.ValidString(msg))
	}
	r, ok := parseAgentReply(res)
	if !ok {
		if r != nil {
			t.Fatalf("not ok but returned %+v", r)
		}
		return
	}
	if r == nil || strings.TrimSpace(r.Content) == "" {
		t.Fatalf("accepted a reply without content: %+v", r)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatalf("accepted reply does not encode: %v", err)
	}
}
