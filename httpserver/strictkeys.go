package httpserver

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/internal/jsonlimit"
)

// checkKeys walks the JSON value in body alongside the Go type t and
// refuses object keys that do not exactly match a field's JSON name, and
// keys given twice. encoding/json matches keys case-insensitively and lets
// the last duplicate win, so without this check {"Endpoint": …} would
// silently set endpoint, and {"endpoint": a, "endpoint": b} would store b
// past any check of a: a typo must not silently become a default.
//
// Values of types that decode themselves (json.Unmarshaler, such as
// json.RawMessage) and of interface types are only checked for duplicate
// keys. A value whose JSON kind does not fit its type, and malformed
// JSON, are left for the decoder to report precisely: checkKeys then
// stops and returns nil.
//
// body must be valid UTF-8 (decodeJSON checks it first): keys are
// compared, and named in errors, as their bytes. It reads body once, in
// place: its cost is linear in len(body), with an
// allocation per key of a map or free-form object (for the duplicate
// check) and none for a struct's fields. The caller has bounded the
// nesting ([jsonlimit.CheckDepth]; checkKeys refuses a deeper body too,
// should one reach it), and the path naming a field is built only for the
// error that names it.
func checkKeys(body []byte, t reflect.Type) *apiError {
	k := keyScanner{data: body}
	e, _ := k.value(t)
	return e
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// keyScanner is the state of one checkKeys pass: the body, the offset
// read up to, and the path to the value being read, one segment per
// level.
type keyScanner struct {
	data []byte
	pos  int
	path []pathSeg
}

// pathSeg is one level of a path: an object key, or an array index when
// isKey is false.
type pathSeg struct {
	key   string
	isKey bool
	index int
}

// name renders the path ("agents[2].labels.x"), for an error message.
func (k *keyScanner) name() string {
	var b strings.Builder
	for i, s := range k.path {
		if !s.isKey {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return b.String()
}

// fits reports whether a value of kind k decodes from a JSON value opened
// by c ('{' or '[').
func fits(k reflect.Kind, c byte) bool {
	if c == '{' {
		return k == reflect.Struct || k == reflect.Map
	}
	return k == reflect.Slice || k == reflect.Array
}

// tooDeep is the error of a body nested deeper than jsonlimit.MaxDepth.
func tooDeep() *apiError {
	return badRequest("the request body nests arrays and objects more than %d deep", jsonlimit.MaxDepth)
}

// skipSpace moves past JSON whitespace and returns the next byte, 0 at
// the end.
func (k *keyScanner) skipSpace() byte {
	for ; k.pos < len(k.data); k.pos++ {
		switch c := k.data[k.pos]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

// str reads the string at k.pos (its opening quote) and returns its
// contents, raw, and whether they hold an escape. ok is false when the
// string is not closed.
func (k *keyScanner) str() (raw []byte, escaped, ok bool) {
	start := k.pos + 1
	for i := start; i < len(k.data); i++ {
		switch k.data[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			k.pos = i + 1
			return k.data[start:i], escaped, true
		}
	}
	return nil, false, false
}

// value checks the value at k.pos, of Go type t (nil: opaque, duplicate
// keys only). It returns the refusal, if any, and ok false when checkKeys
// must stop: after a refusal, at malformed JSON, or at a value whose kind
// does not fit t.
func (k *keyScanner) value(t reflect.Type) (*apiError, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // opaque: check duplicates only
	}
	switch c := k.skipSpace(); c {
	case '{', '[':
		if len(k.path) >= jsonlimit.MaxDepth {
			return tooDeep(), false
		}
		if t != nil && !fits(t.Kind(), c) {
			return nil, false // a type error, for the decoder to name
		}
		k.pos++
		if c == '{' {
			return k.object(t)
		}
		return k.array(t)
	case '"':
		_, _, ok := k.str()
		return nil, ok
	case 0, ',', ':', ']', '}':
		return nil, false // malformed
	}
	// A number, true, false or null: the decoder validates it.
	for ; k.pos < len(k.data); k.pos++ {
		switch k.data[k.pos] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return nil, true
		}
	}
	return nil, true
}

// object checks the members of an object of type t (a struct, a map, or
// nil), k.pos just past its '{'.
func (k *keyScanner) object(t reflect.Type) (*apiError, bool) {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		if t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		} else {
			elem = t.Elem()
		}
	}
	var seen map[string]struct{}
	k.path = append(k.path, pathSeg{isKey: true})
	top := len(k.path) - 1
	if k.skipSpace() == '}' {
		k.pos++
		k.path = k.path[:top]
		return nil, true
	}
	for {
		if k.skipSpace() != '"' {
			return nil, false
		}
		raw, escaped, ok := k.str()
		if !ok {
			return nil, false
		}
		var key string
		if escaped {
			if json.Unmarshal(k.data[k.pos-len(raw)-2:k.pos], &key) != nil {
				return nil, false
			}
		} else {
			key = string(raw)
		}
		k.path[top].key = key
		if seen == nil {
			seen = map[string]struct{}{}
		}
		if _, dup := seen[key]; dup {
			name := k.name()
			return fieldError(name, "field %q is given twice", name), false
		}
		seen[key] = struct{}{}
		next := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				name := k.name()
				return fieldError(name, "unknown field %q (field names are case-sensitive)", name), false
			}
			next = ft
		}
		if k.skipSpace() != ':' {
			return nil, false
		}
		k.pos++
		if e, ok := k.value(next); !ok {
			return e, false
		}
		switch k.skipSpace() {
		case ',':
			k.pos++
		case '}':
			k.pos++
			k.path = k.path[:top]
			return nil, true
		default:
			return nil, false
		}
	}
}

// array checks the elements of an array of type t (a slice, an array, or
// nil), k.pos just past its '['.
func (k *keyScanner) array(t reflect.Type) (*apiError, bool) {
	var elem reflect.Type
	if t != nil {
		elem = t.Elem()
	}
	k.path = append(k.path, pathSeg{})
	top := len(k.path) - 1
	if k.skipSpace() == ']' {
		k.pos++
		k.path = k.path[:top]
		return nil, true
	}
	for i := 0; ; i++ {
		k.path[top].index = i
		if e, ok := k.value(elem); !ok {
			return e, false
		}
		switch k.skipSpace() {
		case ',':
			k.pos++
		case ']':
			k.pos++
			k.path = k.path[:top]
			return nil, true
		default:
			return nil, false
		}
	}
}

// fieldCache maps a struct type to its JSON field names and types.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields returns the JSON names of t's fields as encoding/json sees
// them: the json tag name, else the Go name; "-" skipped; embedded structs
// without a tag flattened.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, dup := m[k]; !dup {
						m[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = ft
	}
	fieldCache.Store(t, m)
	return m
}
