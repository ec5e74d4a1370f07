package registry_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// writeFiles creates files (slash-separated paths below dir) with their
// contents.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

// agentYAML is a valid agent file for name, plus extra lines.
func agentYAML(name string, extra ...string) string {
	s := "agent_id: " + name + "\n" +
		"description: Handles " + name + " requests.\n" +
		"endpoint: https://" + name + ".example.com/task\n"
	for _, e := range extra {
		s += e + "\n"
	}
	return s
}

func noEnv(string) (string, bool) { return "", false }

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func loadDir(t *testing.T, files map[string]string, opts *registry.DirOptions) ([]registry.Agent, error) {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	if opts == nil {
		opts = &registry.DirOptions{}
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = noEnv
	}
	return registry.LoadDir(dir, opts)
}

// problems returns the problems of a failed LoadDir, with file paths made
// relative to the directory (slash-separated).
func problems(t *testing.T, err error) []registry.Problem {
	t.Helper()
	var de *registry.DirError
	require.True(t, errors.As(err, &de), "want a *DirError, got %v", err)
	require.NotEmpty(t, de.Problems)
	out := make([]registry.Problem, len(de.Problems))
	for i, p := range de.Problems {
		if rel, err := filepath.Rel(de.Dir, p.File); err == nil {
			p.File = filepath.ToSlash(rel)
		}
		out[i] = p
	}
	return out
}

// oneProblem asserts that err reports exactly one problem and returns it.
func oneProblem(t *testing.T, err error) registry.Problem {
	t.Helper()
	ps := problems(t, err)
	require.Len(t, ps, 1, "%v", ps)
	return ps[0]
}

func names(agents []registry.Agent) []string {
	out := make([]string, len(agents))
	for i, a := range agents {
		out[i] = a.Name
	}
	return out
}

func TestLoadDirExample(t *testing.T) {
	agents, err := registry.LoadDir("../examples/agents", &registry.DirOptions{LookupEnv: noEnv, RequireDefault: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"billing", "general-assistant", "password-reset"}, names(agents), "lexical file order")
	for _, a := range agents {
		assert.Equal(t, registry.SourceFile, a.Source)
		assert.Equal(t, registry.ProtocolHTTP, a.Protocol)
		assert.NotEmpty(t, a.Examples, a.Name)
	}
	def := agents[1]
	assert.True(t, def.IsDefault)
	assert.Equal(t, 0.0, *def.ConfidenceThreshold)
	assert.Equal(t, "http://127.0.0.1:9101/task", def.Endpoint, "the ${VAR:-default} default")
	assert.Equal(t, 0.6, *agents[2].ConfidenceThreshold)
	assert.True(t, agents[2].ClarificationRequired)

	// The endpoints come from the environment when it sets them.
	agents, err = registry.LoadDir("../examples/agents", &registry.DirOptions{
		LookupEnv: env(map[string]string{"BILLING_AGENT_ENDPOINT": "https://billing.example.com/task"}),
	})
	require.NoError(t, err)
	assert.Equal(t, "https://billing.example.com/task", agents[0].Endpoint)
}

