package jsonvalue

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendString holds the string encoder, given a string or the same
// bytes, to encoding/json's encoding of the string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a href='x'>&amp;</a>", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		"\u2028\u2029", "日本語 ☃ 🙂", "\xff\xfe bad", "a\xe2\x80", "\xed\xa0\x80 surrogate", `{"results":[{"agent":{"name":"a"}}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got := AppendString([]byte("x"), []byte(s)); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(x, []byte(%q)) = %s, want x%s", s, got, want)
		}
	})
}

// FuzzAppendEscaped: the pieces of a string cut where a character starts,
// escaped one after the other, give what AppendString writes between its
// quotes.
func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{`{"a":"<b>"}`, "日本語 ☃", "a\xe2\x80b", "\xff\x00\u2028"} {
		f.Add(s, uint(1))
	}
	f.Fuzz(func(t *testing.T, s string, cut uint) {
		i := int(cut % uint(len(s)+1))
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		whole := AppendString(nil, s)
		got := AppendEscaped(AppendEscaped([]byte(`"`), s[:i]), []byte(s[i:]))
		if string(got)+`"` != string(whole) {
			t.Fatalf("%q cut at %d: %s\", want %s", s, i, got, whole)
		}
	})
}

// FuzzPlain: a byte is plain exactly when json.Marshal writes it alone in
// a string as it is.
func FuzzPlain(f *testing.F) {
	f.Add(byte('a'))
	f.Add(byte('<'))
	f.Fuzz(func(t *testing.T, c byte) {
		b, err := json.Marshal(string([]byte{c}))
		if err != nil {
			t.Fatal(err)
		}
		if want := string(b) == `"`+string([]byte{c})+`"`; Plain(c) != want {
			t.Fatalf("Plain(%#x) = %v, want %v (json.Marshal writes %s)", c, Plain(c), want, b)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	s := []byte(`{"results":[{"agent":{"name":"weather-temperature-005831","displayName":"Weather temperature agent","description":"Translates quarterly temperatures \u003cand\u003e forecasts."}}]}`)
	dst := make([]byte, 0, 2*len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		dst = AppendString(dst[:0], s)
	}
}
