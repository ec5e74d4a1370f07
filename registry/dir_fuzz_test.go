package registry

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadAgentFile decodes arbitrary agent files: it must never panic,
// every problem must name the file and a line inside it (or 0), and a file
// without problems must yield a valid file agent.
func FuzzLoadAgentFile(f *testing.F) {
	seeds, _ := filepath.Glob("../examples/agents/*.yaml")
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"",
		"agent_id: a\ndescription: x\nendpoint: https://a.example.com\n",
		"agent_id: a\ndescription: x\nendpoint: \"${E:-https://a.example.com}\"\nconfidence_threshold: ${T:-0.5}\n",
		"agent_id: &a a\ndescription: *a\nendpoint: https://a.example.com\ncapabilities: [*a, *a]\n",
		"auth: {type: header, token: t, header_name: X-K}\nresources: [{uri: a, access: read}]\nlabels: {a: b}\n",
		"- a\n- b\n", "a: [", "a: b\n---\nc: d\n", "? [a]\n: b\n", "<<: {agent_id: a}\n",
		"agent_id: !!binary aGVsbG8=\n", "ttl_seconds: 1e3\nis_default: yes\n", "a: *x\n",
		"examples: &l [*l]\n", "labels: {${A}: ${B}}\n", "agent_id: $${x}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxAgentFileSize {
			return
		}
		lookup := func(name string) (string, bool) { return "v-" + name, len(name)%2 == 0 }
		a, _, probs := decodeAgentFile("agent.yaml", data, DirOptions{LookupEnv: lookup})
		// YAML breaks lines at \n, \r, \r\n, NEL, LS and PS; count each as
		// a break (a \r\n then counts twice, which only loosens the bound).
		lines := 1
		for _, r := range string(data) {
			switch r {
			case '\n', '\r', '\u0085', '\u2028', '\u2029':
				lines++
			}
		}
		for _, p := range probs {
			if p.File != "agent.yaml" || p.Line < 0 || p.Line > lines+1 || p.Message == "" {
				t.Fatalf("bad problem %+v for a file of %d lines", p, lines)
			}
		}
		if len(probs) == 0 {
			if a.Source != SourceFile {
				t.Fatalf("source %q", a.Source)
			}
			if err := a.Validate(nil); err != nil {
				t.Fatalf("no problems reported, but the agent is invalid: %v", err)
			}
			switch a.Protocol {
			case ProtocolHTTP, ProtocolMCP:
			default:
				t.Fatalf("protocol %q from a file", a.Protocol)
			}
			if a.IsDefault && a.Threshold() != 0 {
				t.Fatalf("default agent with threshold %v", a.Threshold())
			}
		}
	})
}
