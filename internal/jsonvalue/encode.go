package jsonvalue

import "unicode/utf8"

// plain holds the ASCII bytes json.Marshal writes in a string as they
// are: all but control characters, '"', '\\' and the HTML characters
// '<', '>', '&'.
var plain = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// Plain reports whether json.Marshal writes the byte c in a string as it
// is: an ASCII byte other than the ones it escapes.
func Plain(c byte) bool {
	return c < utf8.RuneSelf && plain[c]
}

// AppendString appends s as a JSON string exactly as json.Marshal writes
// it: HTML characters, control characters and U+2028/U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD. It takes bytes as well as a string,
// so that JSON held in a []byte can be quoted without a copy.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if plain[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		// At most utf8.UTFMax bytes: converting them copies nothing to
		// the heap, whichever type S is.
		c, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
