package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/jsonlimit"
	"github.com/agentmesh/agentmesh/registry"
)

// FuzzCheckKeys feeds arbitrary bodies to the depth guard and the
// strict-keys pass, with the shapes of the API's bodies. Neither may
// panic; a refusal is a 400 invalid_argument; on valid JSON checkKeys
// refuses exactly what a walk over json.Decoder.Token refuses, with the
// same message; and a valid body both accept has no key encoding/json
// would match loosely: it decodes with unknown fields disallowed, to what
// a plain decode gives.
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","labels":{"k":"v"},"auth":{"type":"bearer","token":"t"}}`,
		`{"Name":"a"}`, `{"name":"a","name":"b"}`, `{"labels":{"k":"v","k":"w"}}`,
		`{"query":"x","resources":[{"uri":"a","uri":"b"}],"labels":{}}`,
		`{"targetName":"a","task":"t","context":{"a":{"b":[{"c":1,"c":2}]}}}`,
		`{"targetName":"a","context":{"\u006b":1,"k":2}}`, `{"na\u006de":"a"}`,
		`[{"a":1}]`, `{"a":`, `{"context":[[[[[[[[]]]]]]]]}`, strings.Repeat(`{"context":`, 70),
	} {
		for shape := range uint8(3) {
			f.Add([]byte(s), shape)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, shape uint8) {
		var typ reflect.Type
		switch shape % 3 {
		case 0:
			typ = reflect.TypeFor[*registry.Agent]()
		case 1:
			typ = reflect.TypeFor[*discoverBody]()
		default:
			typ = reflect.TypeFor[*delegateBody]()
		}
		if !utf8.Valid(body) || jsonlimit.CheckDepth(body, jsonlimit.MaxDepth) != nil {
			return // what decodeJSON refuses before checkKeys
		}
		e := checkKeys(body, typ)
		if json.Valid(body) {
			ref := refCheckKeys(body, typ)
			if (e == nil) != (ref == nil) || e != nil && (e.msg != ref.msg || !reflect.DeepEqual(e.details, ref.details)) {
				t.Fatalf("%q: checkKeys %+v, the Token-based reference %+v", body, e, ref)
			}
		}
		if e != nil {
			if e.status != http.StatusBadRequest || e.code != apierr.CodeInvalidArgument || e.msg == "" {
				t.Fatalf("checkKeys error %+v", e)
			}
			return
		}
		if !json.Valid(body) {
			return
		}
		strict := reflect.New(typ.Elem()).Interface()
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		errStrict := dec.Decode(strict)
		if errStrict != nil {
			if _, unknown := unknownField(errStrict); unknown {
				t.Fatalf("checkKeys accepted %q, the decoder finds an unknown field: %v", body, errStrict)
			}
		}
		plain := reflect.New(typ.Elem()).Interface()
		errPlain := json.Unmarshal(body, plain)
		if (errStrict == nil) != (errPlain == nil) {
			t.Fatalf("%q: strict decode %v, plain decode %v", body, errStrict, errPlain)
		}
		if errStrict == nil && !reflect.DeepEqual(strict, plain) {
			t.Fatalf("%q: strict decode %+v, plain decode %+v", body, strict, plain)
		}
	})
}

// refCheckKeys is checkKeys as it was written over json.Decoder.Token:
// the reference FuzzCheckKeys holds checkKeys to on valid JSON.
var errTypeMismatch = errors.New("type mismatch")

func refCheckKeys(body []byte, t reflect.Type) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := refWalker{dec: dec}
	err := w.walk(t)
	if e, ok := err.(*apiError); ok {
		return e
	}
	return nil
}

// refWalker is the state of one checkKeys pass: the decoder and the path
// to the value being read, one segment per level.
type refWalker struct {
	dec  *json.Decoder
	path []refSeg
}

// refSeg is one level of a path: an object key, or an array index when
// key is not set.
type refSeg struct {
	key   string
	isKey bool
	index int
}

// name renders the path ("agents[2].labels.x"), for an error message.
func (w *refWalker) name() string {
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

func (w *refWalker) walk(t reflect.Type) error {
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
		if t != nil && !fits(t.Kind(), byte(tok.(json.Delim))) {
			return errTypeMismatch // a type error, for the decoder to name
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
		w.path = append(w.path, refSeg{isKey: true})
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
		w.path = append(w.path, refSeg{})
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
