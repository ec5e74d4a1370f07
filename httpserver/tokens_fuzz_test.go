package httpserver_test

import (
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agentmesh/agentmesh/httpserver"
)

// FuzzParseTokens feeds arbitrary tokens files to ParseTokens: it must
// never panic, every entry it accepts has a name, exactly one secret and
// a scope, and what it accepts, written back as YAML, parses to the same
// list.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"- name: ci\n  token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n  scopes: [read, delegate]\n",
		"- name: a\n  token: s3cret\n  scopes: [admin]\n- name: b\n  token: other\n  scopes: [read]\n",
		"- name: a\n  token: x\n  token_sha256: 00\n  scopes: [read]\n",
		"- name: a\n  token: x\n  scopes: [root]\n",
		"- name: a\n  tokn: x\n",
		"- &a {name: a, token: x, scopes: [read]}\n- *a\n",
		"a: [*b]\n", "", "---\n", "[]", "- ", "\t- x", "- name: \"\\xff\"\n  token: t\n  scopes: [read]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := httpserver.ParseTokens(data)
		if err != nil {
			return
		}
		for _, tok := range list {
			if tok.Name == "" || (tok.Token == "") == (tok.SHA256 == "") || len(tok.Scopes) == 0 {
				t.Fatalf("accepted an incomplete entry %+v from %q", tok, data)
			}
		}
		out, err := yaml.Marshal(list)
		if err != nil {
			t.Fatalf("accepted tokens do not encode: %v", err)
		}
		again, err := httpserver.ParseTokens(out)
		if err != nil {
			t.Fatalf("accepted %q, refused it written back as %q: %v", data, out, err)
		}
		if len(again) != len(list) {
			t.Fatalf("%d entries, %d written back", len(list), len(again))
		}
		for i := range list {
			a, b := list[i], again[i]
			if a.Name != b.Name || a.Token != b.Token || a.SHA256 != b.SHA256 || len(a.Scopes) != len(b.Scopes) {
				t.Fatalf("entry %d: %+v, written back %+v", i, a, b)
			}
		}
	})
}
