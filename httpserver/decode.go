package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes
// is 0: larger bodies get 413 payload_too_large.
const DefaultMaxBodyBytes = 1 << 20

// readBody checks the request's Content-Type and reads its body, at most
// limit bytes, into a buffer of its own.
//
// A missing Content-Type is accepted (clients of the seed send JSON
// without one); any other type than application/json or application/*+json
// (charset, if given, utf-8) is refused with 415.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	return readBodyInto(w, r, limit, new(bytes.Buffer))
}

// readBodyInto is readBody reading into buf (reset first); the body it
// returns is buf's bytes.
func readBodyInto(w http.ResponseWriter, r *http.Request, limit int64, buf *bytes.Buffer) ([]byte, *apiError) {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		mt, params, err := mime.ParseMediaType(ct)
		isJSON := err == nil && (mt == "application/json" ||
			(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")))
		if cs, ok := params["charset"]; isJSON && ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
			isJSON = false
		}
		if !isJSON {
			return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
				"the request body must be JSON (Content-Type: application/json)")
		}
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	buf.Reset()
	buf.Grow(int(max(r.ContentLength, 0)) + bytes.MinRead)
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, badRequest("could not read the request body")
	}
	return body, nil
}

// bodyBuffers recycles the buffers decodeBody reads request bodies into.
// A body's bytes are not needed once it is decoded: encoding/json copies
// what the value keeps (strings, json.RawMessage), and so do our own
// UnmarshalJSON methods.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest buffer put back in bodyBuffers: the rare
// large body does not keep its memory alive in the pool.
const maxPooledBody = 64 << 10

func tooLarge(limit int64) *apiError {
	return errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
		"the request body is over the limit of %d bytes", limit)
}

// decodeJSON decodes body, which must hold exactly one JSON value of dst's
// shape, into dst, which points to a zero value. Arrays and objects
// nested more than jsonlimit.MaxDepth deep, unknown object keys (matched
// case-sensitively, see scanBody), duplicate keys, lists and maps over
// their item limits, free-form values over their budget, wrong types,
// malformed or trailing data and invalid UTF-8 are refused with a 400 invalid_argument that names the field
// where one is known. It never panics and every error it returns carries
// a code. Its cost is linear in len(body): one pass checks the depth, the
// keys and the limits, allocating nothing per struct field, and only then
// does encoding/json decode, into at most as many items as the limits
// allow, reading the resource lists once (decodeSpliced).
func decodeJSON(body []byte, dst any) *apiError {
	sc, e := scanChecked(body, reflect.TypeOf(dst))
	if e != nil {
		return e
	}
	if len(sc.lists) > 0 && decodeSpliced(body, dst, sc) {
		return nil
	}
	return decodeValue(body, dst, sc.end, sc.free)
}

// scanChecked is the checking step of decodeJSON: scanBody's findings
// on body, for a value of type t, and the refusals made before anything
// decodes, the depth refusal first.
func scanChecked(body []byte, t reflect.Type) (scan, *apiError) {
	sc := scanBody(body, t)
	switch {
	case sc.deep:
		return sc, tooDeep()
	case len(bytes.TrimSpace(body)) == 0:
		return sc, badRequest("a JSON request body is required")
	case !utf8.Valid(body):
		return sc, badRequest("the request body is not valid UTF-8")
	case sc.err != nil:
		return sc, sc.err
	case sc.topMismatch && json.Valid(body):
		// What the decoder would say, after reading all of body twice.
		return sc, badRequest("the request body must be %s, not %s", jsonKind(t), map[byte]string{'[': "array", '{': "object"}[bytes.TrimLeft(body, " \t\r\n")[0]])
	}
	return sc, nil
}

