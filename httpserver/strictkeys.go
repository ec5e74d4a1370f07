package httpserver

import (
	"bytes"
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
// keys. Malformed JSON is left for the decoder to report precisely:
// checkKeys then returns nil.
//
// Its cost is linear in the size of body: the caller has bounded the
// nesting ([jsonlimit.CheckDepth]; checkKeys refuses a deeper body too,
// should one reach it), and the path naming a field is built only for
// the error that names it.
func checkKeys(body []byte, t reflect.Type) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := keyWalker{dec: dec}
	err := w.walk(t)
	if e, ok := err.(*apiError); ok {
		return e
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// keyWalker is the state of one checkKeys pass: the decoder and the path
// to the value being read, one segment per level.
type keyWalker struct {
	dec  *json.Decoder
	path []pathSeg
}

// pathSeg is one level of a path: an object key, or an array index when
// key is not set.
type pathSeg struct {
	key   string
	isKey bool
	index int
}

// name renders the path ("agents[2].labels.x"), for an error message.
func (w *keyWalker) name() string {
	var b strings.Builder
	for i, s := range w.path {
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
// by d.
func fits(k reflect.Kind, d json.Delim) bool {
	if d == '{' {
		return k == reflect.Struct || k == reflect.Map
	}
	return k == reflect.Slice || k == reflect.Array
}

// tooDeep is the error of a body nested deeper than jsonlimit.MaxDepth.
func tooDeep() *apiError {
	return badRequest("the request body nests arrays and objects more than %d deep", jsonlimit.MaxDepth)
}

func (w *keyWalker) walk(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // opaque: check duplicates only
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'), json.Delim('['):
		if len(w.path) >= jsonlimit.MaxDepth {
			return tooDeep()
		}
		if t != nil && !fits(t.Kind(), tok.(json.Delim)) {
			return nil // a type error, for the decoder to name
		}
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = jsonFields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		var seen map[string]struct{}
		w.path = append(w.path, pathSeg{isKey: true})
		top := len(w.path) - 1
		for w.dec.More() {
			kt, err := w.dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			w.path[top].key = key
			if seen == nil {
				seen = map[string]struct{}{}
			}
			if _, dup := seen[key]; dup {
				name := w.name()
				return fieldError(name, "field %q is given twice", name)
			}
			seen[key] = struct{}{}
			next := elem
			if fields != nil {
				ft, ok := fields[key]
				if !ok {
					name := w.name()
					return fieldError(name, "unknown field %q (field names are case-sensitive)", name)
				}
				next = ft
			}
			if err := w.walk(next); err != nil {
				return err
			}
		}
		w.path = w.path[:top]
		_, err = w.dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		w.path = append(w.path, pathSeg{})
		top := len(w.path) - 1
		for i := 0; w.dec.More(); i++ {
			w.path[top].index = i
			if err := w.walk(elem); err != nil {
				return err
			}
		}
		w.path = w.path[:top]
		_, err = w.dec.Token() // ']'
		return err
	}
	return nil // a scalar
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
