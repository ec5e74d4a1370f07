package httpserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// checkKeys walks the JSON value in body alongside the Go type t and
// refuses object keys that do not exactly match a field's JSON name, and
// keys given twice. encoding/json matches keys case-insensitively and lets
// the last duplicate win, so without this check {"Endpoint": …} would
// silently set endpoint, and {"endpoint": a, "endpoint": b} would store b
// past any check of a (SPEC 1: a typo must not silently become a default).
//
// Values of types that decode themselves (json.Unmarshaler, such as
// json.RawMessage) and of interface types are only checked for duplicate
// keys. Malformed JSON is left for the decoder to report precisely:
// checkKeys then returns nil.
func checkKeys(body []byte, t reflect.Type) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := walkKeys(dec, t, "")
	if e, ok := err.(*apiError); ok {
		return e
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func walkKeys(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // opaque: check duplicates only
	}
	tok, err := dec.Token()
	if err != nil {
		return err
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
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			name := joinPath(path, key)
			if seen[key] {
				return fieldError(name, "field %q is given twice", name)
			}
			seen[key] = true
			next := elem
			if fields != nil {
				ft, ok := fields[key]
				if !ok {
					return fieldError(name, "unknown field %q (field names are case-sensitive)", name)
				}
				next = ft
			}
			if err := walkKeys(dec, next, name); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, elem, elemPath(path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil // a scalar
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func elemPath(path string, i int) string {
	var b strings.Builder
	b.WriteString(path)
	b.WriteByte('[')
	b.WriteString(itoa(i))
	b.WriteByte(']')
	return b.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var buf [20]byte
	n := len(buf)
	for ; i > 0; i /= 10 {
		n--
		buf[n] = byte('0' + i%10)
	}
	return string(buf[n:])
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
