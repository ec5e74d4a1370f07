package discovery

import (
	"encoding/json"
	"math"
	"testing"
)

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