// decodeValue decodes body into dst with encoding/json: the decoding
// step of decodeJSON, once scanBody found the first value to end at end
// (-1: not read whole) and whether it holds a free-form value.
func decodeValue(body []byte, dst any, end int, free bool) *apiError {
	if end >= 0 && !free {
		// The whole value was read and its keys are known; with no
		// free-form value, numbers need no json.Number, and Unmarshal
		// decodes without the Decoder's growing copy of the body.
		if err := json.Unmarshal(body[:end], dst); err != nil {
			return jsonError(err)
		}
		if len(bytes.TrimSpace(body[end:])) > 0 {
			return badRequest("unexpected data after the JSON value")
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber() // numbers in free-form values (a delegation's context) keep their digits
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("unexpected data after the JSON value")
	}
	return nil
}

// decodeSpliced decodes a body whose resource lists scanBody read whole,
// each list read once: where every list is of the shapes simpleResources
// reads, it decodes a copy of the body with each list replaced by [] and
// then sets the lists' fields to the URIs simpleResources read. It
// reports false, dst zero again, for decodeValue to decode the body as
// it is, when a list is of another shape or the copy does not decode
// (the error is then decodeValue's, at the offsets of the body).
//
// The result is what decodeValue gives: a list simpleResources reads is
// valid JSON that (*resourceList).decode decodes, without error, to the
// same URIs, so the rest of the body decodes alike either way
// (FuzzDecodeSpliced). What it saves: encoding/json hands a value that
// decodes itself (json.Unmarshaler) over only after stepping its scanner
// over all of the value's bytes again, and the list decodes each element
// with a decoder of its own, so the layered decode reads each byte of a
// list about seven times, and a 1 MiB list costs 2.3 plain decodes of
// the body (docs/BENCHMARKS.md#hostile-request-bodies).
func decodeSpliced(body []byte, dst any, sc scan) bool {
	v := reflect.ValueOf(dst)
	if sc.end < 0 || v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct ||
		len(bytes.TrimSpace(body[sc.end:])) > 0 {
		return false
	}
	uris := make([][]string, len(sc.lists))
	n := sc.end
	for i, l := range sc.lists {
		u, ok := simpleResources(body[l.start:l.end])
		if !ok {
			return false
		}
		uris[i] = u
		n -= l.end - l.start - len("[]")
	}
	spliced := make([]byte, 0, n)
	prev := 0
	for _, l := range sc.lists {
		spliced = append(append(spliced, body[prev:l.start]...), "[]"...)
		prev = l.end
	}
	spliced = append(spliced, body[prev:sc.end]...)
	s := v.Elem()
	if decodeValue(spliced, dst, len(spliced), sc.free) != nil {
		s.SetZero()
		return false
	}
	for i, l := range sc.lists {
		f := s.Field(l.field)
		f.Set(reflect.ValueOf(uris[i]).Convert(f.Type()))
	}
	return true
}

// jsonError turns an encoding/json error into a 400 naming the field.
func jsonError(err error) *apiError {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		fe  *fieldDecodeError
	)
	switch {
	case errors.As(err, &fe):
		return fieldError(fe.field, "invalid %s: %s", fe.field, fe.msg)
	case errors.As(err, &syn):
		return badRequest("malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("malformed JSON: unexpected end of the body")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("the request body must be %s, not %s", jsonKind(typ.Type), typ.Value)
		}
		return fieldError(typ.Field, "invalid %s: must be %s, not %s", typ.Field, jsonKind(typ.Type), typ.Value)
	}
	if name, ok := unknownField(err); ok {
		return fieldError(name, "unknown field %q", name)
	}
	return badRequest("malformed JSON: %v", err)
}

// jsonKind names the JSON form of a Go type, for error messages.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

// fieldDecodeError is returned by custom UnmarshalJSON methods to name the
// field at fault.
type fieldDecodeError struct {
	field string
	msg   string
}

func (e *fieldDecodeError) Error() string { return e.field + ": " + e.msg }

// resourceList is a list of required resource URIs. On the wire it is a
// JSON array whose elements are strings or objects with a string "uri"
// (and optionally "type", "description", "access", which are ignored): the
// seed's [{"type":"filesystem","uri":"/path"}] form.
type resourceList []string

func (l *resourceList) UnmarshalJSON(b []byte) error {
	return l.decode(b, "resources")
}

func (l *resourceList) decode(b []byte, field string) error {
	var items []resourceItem
	if err := json.Unmarshal(b, &items); err != nil {
		return &fieldDecodeError{field, "must be an array of resource URIs or {\"uri\": …} objects"}
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		if it.msg != "" {
			return &fieldDecodeError{elem(field, i) + it.sub, it.msg}
		}
		out = append(out, it.uri)
	}
	*l = out
	return nil
}

// resourceItem is an element of a resourceList: its URI, or what is wrong
// with it (msg, about the element's sub-field sub). Decoding one never
// fails, so that the list can name the element at fault; each element's
// bytes are decoded once.
type resourceItem struct {
	uri, sub, msg string
}

