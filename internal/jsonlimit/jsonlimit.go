// Package jsonlimit bounds the nesting of JSON that comes from outside the
// process, before any decoder reads it.
//
// encoding/json refuses only values nested more than 10000 deep, and code
// that walks a decoded value (the strict-keys check of httpserver, deep
// copies of free-form maps, schema validation) recurses once per level.
// [CheckDepth] makes one linear pass over the bytes, with no allocation,
// so that a body of any shape costs time and memory in proportion to its
// size: the front-ends call it on every request body they parse, and
// refuse a body nested deeper than [MaxDepth].
package jsonlimit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// MaxDepth is the deepest nesting of arrays and objects accepted in a JSON
// body: the top-level object or array is depth 1. Every body of the
// mesh's protocols nests a handful of levels; free-form values (a
// delegation's context, a workflow state, tool arguments) have the rest.
const MaxDepth = 64

// ErrTooDeep is the error, matched with errors.Is, of JSON nested deeper
// than the limit; the error returned is a [*DepthError].
var ErrTooDeep = errors.New("jsonlimit: JSON nested too deeply")

// DepthError is the error [CheckDepth] returns: the JSON opens a level
// past Max at byte Offset.
type DepthError struct {
	Max    int // the limit
	Offset int // the byte offset of the '[' or '{' that passes it
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("JSON arrays and objects are nested more than %d deep (at byte %d)", e.Max, e.Offset)
}

// Is reports whether target is [ErrTooDeep].
func (e *DepthError) Is(target error) bool { return target == ErrTooDeep }

// CheckDepth returns a [*DepthError] when data nests arrays and objects
// more than max deep (max ≤ 0 means [MaxDepth]), else nil. It reads data
// once, skipping strings, and allocates nothing.
//
// It does not validate data: malformed JSON is left for the decoder to
// report. Over any prefix a JSON decoder accepts, the depth it counts is
// the decoder's, so a decoder never goes past max levels in a body that
// CheckDepth accepted.
func CheckDepth(data []byte, max int) error {
	return CheckDepthFrom(data, 0, 0, max)
}

// CheckDepthFrom is [CheckDepth] of data resumed at byte from, outside
// any string, with depth arrays and objects open there: for a parser that
// read data up to from and stopped (at an error, or at the end of the
// first value), so that together they check the depth of all of data in
// one pass. The offset of a [*DepthError] is in data.
func CheckDepthFrom(data []byte, from, depth, max int) error {
	if max <= 0 {
		max = MaxDepth
	}
	for i := from; i < len(data); i++ {
		switch data[i] {
		case '[', '{':
			depth++
			if depth > max {
				return &DepthError{Max: max, Offset: i}
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case '"':
			i = stringEnd(data, i+1)
		}
	}
	return nil
}

// stringEnd returns the index of the quote closing the string whose
// contents start at data[start], or len(data) when it is not closed. A
// quote is escaped when an odd run of backslashes, inside the string,
// precedes it.
func stringEnd(data []byte, start int) int {
	for from := start; ; {
		j := bytes.IndexByte(data[from:], '"')
		if j < 0 {
			return len(data)
		}
		q := from + j
		n := 0
		for k := q - 1; k >= start && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		from = q + 1
	}
}

// Handler returns a handler that reads the request body, at most limit
// bytes, and answers it with reject when [CheckDepth] (with [MaxDepth])
// refuses it; else it serves next with the same body, from memory. A
// body over limit is passed to next whole and unchecked: next's own limit
// answers it. Requests without a body go straight to next.
//
// It is for front-ends whose decoding is done by a library (the MCP and
// A2A SDKs): reject writes the refusal in that protocol's form.
func Handler(next http.Handler, limit int64, reject func(w http.ResponseWriter, r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		orig := r.Body
		switch {
		case err != nil || int64(len(body)) > limit:
			// next reads what was read, then the rest (or the error).
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), errReader{orig, err}), orig}
		default:
			if err := CheckDepth(body, MaxDepth); err != nil {
				reject(w, r, err)
				return
			}
			r.Body = readCloser{bytes.NewReader(body), orig}
		}
		next.ServeHTTP(w, r)
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errReader returns err when it is set, else reads r.
type errReader struct {
	r   io.Reader
	err error
}

func (e errReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return e.r.Read(p)
}
