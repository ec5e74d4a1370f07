package jsonlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckDepth(t *testing.T) {
	for _, c := range []struct {
		in     string
		max    int
		offset int // -1: accepted
	}{
		{``, 1, -1},
		{`1`, 1, -1},
		{`[]`, 1, -1},
		{`[[]]`, 1, 1},
		{`[[]]`, 2, -1},
		{`{"a":{"b":[1]}}`, 3, -1},
		{`{"a":{"b":[1]}}`, 2, 10},
		{`["[[[[", "{{{"]`, 1, -1},             // brackets in strings
		{`["\"[[", "\\", [1]]`, 1, 15},         // escaped quotes and backslashes
		{`["\\\"[", "x"]`, 1, -1},              // an odd run escapes the quote
		{`[] [] [] [[]]`, 1, 10},               // several values
		{`]]]]]][[`, 1, 7},                     // malformed: never below 0
		{`["unterminated [[[[`, 1, -1},         // malformed: left to the decoder
		{strings.Repeat("[", 65), 0, MaxDepth}, // max ≤ 0: MaxDepth
		{strings.Repeat("[", 64), 0, -1},
	} {
		err := CheckDepth([]byte(c.in), c.max)
		if c.offset < 0 {
			assert.NoError(t, err, "%q", c.in)
			continue
		}
		var de *DepthError
		require.ErrorAs(t, err, &de, "%q", c.in)
		assert.ErrorIs(t, err, ErrTooDeep)
		assert.Equal(t, c.offset, de.Offset, "%q", c.in)
	}
}

func TestCheckDepthAllocatesNothing(t *testing.T) {
	body := []byte(strings.Repeat(`{"a":"\"[",`, 60) + `1` + strings.Repeat("}", 60))
	assert.Zero(t, testing.AllocsPerRun(10, func() { _ = CheckDepth(body, MaxDepth) }))
}

// decoderDepth is the deepest nesting a json.Decoder reads in data before
// it stops (at the end or at an error): the reference for CheckDepth.
func decoderDepth(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// FuzzCheckDepth: CheckDepth never panics, and it refuses exactly the
// inputs a JSON decoder would read deeper than the limit: the decoder
// never goes past the limit in an accepted input, and a valid JSON value
// that is refused is one the decoder reads past it.
func FuzzCheckDepth(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,{"b":null}]}`, `["\"[", "\\"]`, `[[[[`, `]]][[`, `"[[[`, `{"a":"\u005b"}`,
		`[1] [[2]]`, `{"k":"v\\"}`, "[\"\xff[\"]",
	} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		max := int(limit%8) + 1
		err := CheckDepth(data, max)
		d := decoderDepth(data)
		if err == nil && d > max {
			t.Fatalf("accepted %q (limit %d), which a decoder reads %d deep", data, max, d)
		}
		if err != nil && json.Valid(data) && d <= max {
			t.Fatalf("refused valid %q (limit %d), only %d deep: %v", data, max, d, err)
		}
	})
}

func TestHandler(t *testing.T) {
	var got []byte
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		got = b
	})
	h := Handler(next, 100, func(w http.ResponseWriter, r *http.Request, err error) {
		assert.ErrorIs(t, err, ErrTooDeep)
		w.WriteHeader(http.StatusTeapot)
	})
	serve := func(body string) int {
		got = nil
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	assert.Equal(t, http.StatusOK, serve(`{"a":[1]}`))
	assert.Equal(t, `{"a":[1]}`, string(got))
	assert.Equal(t, http.StatusTeapot, serve(strings.Repeat("[", 65)))
	assert.Nil(t, got, "a refused body never reaches next")

	// Over the limit: next reads it whole, unchecked (its own limit answers).
	long := strings.Repeat("[", 150)
	assert.Equal(t, http.StatusOK, serve(long))
	assert.Equal(t, long, string(got))

	// A read error is passed on to next, after the bytes read.
	h2 := Handler(next, 1<<20, nil)
	r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader("[1"), errorReader{}))
	w := httptest.NewRecorder()
	h2.ServeHTTP(w, r)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Contains(t, w.Body.String(), "boom")

	// No body: straight to next.
	r = httptest.NewRequest(http.MethodGet, "/", nil)
	w = httptest.NewRecorder()
	h2.ServeHTTP(w, r)
	assert.Equal(t, http.StatusOK, w.Code)
}

type errorReader struct{}

func (errorReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

// TestCheckDepthFrom: resumed at any byte outside a string with the
// depth open there, after a prefix within the limit, CheckDepthFrom
// finds what CheckDepth finds.
func TestCheckDepthFrom(t *testing.T) {
	for _, in := range []string{`{"a":[[1,"[["],{"b":[[]]}]}`, `[[[` + `"]]]"` + `[[]]]]]`, `[] [[[[]]]]`} {
		for lim := 1; lim < 6; lim++ {
			want := CheckDepth([]byte(in), lim)
			depth, peak := 0, 0 // peak: the deepest of the prefix read
			for from := 0; from <= len(in); from++ {
				if from > 0 && !inString([]byte(in), from-1) {
					switch in[from-1] {
					case '[', '{':
						depth++
						peak = max(peak, depth)
					case ']', '}':
						depth = max(depth-1, 0)
					}
				}
				if inString([]byte(in), from) || peak > lim {
					continue
				}
				got := CheckDepthFrom([]byte(in), from, depth, lim)
				if (got == nil) != (want == nil) {
					t.Errorf("%q max %d from %d: %v, CheckDepth %v", in, lim, from, got, want)
				}
			}
		}
	}
}

// inString reports whether data[from] is inside a string (or its closing
// quote).
func inString(data []byte, from int) bool {
	in := false
	for i := 0; i < from; i++ {
		switch {
		case in && data[i] == '\\':
			i++
		case data[i] == '"':
			in = !in
		}
	}
	return in
}
