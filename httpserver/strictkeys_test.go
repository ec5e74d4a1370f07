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

// checkKeys is scanBody's verdict: the depth refusal first, else the
// first other one.
func checkKeys(body []byte, t reflect.Type) *apiError {
	sc := scanBody(body, t)
	if sc.deep {
		return tooDeep()
	}
	return sc.err
}

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
		`{"labels":{"a":"","b":"","c":"","d":"","e":"","f":"","g":"","h":"","i":"","j":"","k":"","l":"","m":"","n":"","o":"","p":"",` +
			`"q":"","r":"","s":"","t":"","u":"","v":"","w":"","x":"","y":"","z":"","0":"","1":"","2":"","3":"","4":"","5":"","a":"","Z":1}}`,
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
	dec   *json.Decoder
	path  []pathSeg
	items int // the number of items of the array or object walk read last
	// limit is the item limit of the value walk reads next; counting is
	// how many open arrays and objects are past theirs (their other items
	// are only counted).
	limit, counting int
}

// name renders the path, as the scanner does (the oracle checks which
// field is named, not how a path is spelled).
func (w *refWalker) name() string { return pathName(w.path) }

func (w *refWalker) walk(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // opaque: check duplicates only
	}
	max := w.limit
	w.limit = 0
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
		var fields map[string]jsonField
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
		n := 0
		for ; w.dec.More(); n++ {
			if max > 0 && n == max {
				w.counting++
			}
			kt, err := w.dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			w.path[top].key = []byte(key)
			if w.counting > 0 {
				w.items = 0
				if err := w.walk(nil); err != nil {
					return err
				}
				continue
			}
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
				next = ft.typ
			}
			w.items = 0
			w.limit = itemLimits[t][key]
			if err := w.walk(next); err != nil {
				return err
			}
			if max, ok := itemLimits[t][key]; ok && w.items > max {
				return tooMany(t, w.name(), key, max, w.items)
			}
		}
		if max > 0 && n > max {
			w.counting--
		}
		w.path = w.path[:top]
		w.items = n
		_, err = w.dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		w.path = append(w.path, pathSeg{})
		top := len(w.path) - 1
		n := 0
		for ; w.dec.More(); n++ {
			if max > 0 && n == max {
				w.counting++
				elem = nil
			}
			w.path[top].index = n
			if err := w.walk(elem); err != nil {
				return err
			}
		}
		if max > 0 && n > max {
			w.counting--
		}
		w.path = w.path[:top]
		w.items = n
		_, err = w.dec.Token() // ']'
		return err
	}
	return nil // a scalar
}

// TestCheckKeysLimits: lists and maps over their item limits, and
// free-form values over their budget, are refused naming the field,
// after one pass that counts but no longer checks the items past the
// limit; at the limits the body passes.
func TestCheckKeysLimits(t *testing.T) {
	list := func(n int, item string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = strings.ReplaceAll(item, "#", strconv.Itoa(i))
		}
		return strings.Join(items, ",")
	}
	agent := reflect.TypeFor[*registry.Agent]()
	disc := reflect.TypeFor[*discoverBody]()
	del := reflect.TypeFor[*delegateBody]()
	for _, c := range []struct {
		name  string
		typ   reflect.Type
		body  string
		field string // "": accepted
		msg   string
	}{
		{"capabilities at the limit", agent, `{"capabilities":[` + list(64, `"c"`) + `]}`, "", ""},
		{"capabilities over", agent, `{"capabilities":[` + list(65, `"c"`) + `]}`, "capabilities", "invalid capabilities: must have at most 64 items, got 65"},
		{"labels over, as Validate words it", agent, `{"labels":{` + list(40, `"k#":"v"`) + `}}`, "labels", "invalid labels: must have at most 32 entries, got 40"},
		{"examples over", agent, `{"examples":[` + list(201, `"e"`) + `]}`, "examples", "invalid examples: must have at most 200 items, got 201"},
		{"resources over", agent, `{"resources":[` + list(65, `{"uri":"u"}`) + `]}`, "resources", "invalid resources: must have at most 64 items, got 65"},
		{"discovery labels over", disc, `{"labels":{` + list(33, `"k#":"v"`) + `}}`, "labels", "invalid labels: must have at most 32 items, got 33"},
		{"discovery resources over", disc, `{"requiredResources":[` + list(70, `"u"`) + `]}`, "requiredResources", "invalid requiredResources: must have at most 64 items, got 70"},
		{"delegation resources at the limit", del, `{"resources":[` + list(64, `"u"`) + `]}`, "", ""},
		// Past the limit, items are only counted: a duplicate or an
		// unknown key among them is not what is reported.
		{"duplicates past the limit", disc, `{"labels":{` + list(32, `"k#":"v"`) + `,"k0":"v","K":1}}`, "labels", "invalid labels: must have at most 32 items, got 34"},
		{"a duplicate within the limit", disc, `{"labels":{"k":"v","k":"w"}}`, "labels.k", `field "labels.k" is given twice`},
		{"context at the budget", del, `{"context":{"a":[` + list(maxFreeFormValues-2, `1`) + `]}}`, "", ""},
		{"context over the budget", del, `{"context":{"a":[` + list(maxFreeFormValues-1, `1`) + `]}}`, "context", ""},
		{"context keys over the budget", del, `{"context":{` + list(maxFreeFormValues, `"k#":1`) + `}}`, "context", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := checkKeys([]byte(c.body), c.typ)
			if c.field == "" {
				if e != nil {
					t.Fatalf("refused: %+v", e)
				}
				return
			}
			if e == nil {
				t.Fatal("accepted")
			}
			if e.status != http.StatusBadRequest || e.code != apierr.CodeInvalidArgument {
				t.Fatalf("%d %s, want 400 invalid_argument", e.status, e.code)
			}
			if !strings.Contains(string(mustJSON(t, e.details)), `"`+c.field+`"`) {
				t.Errorf("details %v do not name %s", e.details, c.field)
			}
			if c.msg != "" && e.msg != c.msg {
				t.Errorf("message %q, want %q", e.msg, c.msg)
			}
		})
	}
}

// TestCheckKeysDepthFirst: a body nested too deep is refused as such
// wherever the nesting is, even after an unknown key, a type the value
// does not fit, malformed JSON or the end of the first value.
func TestCheckKeysDepthFirst(t *testing.T) {
	deep := strings.Repeat("[", jsonlimit.MaxDepth+1)
	for _, body := range []string{
		`{"bogus":1,"query":` + deep,
		`{"labels":[],"query":` + deep,
		`{"query" 1, ` + deep,
		`{"query":"x"} ` + deep,
		`{"labels":{` + strings.Repeat(`"k":"v",`, 40) + `"x":` + deep,
	} {
		if e := checkKeys([]byte(body), reflect.TypeFor[*discoverBody]()); e == nil || !strings.Contains(e.msg, "deep") {
			t.Errorf("%.60q: %+v, want the depth refusal", body, e)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