func TestLoadDirSchema(t *testing.T) {
	agents, err := loadDir(t, map[string]string{"pw.yaml": `
agent_id: password-reset          # = name
display_name: Password Reset
description: >-
  Resets passwords for Okta and AD accounts. Does not handle hardware.
endpoint: "${PW_AGENT_ENDPOINT:-https://pw.internal.example.com/mcp}"
type: mcp                          # = protocol: mcp | http
is_default: false
confidence_threshold: 0.75
clarification_required: true
clarification_context: I can reset Okta and AD passwords.
capabilities: [password, account, okta]
examples:
  - "I forgot my password"
  - "reset my okta login"
resources:
  - {uri: "okta://users", description: Okta users, access: write}
auth: { type: header, token: "${PW_AGENT_TOKEN}", header_name: X-Api-Key }
labels: { team: it }
ttl_seconds: 60
`}, &registry.DirOptions{LookupEnv: env(map[string]string{"PW_AGENT_TOKEN": "s3cret"})})
	require.NoError(t, err)
	require.Len(t, agents, 1)
	th := 0.75
	assert.Equal(t, registry.Agent{
		Name:                  "password-reset",
		DisplayName:           "Password Reset",
		Description:           "Resets passwords for Okta and AD accounts. Does not handle hardware.",
		Endpoint:              "https://pw.internal.example.com/mcp",
		Protocol:              registry.ProtocolMCP,
		ConfidenceThreshold:   &th,
		ClarificationRequired: true,
		ClarificationContext:  "I can reset Okta and AD passwords.",
		Capabilities:          []string{"password", "account", "okta"},
		Examples:              []string{"I forgot my password", "reset my okta login"},
		Resources:             []registry.Resource{{URI: "okta://users", Description: "Okta users", Access: "write"}},
		Auth:                  &registry.Auth{Type: registry.AuthHeader, Token: "s3cret", HeaderName: "X-Api-Key"},
		Labels:                map[string]string{"team": "it"},
		TTLSeconds:            60,
		Source:                registry.SourceFile,
	}, agents[0])

	// The record's defaults: display name, protocol http, threshold 0.7.
	agents, err = loadDir(t, map[string]string{"a.yaml": agentYAML("minimal")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "minimal", agents[0].DisplayName)
	assert.Equal(t, registry.ProtocolHTTP, agents[0].Protocol)
	assert.Equal(t, registry.DefaultConfidenceThreshold, *agents[0].ConfidenceThreshold)
}

func TestLoadDirUnknownKeys(t *testing.T) {
	_, err := loadDir(t, map[string]string{"pw.yaml": agentYAML("pw", "confidence_treshold: 0.9")}, nil)
	p := oneProblem(t, err)
	assert.Equal(t, "pw.yaml", p.File)
	assert.Equal(t, 4, p.Line)
	assert.Equal(t, `unknown key "confidence_treshold" (did you mean "confidence_threshold"?)`, p.Message)

	// JSON names get a hint; nested mappings are strict too.
	_, err = loadDir(t, map[string]string{"pw.yaml": agentYAML("pw",
		"isDefault: true",
		"auth: {type: header, token: t, headerName: X-Key}",
		"resources:",
		"  - uri: okta://users",
		"    acces: read",
		"bogus: 1",
	)}, nil)
	ps := problems(t, err)
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.String()
	}
	assert.Equal(t, []string{
		`pw.yaml:4: unknown key "isDefault" (did you mean "is_default"?)`,
		`pw.yaml:5: auth: unknown key "headerName" (did you mean "header_name"?)`,
		`pw.yaml:5: auth.header_name: must be an HTTP header name`,
		`pw.yaml:8: resources[0]: unknown key "acces" (did you mean "access"?)`,
		`pw.yaml:9: unknown key "bogus" (known keys: agent_id, auth, capabilities, clarification_context, clarification_required, confidence_threshold, description, display_name, endpoint, examples, is_default, labels, resources, ttl_seconds, type)`,
	}, msgs)

	// A key given twice.
	_, err = loadDir(t, map[string]string{"pw.yaml": agentYAML("pw", "description: again")}, nil)
	p = oneProblem(t, err)
	assert.Equal(t, 4, p.Line)
	assert.Equal(t, `key "description" appears twice (first on line 2)`, p.Message)
}

func TestLoadDirFileSize(t *testing.T) {
	body := agentYAML("big")
	pad := registry.MaxAgentFileSize - len(body)
	ok := body + "#" + strings.Repeat("x", pad-2) + "\n"
	require.Len(t, ok, registry.MaxAgentFileSize)
	agents, err := loadDir(t, map[string]string{"big.yaml": ok}, nil)
	require.NoError(t, err, "exactly 1 MiB is allowed")
	assert.Len(t, agents, 1)

	_, err = loadDir(t, map[string]string{"big.yaml": ok + "#"}, nil)
	p := oneProblem(t, err)
	assert.Equal(t, "big.yaml", p.File)
	assert.Contains(t, p.Message, "limited to 1048576 bytes (1 MiB)")
}

