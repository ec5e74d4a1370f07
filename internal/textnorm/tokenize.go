package textnorm

import (
	"unicode"
	"unicode/utf8"
)

// Fold returns the case-folded form of r: the lower case of its upper case,
// which maps every member of a simple case-folding orbit (K, k and the Kelvin
// sign; σ and ς; s and ſ) to one rune.
func Fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// isWordStart reports whether r starts a token: a letter or a digit.
func isWordStart(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// isWordPart reports whether r continues a token: a letter, a digit, or a
// combining mark (so "é" written as e + U+0301, and the vowel signs of
// Indic scripts, stay inside their word).
func isWordPart(r rune) bool {
	if r < utf8.RuneSelf {
		return isWordStart(r)
	}
	return isWordStart(r) || unicode.Is(unicode.M, r)
}

// Tokens appends to dst the tokens of s and returns the extended slice.
//
// A token is a maximal run of letters, digits (Unicode categories L and Nd)
// and combining marks (category M, never at the start of a token),
// case-folded with [Fold]. Everything else separates tokens, so "cost_center"
// gives "cost", "center" and "code-review" gives "code", "review". Invalid
// UTF-8 bytes separate tokens too. Duplicates are kept, in order.
func Tokens(dst []string, s string) []string {
	return tokens(dst, s, nil)
}

// RawTokens is like [Tokens] but does not fold case: it returns the runs as
// they appear in s. [SplitIdentifier] needs the original case to find
// camelCase boundaries.
func RawTokens(dst []string, s string) []string {
	start := -1
	for i, r := range s {
		// utf8.RuneError is what invalid bytes decode to; it is a symbol,
		// so it separates tokens like any other.
		word := isWordStart(r) || start >= 0 && isWordPart(r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			dst = append(dst, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		dst = append(dst, s[start:])
	}
	return dst
}

// tokens implements Tokens with an optional scratch buffer for folding.
func tokens(dst []string, s string, buf []byte) []string {
	start := len(dst)
	dst = RawTokens(dst, s)
	for i := start; i < len(dst); i++ {
		dst[i], buf = foldString(dst[i], buf)
	}
	return dst
}

// FoldString returns s case-folded rune by rune with [Fold]. Invalid UTF-8
// bytes are replaced by U+FFFD.
func FoldString(s string) string {
	f, _ := foldString(s, nil)
	return f
}

// foldString folds s, reusing buf, and returns s itself when nothing changes
// (the common case of lower-case ASCII text allocates nothing).
func foldString(s string, buf []byte) (string, []byte) {
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			clean = false
			break
		}
	}
	if clean {
		return s, buf
	}
	buf = buf[:0]
	for _, r := range s {
		buf = utf8.AppendRune(buf, Fold(r))
	}
	if string(buf) == s {
		return s, buf
	}
	return string(buf), buf
}

// IsTokenRune reports whether r may appear in a token (see [Tokens]).
func IsTokenRune(r rune) bool { return r != utf8.RuneError && isWordPart(r) }
