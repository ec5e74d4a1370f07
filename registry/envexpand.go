package registry

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// expandEnv expands environment references in s, one YAML scalar value of
// an agent file (docs/AGENTS.md#three-ways-to-register):
//
//   - ${NAME} is the variable's value; an unset variable is an error.
//   - ${NAME:-word} is the variable's value, or word when the variable is
//     unset or empty (as POSIX). word may itself contain references; they
//     are expanded only when word is used.
//   - $${ is a literal "${".
//
// NAME is a POSIX name ([A-Za-z_][A-Za-z0-9_]*). Any other "$" is literal
// ($NAME and $$ are left alone, so secrets containing "$" survive). A
// variable's value is inserted as is, never expanded again. Other shell
// forms (${NAME-x}, ${NAME:=x}, ${NAME:?x}, ${#NAME}, …) are errors rather
// than being left in place, so a typo cannot silently become a literal.
//
// It returns the expanded text and every problem found, joined.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	x := expander{src: s, lookup: lookup}
	var b strings.Builder
	b.Grow(len(s))
	x.word(0, false, &b)
	return b.String(), errors.Join(x.errs...)
}

type expander struct {
	src    string
	lookup func(string) (string, bool)
	errs   []error
}

// word scans src from i, writing the expansion to b (nil: parse only, as
// for an unused default). In a nested word (a default) it stops after the
// first unmatched "}"; at the top level "}" is literal. It returns the
// index after the word and, for a nested word, whether its "}" was found.
func (x *expander) word(i int, nested bool, b *strings.Builder) (int, bool) {
	s := x.src
	for i < len(s) {
		switch {
		case nested && s[i] == '}':
			return i + 1, true
		case strings.HasPrefix(s[i:], "$${"):
			write(b, "${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			i = x.ref(i, b)
		default:
			// Copy up to the next byte that can start something.
			j := i + 1
			for j < len(s) && s[j] != '$' && !(nested && s[j] == '}') {
				j++
			}
			write(b, s[i:j])
			i = j
		}
	}
	return i, false
}

// ref expands the reference starting at src[i] ("${") into b and returns
// the index after it.
func (x *expander) ref(i int, b *strings.Builder) int {
	s := x.src
	j := i + 2
	for j < len(s) && isNameByte(s[j], j == i+2) {
		j++
	}
	name := s[i+2 : j]
	switch {
	case j == len(s):
		x.errs = append(x.errs, fmt.Errorf("unterminated %q (missing \"}\"; write $${ for a literal ${)", clip(s[i:])))
		return j
	case name == "":
		return x.bad(i, "invalid variable name in %q (a name is a letter or _ followed by letters, digits or _; write $${ for a literal ${)")
	case s[j] == '}':
		if b != nil {
			v, ok := x.lookup(name)
			if !ok {
				x.errs = append(x.errs, fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a default)", name, name))
			}
			write(b, v)
		}
		return j + 1
	case strings.HasPrefix(s[j:], ":-"):
		v, ok := "", false
		if b != nil {
			v, ok = x.lookup(name)
		}
		if ok && v != "" {
			write(b, v)
			b = nil // parse the unused default without expanding it
		}
		end, closed := x.word(j+2, true, b)
		if !closed {
			x.errs = append(x.errs, fmt.Errorf("unterminated %q (missing \"}\")", clip(s[i:])))
		}
		return end
	default:
		return x.bad(i, "unsupported expansion %q: only ${NAME} and ${NAME:-default} are supported (write $${ for a literal ${)")
	}
}

// bad records a malformed reference starting at src[i] and skips past the
// next "}" (or to the end).
func (x *expander) bad(i int, format string) int {
	end := strings.IndexByte(x.src[i:], '}')
	if end < 0 {
		end = len(x.src)
	} else {
		end += i + 1
	}
	x.errs = append(x.errs, fmt.Errorf(format, clip(x.src[i:end])))
	return end
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || !first && '0' <= c && c <= '9'
}

func write(b *strings.Builder, s string) {
	if b != nil {
		b.WriteString(s)
	}
}

// clip shortens s for an error message.
func clip(s string) string {
	const limit = 60
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
