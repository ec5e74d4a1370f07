package jsonvalue

import "unicode/utf8"

// The classes of bytes in a string json.Marshal writes.
const (
	asIs        = iota // written as it is
	backslashed        // '"' and '\\': a backslash, then the byte
	escaped            // control and HTML characters: an escape of its own
	multibyte          // not ASCII: a character to decode
)

// class holds the class of every byte.
var class = func() (t [256]uint8) {
	for b := range 256 {
		switch {
		case b >= utf8.RuneSelf:
			t[b] = multibyte
		case b == '"' || b == '\\':
			t[b] = backslashed
		case b < 0x20 || b == '<' || b == '>' || b == '&':
			t[b] = escaped
		}
	}
	return t
}()

// Plain reports whether json.Marshal writes the byte c in a string as it
// is: an ASCII byte other than the ones it escapes.
func Plain(c byte) bool {
	return class[c] == asIs
}

// AppendString appends s as a JSON string exactly as json.Marshal writes
// it: HTML characters, control characters and U+2028/U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD. It takes bytes as well as a string,
// so that JSON held in a []byte can be quoted without a copy.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendEscaped appends s as it stands between the quotes of the JSON
// string AppendString writes: escaped, without the quotes. Pieces of a
// string cut where a character starts, escaped one after the other, give
// the bytes of escaping it whole, so the string copy of a JSON document
// can be put together from pieces escaped once and kept.
func AppendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	start := 0 // s[start:i] is written as it is, once a byte ends the run
	next := 0  // the end of the last multibyte character decoded
	for i := range len(s) {
		b := s[i]
		// One table look-up for the common byte: a loop over the bytes
		// (an integer range, so no bounds checks) is a third faster than
		// one that steps over each character.
		if class[b] == asIs || i < next {
			continue
		}
		switch class[b] {
		case backslashed:
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\')
			start = i // the byte itself begins the next run
		case escaped:
			dst = append(dst, s[start:i]...)
			switch b {
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
			start = i + 1
		default: // the first byte of a multibyte character, or not UTF-8
			// At most utf8.UTFMax bytes: converting them copies nothing
			// to the heap, whichever type S is.
			c, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			next = i + size
			switch {
			case c == utf8.RuneError && size == 1:
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				start = next
			case c == '\u2028' || c == '\u2029':
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
				start = next
			}
		}
	}
	return append(dst, s[start:]...)
}