func (it *resourceItem) UnmarshalJSON(b []byte) error {
	const shape = "must be a string or an object {\"uri\": …}"
	if b[0] == '"' { // encoding/json passes a valid, whole value
		if json.Unmarshal(b, &it.uri) != nil {
			it.msg = shape
		} else if it.uri == "" {
			it.msg = "must not be empty"
		}
		return nil
	}
	var obj struct {
		URI         *string `json:"uri"`
		Type        string  `json:"type"`
		Description string  `json:"description"`
		Access      string  `json:"access"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	switch err := dec.Decode(&obj); {
	case err != nil:
		it.msg = shape
		if name, ok := unknownField(err); ok {
			it.msg = "unknown field " + strconv.Quote(name)
		}
	case obj.URI == nil || *obj.URI == "":
		it.sub, it.msg = ".uri", "is required"
	default:
		it.uri = *obj.URI
	}
	return nil
}

// simpleResources reads the resource list b holds when it is an array
// whose elements are each a non-empty string, or an object of string
// members "uri" (non-empty), "type", "description" and "access", each
// given at most once, "uri" required: what clients send (encoding/json
// matches these keys exactly before it tries a looser match). It returns
// the URIs, and ok false for any other bytes, for (*resourceList).decode
// to judge. Where ok, b is valid JSON that decode decodes to the same
// URIs; it reads b once.
func simpleResources(b []byte) (uris []string, ok bool) {
	r := resourceReader{data: b}
	if r.skipSpace() != '[' {
		return nil, false
	}
	r.pos++
	uris = []string{} // as decode leaves an empty list
	if r.skipSpace() == ']' {
		r.pos++
		return r.end(uris)
	}
	for {
		var uri string
		switch r.skipSpace() {
		case '"':
			uri, ok = r.str()
		case '{':
			r.pos++
			uri, ok = r.object()
		default:
			return nil, false
		}
		if !ok || uri == "" {
			return nil, false
		}
		uris = append(uris, uri)
		switch r.skipSpace() {
		case ',':
			r.pos++
		case ']':
			r.pos++
			return r.end(uris)
		default:
			return nil, false
		}
	}
}

// end returns uris, the list read, where nothing but space follows it.
func (r *resourceReader) end(uris []string) ([]string, bool) {
	if r.skipSpace(); r.pos < len(r.data) {
		return nil, false
	}
	return uris, true
}

// resourceReader is the state of one simpleResources read: the bytes
// and the offset read up to.
type resourceReader struct {
	data []byte
	pos  int
}

// skipSpace moves past JSON whitespace and returns the next byte, 0 at
// the end.
func (r *resourceReader) skipSpace() byte {
	for ; r.pos < len(r.data); r.pos++ {
		switch c := r.data[r.pos]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

// str reads the JSON string at r.pos (its opening quote) and returns its
// value, decoded as encoding/json decodes it; ok is false where the
// string is not valid JSON or not valid UTF-8.
func (r *resourceReader) str() (s string, ok bool) {
	start, escaped := r.pos, false
	for i := start + 1; i < len(r.data); i++ {
		switch c := r.data[i]; {
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			r.pos = i + 1
			raw := r.data[start:r.pos]
			if escaped {
				return s, json.Unmarshal(raw, &s) == nil
			}
			raw = raw[1 : len(raw)-1]
			return string(raw), utf8.Valid(raw)
		case c < ' ':
			return "", false
		}
	}
	return "", false
}

// object reads the members of a resource object, r.pos just past its
// '{', and returns its URI; ok is false for an object of another shape.
func (r *resourceReader) object() (uri string, ok bool) {
	var seen uint8
	for {
		if r.skipSpace() != '"' {
			return "", false
		}
		key, ok := r.str()
		if !ok {
			return "", false
		}
		var bit uint8
		switch key {
		case "uri":
			bit = 1
		case "type":
			bit = 2
		case "description":
			bit = 4
		case "access":
			bit = 8
		}
		if bit == 0 || seen&bit != 0 || r.skipSpace() != ':' {
			return "", false
		}
		seen |= bit
		r.pos++
		if r.skipSpace() != '"' {
			return "", false
		}
		val, ok := r.str()
		if !ok {
			return "", false
		}
		if bit == 1 {
			uri = val
		}
		switch r.skipSpace() {
		case ',':
			r.pos++
		case '}':
			r.pos++
			return uri, seen&1 != 0
		default:
			return "", false
		}
	}
}

func elem(field string, i int) string {
	return field + "[" + strconv.Itoa(i) + "]"
}

// requiredResourceList is a resourceList under the name "requiredResources".
type requiredResourceList []string

func (l *requiredResourceList) UnmarshalJSON(b []byte) error {
	return (*resourceList)(l).decode(b, "requiredResources")
}

// unknownField returns the field a Decoder with DisallowUnknownFields
// refused. encoding/json reports it with no type to read the name from,
// so its text is read: the one place that reads encoding/json's words
// (scanBody refuses unknown keys before decoding; this is a fallback).
func unknownField(err error) (string, bool) {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	return strings.Trim(name, `"`), ok
}