func TestLoadDirEnvExpansion(t *testing.T) {
	lookup := env(map[string]string{"HOST": "pw.example.com", "EMPTY": "", "TH": "0.25", "YES": "true",
		"INJECT": "x\nendpoint: https://evil.example.com\n# ", "COLON": "a: b, [c] #d"})

	t.Run("unset variable names file and variable", func(t *testing.T) {
		_, err := loadDir(t, map[string]string{"team/pw.yaml": agentYAML("pw", "clarification_context: ask ${NOPE}")},
			&registry.DirOptions{LookupEnv: lookup})
		p := oneProblem(t, err)
		assert.Equal(t, "team/pw.yaml", p.File)
		assert.Equal(t, 4, p.Line)
		assert.Contains(t, p.Message, "clarification_context: environment variable NOPE is not set")
	})

	t.Run(":- with unset and empty, as POSIX", func(t *testing.T) {
		agents, err := loadDir(t, map[string]string{"pw.yaml": `
agent_id: pw
description: "[${EMPTY}]"
endpoint: "https://${UNSET:-fallback.example.com}/${EMPTY:-task}"
clarification_context: ${HOST:-unused}
`}, &registry.DirOptions{LookupEnv: lookup})
		require.NoError(t, err)
		assert.Equal(t, "https://fallback.example.com/task", agents[0].Endpoint)
		assert.Equal(t, "[]", agents[0].Description, "${NAME} of a set, empty variable is empty")
		assert.Equal(t, "pw.example.com", agents[0].ClarificationContext)
	})

	t.Run("$${ escape", func(t *testing.T) {
		agents, err := loadDir(t, map[string]string{"pw.yaml": agentYAML("pw", `clarification_context: "literal $${HOST} and $$ and $HOST"`)},
			&registry.DirOptions{LookupEnv: lookup})
		require.NoError(t, err)
		assert.Equal(t, "literal ${HOST} and $$ and $HOST", agents[0].ClarificationContext)
	})

	t.Run("never in comments or keys", func(t *testing.T) {
		agents, err := loadDir(t, map[string]string{"pw.yaml": "# endpoint: ${NOT_SET_ANYWHERE}\n" +
			agentYAML("pw", "labels:", "  team: it # ${NOT_SET_EITHER}")}, &registry.DirOptions{LookupEnv: lookup})
		require.NoError(t, err, "a reference in a comment is not expanded")
		assert.Equal(t, map[string]string{"team": "it"}, agents[0].Labels)

		_, err = loadDir(t, map[string]string{"pw.yaml": agentYAML("pw", "${HOST}: x", "labels:", "  ${HOST}: y")},
			&registry.DirOptions{LookupEnv: lookup})
		ps := problems(t, err)
		require.Len(t, ps, 2, "%v", ps)
		assert.Equal(t, `unknown key "${HOST}" (known keys: agent_id, auth, capabilities, clarification_context, clarification_required, confidence_threshold, description, display_name, endpoint, examples, is_default, labels, resources, ttl_seconds, type)`, ps[0].Message)
		assert.Contains(t, ps[1].Message, `labels: key "${HOST}" must match`, "keys are not expanded")
	})

	t.Run("values cannot change the structure", func(t *testing.T) {
		agents, err := loadDir(t, map[string]string{"pw.yaml": agentYAML("pw",
			"clarification_context: ${INJECT}", "display_name: ${COLON}", "capabilities: ['${COLON}', '${HOST}']")},
			&registry.DirOptions{LookupEnv: lookup})
		require.NoError(t, err)
		a := agents[0]
		assert.Equal(t, "x\nendpoint: https://evil.example.com\n# ", a.ClarificationContext)
		assert.Equal(t, "https://pw.example.com/task", a.Endpoint)
		assert.Equal(t, "a: b, [c] #d", a.DisplayName)
		assert.Equal(t, []string{"a: b, [c] #d", "pw.example.com"}, a.Capabilities)
	})

	t.Run("typed values", func(t *testing.T) {
		agents, err := loadDir(t, map[string]string{"pw.yaml": agentYAML("pw",
			`confidence_threshold: "${TH}"`, "clarification_required: ${YES}", "ttl_seconds: ${TTL:-30}", "display_name: ${TH}")},
			&registry.DirOptions{LookupEnv: lookup})
		require.NoError(t, err)
		a := agents[0]
		assert.Equal(t, 0.25, *a.ConfidenceThreshold)
		assert.True(t, a.ClarificationRequired)
		assert.Equal(t, 30, a.TTLSeconds)
		assert.Equal(t, "0.25", a.DisplayName, "a string field takes the expansion as text")

		_, err = loadDir(t, map[string]string{"pw.yaml": agentYAML("pw", "confidence_threshold: ${HOST}")},
			&registry.DirOptions{LookupEnv: lookup})
		assert.Equal(t, `confidence_threshold: must be a number, got the expansion of "${HOST}" (not shown)`, oneProblem(t, err).Message,
			"a variable's value may be a secret: messages quote the file")
	})

	t.Run("anchors expand once", func(t *testing.T) {
		agents, err := loadDir(t, map[string]string{"pw.yaml": agentYAML("pw",
			`display_name: &n "$${HOST}"`, "clarification_context: *n")}, &registry.DirOptions{LookupEnv: lookup})
		require.NoError(t, err)
		assert.Equal(t, "${HOST}", agents[0].DisplayName)
		assert.Equal(t, "${HOST}", agents[0].ClarificationContext)
	})
}

