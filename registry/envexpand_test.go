package registry

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestExpandEnv(t *testing.T) {
	env := envMap(map[string]string{"HOST": "pw.example.com", "EMPTY": "", "DOLLAR": "a$b${C}", "_X1": "x"})
	for _, tc := range []struct {
		in, want string
		errs     []string // substrings, one per expected problem
	}{
		{in: "no references", want: "no references"},
		{in: "https://${HOST}/mcp", want: "https://pw.example.com/mcp"},
		{in: "${_X1}${_X1}", want: "xx"},
		// ${NAME} of an unset variable is an error naming it.
		{in: "${MISSING}", errs: []string{"environment variable MISSING is not set"}},
		{in: "${MISSING} and ${ALSO}", errs: []string{"MISSING is not set", "ALSO is not set"}},
		// Set but empty is a value for ${NAME}.
		{in: "[${EMPTY}]", want: "[]"},
		// ${NAME:-default}: unset or empty → default (POSIX); set → value.
		{in: "${MISSING:-https://default}", want: "https://default"},
		{in: "${EMPTY:-fallback}", want: "fallback"},
		{in: "${HOST:-fallback}", want: "pw.example.com"},
		{in: "${MISSING:-}", want: ""},
		// The default may hold references, expanded only when used.
		{in: "${MISSING:-${HOST}}", want: "pw.example.com"},
		{in: "${HOST:-${MISSING}}", want: "pw.example.com"},
		{in: "${MISSING:-${ALSO:-deep}}", want: "deep"},
		{in: "${MISSING:-${ALSO}}", errs: []string{"ALSO is not set"}},
		{in: "${MISSING:-a:-b c}", want: "a:-b c"},
		// $${ is a literal ${; other dollars are literal.
		{in: "$${HOST}", want: "${HOST}"},
		{in: "pa$$word $HOST $ {x} $}", want: "pa$$word $HOST $ {x} $}"},
		{in: "$$${HOST}", want: "$${HOST}"},
		{in: "${MISSING:-$${x}}", want: "${x}"},
		{in: "}", want: "}"},
		// Values are inserted as they are, never expanded again.
		{in: "${DOLLAR}", want: "a$b${C}"},
		// Malformed references are errors, not literals.
		{in: "${HOST", errs: []string{"unterminated"}},
		{in: "${MISSING:-x", errs: []string{"unterminated"}},
		{in: "${MISSING:-${HOST}", errs: []string{"unterminated"}},
		{in: "${}", errs: []string{"invalid variable name"}},
		{in: "${1X}", errs: []string{"invalid variable name"}},
		{in: "${HOST-x}", errs: []string{"unsupported expansion"}},
		{in: "${HOST:=x}", errs: []string{"unsupported expansion"}},
		{in: "${HOST:?x}", errs: []string{"unsupported expansion"}},
		{in: "${ HOST}", errs: []string{"invalid variable name"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := expandEnv(tc.in, env)
			if len(tc.errs) == 0 {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			require.Error(t, err)
			assert.Len(t, flattenErrors(err), len(tc.errs), "%v", err)
			for _, e := range tc.errs {
				assert.Contains(t, err.Error(), e)
			}
		})
	}
}

// quoteEnv escapes s so that expandEnv returns it unchanged.
func quoteEnv(s string) string { return strings.ReplaceAll(s, "${", "$${") }

func FuzzExpandEnv(f *testing.F) {
	for _, s := range []string{
		"", "plain", "${A}", "${A:-b}", "$${A}", "$$${A}", "${A:-${B:-c}}", "${", "${A", "${A:-",
		"${A-b}", "}", "$", "$$", "${é}", "${A:-}}", "x${A}y${B:-z}w", "${A:-${B}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set := func(name string) (string, bool) { return "<" + name + ">", true }
		unset := func(string) (string, bool) { return "", false }
		for _, lookup := range []func(string) (string, bool){set, unset} {
			got, err := expandEnv(s, lookup)
			if !strings.Contains(s, "${") {
				if err != nil || got != s {
					t.Fatalf("expandEnv(%q) = %q, %v; text without ${ must be unchanged", s, got, err)
				}
			}
		}
		// Escaping every ${ makes any text come back unchanged, with no
		// lookups at all.
		got, err := expandEnv(quoteEnv(s), func(name string) (string, bool) {
			t.Fatalf("expandEnv(%q) looked up %q", quoteEnv(s), name)
			return "", false
		})
		if err != nil || got != s {
			t.Fatalf("expandEnv(%q) = %q, %v; want %q", quoteEnv(s), got, err, s)
		}
		// With every variable set to a value without "$" or "}", a
		// successful expansion leaves no reference behind.
		if got, err := expandEnv(s, set); err == nil && !strings.Contains(s, "$${") && strings.Contains(got, "${") {
			t.Fatalf("expandEnv(%q) = %q: a reference survived", s, got)
		}
	})
}
