package discovery

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzAppendJSONString checks the string encoder against encoding/json.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a href='x'>&amp;</a>", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		"\u2028\u2029", "日本語 ☃ 🙂", "\xff\xfe bad", "a\xe2\x80", "\xed\xa0\x80 surrogate"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

// FuzzAppendJSONFloat checks the float encoder against encoding/json.
func FuzzAppendJSONFloat(f *testing.F) {
	for _, x := range []float64{0, 1, 0.5066987476172752, 1e-7, 1.5e-9, 1e20, 1e21, 123456789e30, -2.5e-8, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return // json.Marshal refuses them; scores are finite
		}
		want, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONFloat(nil, x); string(got) != string(want) {
			t.Fatalf("appendJSONFloat(%v) = %s, want %s", x, got, want)
		}
	})
}