func TestLoadDirWalk(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b.yaml":             agentYAML("b"),
		"a.yml":              agentYAML("a"),
		"a/z.yaml":           agentYAML("az"),
		"a/deeper/x.yaml":    agentYAML("adx"),
		"a.yaml":             agentYAML("a-yaml"),
		".hidden.yaml":       "not: an agent",
		".git/config.yaml":   "not: an agent",
		"team/.draft/x.yaml": "not: an agent",
		"README.md":          "# agents",
		"notes.txt":          "x",
		"b.yaml.bak":         "x",
	})
	agents, err := registry.LoadDir(dir, &registry.DirOptions{LookupEnv: noEnv})
	require.NoError(t, err)
	// Lexical order of the slash-separated relative paths: "a.yaml" <
	// "a.yml" < "a/…" ('.' sorts before '/').
	assert.Equal(t, []string{"a-yaml", "a", "adx", "az", "b"}, names(agents))
}

func TestLoadDirSymlinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFiles(t, outside, map[string]string{"real.yaml": agentYAML("linked"), "team/x.yaml": agentYAML("team-x")})
	writeFiles(t, dir, map[string]string{"a.yaml": agentYAML("a")})
	require.NoError(t, os.Symlink(filepath.Join(outside, "real.yaml"), filepath.Join(dir, "linked.yaml")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "team"), filepath.Join(dir, "team")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "nowhere"), filepath.Join(dir, "dangling.txt")))
	agents, err := registry.LoadDir(dir, &registry.DirOptions{LookupEnv: noEnv})
	require.NoError(t, err, "file and directory links are followed; a dangling non-agent link is ignored")
	assert.Equal(t, []string{"a", "linked", "team-x"}, names(agents))

	// A link back up the tree is reported, not followed forever.
	require.NoError(t, os.Symlink(dir, filepath.Join(dir, "loop")))
	_, err = registry.LoadDir(dir, &registry.DirOptions{LookupEnv: noEnv})
	p := oneProblem(t, err)
	assert.Equal(t, "loop", p.File)
	assert.Contains(t, p.Message, "symbolic link loop")
	require.NoError(t, os.Remove(filepath.Join(dir, "loop")))

	// A dangling link named like an agent file is an error.
	require.NoError(t, os.Symlink(filepath.Join(outside, "gone.yaml"), filepath.Join(dir, "gone.yaml")))
	_, err = registry.LoadDir(dir, &registry.DirOptions{LookupEnv: noEnv})
	p = oneProblem(t, err)
	assert.Equal(t, "gone.yaml", p.File)
	assert.Contains(t, p.Message, "does not exist")
}

func TestLoadDirInvariants(t *testing.T) {
	t.Run("unique ids, naming both files", func(t *testing.T) {
		_, err := loadDir(t, map[string]string{"a.yaml": agentYAML("dup"), "sub/b.yaml": "\n" + agentYAML("dup")}, nil)
		p := oneProblem(t, err)
		assert.Equal(t, "sub/b.yaml", p.File)
		assert.Equal(t, 2, p.Line)
		assert.Contains(t, p.Message, `agent_id "dup" is already defined in `)
		assert.Contains(t, p.Message, filepath.Join("", "a.yaml")+":1")
	})
	t.Run("at most one default", func(t *testing.T) {
		_, err := loadDir(t, map[string]string{
			"a.yaml": agentYAML("a", "is_default: true"),
			"b.yaml": agentYAML("b", "is_default: true"),
			"c.yaml": agentYAML("c", "is_default: true"),
		}, nil)
		ps := problems(t, err)
		require.Len(t, ps, 2)
		assert.Equal(t, "b.yaml", ps[0].File)
		assert.Equal(t, 4, ps[0].Line)
		assert.Contains(t, ps[0].Message, `is_default: at most one agent may be the default; "a" in`)
		assert.Equal(t, "c.yaml", ps[1].File)
	})
	t.Run("exactly one default when required", func(t *testing.T) {
		_, err := loadDir(t, map[string]string{"a.yaml": agentYAML("a")}, &registry.DirOptions{RequireDefault: true})
		p := oneProblem(t, err)
		assert.Equal(t, ".", p.File, "a problem of the directory")
		assert.Contains(t, p.Message, "no agent has is_default: true")

		agents, err := loadDir(t, map[string]string{"a.yaml": agentYAML("a")}, nil)
		require.NoError(t, err, "without RequireDefault no default is fine")
		assert.Len(t, agents, 1)

		_, err = loadDir(t, map[string]string{}, &registry.DirOptions{RequireDefault: true})
		assert.Contains(t, oneProblem(t, err).Message, "no agent has is_default: true")
	})
	t.Run("default threshold is 0", func(t *testing.T) {
		agents, err := loadDir(t, map[string]string{
			"a.yaml": agentYAML("a", "is_default: true", "confidence_threshold: 0.9"),
			"b.yaml": agentYAML("b", "confidence_threshold: 0.9"),
		}, &registry.DirOptions{RequireDefault: true})
		require.NoError(t, err)
		assert.Equal(t, 0.0, *agents[0].ConfidenceThreshold)
		assert.Equal(t, 0.0, agents[0].Threshold())
		assert.Equal(t, 0.9, *agents[1].ConfidenceThreshold)
	})
}

func TestLoadDirBrokenFiles(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		line       int
		msg        string
	}{
		{"syntax", "agent_id: a\ndescription: x\nendpoint: [unclosed\n", 3, "invalid YAML: did not find expected ',' or ']'"},
		{"bad indentation", "agent_id: a\n  description: x\n", 2, "invalid YAML: mapping values are not allowed in this context"},
		{"tab", "agent_id: a\n\tdescription: x\n", 2, "invalid YAML: found a tab character that violates indentation"},
		{"empty", "", 0, "file is empty"},
		{"only comments", "# nothing\n", 0, "file is empty"},
		{"a list", "- agent_id: a\n", 1, "the file must be a mapping of agent fields"},
		{"a scalar", "hello\n", 1, "the file must be a mapping of agent fields"},
		{"two documents", agentYAML("a") + "---\n" + agentYAML("b"), 4, "a second YAML document"},
		{"wrong type", agentYAML("a", "is_default: sometimes"), 4, `is_default: must be true or false, got "sometimes"`},
		{"list for string", agentYAML("a", "display_name: [a, b]"), 4, "display_name: must be a string, got a list"},
		{"string for list", agentYAML("a", "capabilities: okta"), 4, `capabilities: must be a list of strings, got "okta"`},
		{"non-string item", agentYAML("a", "examples:", "  - {a: b}"), 5, "examples[0]: must be a string, got a mapping"},
		{"float ttl", agentYAML("a", "ttl_seconds: 1.5"), 4, `ttl_seconds: must be an integer, got "1.5"`},
		{"protocol", agentYAML("a", "type: a2a"), 4, `type: must be mcp or http, got "a2a"`},
		{"inprocess", agentYAML("a", "type: inprocess"), 4, `type: must be mcp or http, got "inprocess"`},
		{"threshold range", agentYAML("a", "confidence_threshold: 1.5"), 4, "confidence_threshold: must be between 0 and 1"},
		{"name", "agent_id: not valid!\ndescription: x\nendpoint: https://x.example.com\n", 1, "agent_id: must match"},
		{"missing endpoint", "agent_id: a\ndescription: x\n", 0, "endpoint: is required"},
		{"bad capability", agentYAML("a", "capabilities:", "  - ok", "  - ''"), 6, "capabilities[1]: is required"},
		{"auth", agentYAML("a", "auth:", "  type: bearer"), 4, "auth.token: is required for auth type bearer"},
		{"resource access", agentYAML("a", "resources:", "  - uri: x://y", "    access: root"), 6, "resources[0].access: must be one of read, write, admin"},
		{"label key", agentYAML("a", "labels:", "  Team: x"), 4, `labels: key "Team" must match`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadDir(t, map[string]string{"agent.yaml": tc.body}, nil)
			p := oneProblem(t, err)
			assert.Equal(t, "agent.yaml", p.File)
			assert.Equal(t, tc.line, p.Line, p.Message)
			assert.Contains(t, p.Message, tc.msg)
		})
	}
}

func TestLoadDirCollectsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml":     agentYAML("a", "confidence_threshold: 2", "endpont: x"),
		"b/b.yaml":   "agent_id: [b\n",
		"c.yaml":     agentYAML("c", "clarification_context: ${MISSING}"),
		"d.yaml":     agentYAML("a"),
		"good.yaml":  agentYAML("good"),
		"local.yaml": "agent_id: local\ndescription: x\nendpoint: http://127.0.0.1:8080/task\n",
	})
	policy, err := netguard.NewPolicy(netguard.Options{})
	require.NoError(t, err)
	_, err = registry.LoadDir(dir, &registry.DirOptions{LookupEnv: noEnv, Policy: policy})
	var de *registry.DirError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, dir, de.Dir)
	var got []string
	for _, p := range de.Problems {
		rel, _ := filepath.Rel(dir, p.File)
		p.File = filepath.ToSlash(rel)
		got = append(got, p.String())
	}
	assert.Equal(t, []string{
		`a.yaml:4: confidence_threshold: must be between 0 and 1`,
		`a.yaml:5: unknown key "endpont" (did you mean "endpoint"?)`,
		`b/b.yaml:2: invalid YAML: did not find expected ',' or ']'`,
		`c.yaml:4: clarification_context: environment variable MISSING is not set (use ${MISSING:-default} for a default)`,
		`d.yaml:1: agent_id "a" is already defined in ` + filepath.Join(dir, "a.yaml") + `:1`,
		`local.yaml:3: endpoint refused: ` + strings.TrimPrefix(localRefusal(t, policy), "endpoint refused: "),
	}, got)
	assert.Contains(t, err.Error(), "6 problems")
}

func localRefusal(t *testing.T, p *netguard.Policy) string {
	a := registry.Agent{Name: "x", Description: "x", Endpoint: "http://127.0.0.1:8080/task"}
	a.Normalize()
	err := a.Validate(p)
	require.Error(t, err)
	return err.Error()
}

func TestLoadDirMissing(t *testing.T) {
	_, err := registry.LoadDir(filepath.Join(t.TempDir(), "nope"), nil)
	var de *registry.DirError
	require.ErrorAs(t, err, &de)
	require.Len(t, de.Problems, 1)
	assert.Contains(t, de.Problems[0].Message, "does not exist")

	f := filepath.Join(t.TempDir(), "file.yaml")
	require.NoError(t, os.WriteFile(f, []byte(agentYAML("a")), 0o644))
	_, err = registry.LoadDir(f, nil)
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "not a directory", de.Problems[0].Message)
}
