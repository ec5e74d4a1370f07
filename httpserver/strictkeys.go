package httpserver

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/internal/jsonlimit"
	"github.com/agentmesh/agentmesh/registry"
)

// scan is what scanBody found in a body.
type scan struct {
	deep bool      // it nests more than jsonlimit.MaxDepth deep somewhere
	err  *apiError // the first other refusal
	// end is the length of the first value when the walk read all of it
	// with no refusal, else -1.
	end int
	// free is whether that value holds a free-form value.
	free bool
	// topMismatch is whether the walk stopped at once, at a top-level
	// array or object that does not fit the type.
	topMismatch bool
	// lists are the resource lists among the fields of a top-level
	// struct, where the walk read them whole (see decodeSpliced).
	lists []listSpan
}

// listSpan is where a resource list field's value lies in a body:
// body[start:end], the value of the struct's field number field.
type listSpan struct {
	start, end, field int
}

// resourceListTypes are the types of resource list fields: the values
// scanBody records the span of.
var resourceListTypes = map[reflect.Type]bool{
	reflect.TypeFor[resourceList]():         true,
	reflect.TypeFor[requiredResourceList](): true,
}

// scanBody walks the JSON value in body alongside the Go type t and
// refuses object keys that do not exactly match a field's JSON name, and
// keys given twice. encoding/json matches keys case-insensitively and lets
// the last duplicate win, so without this check {"Endpoint": …} would
// silently set endpoint, and {"endpoint": a, "endpoint": b} would store b
// past any check of a: a typo must not silently become a default.
//
// It also bounds what the decoder will build: a list or map field with a
// limit in itemLimits that holds more items, and free-form values (of
// interface type, or maps and slices of them, such as a delegation's
// context) holding more than maxFreeFormValues values between them, are
// refused naming the field. And it checks the nesting of all of body
// against [jsonlimit.MaxDepth].
//
// Values of types that decode themselves (json.Unmarshaler, such as
// json.RawMessage) and of interface types are only checked for duplicate
// keys. A value whose JSON kind does not fit its type, and malformed
// JSON, are left for the decoder to report precisely: the key checks then
// stop there, and the depth check reads on to the end.
//
// Keys are compared, and named in errors, as their bytes: a caller that
// needs valid UTF-8 checks it (decodeJSON does). It reads body once, in
// place, with nothing kept per level but a path segment and nothing
// allocated per struct field: its cost is linear in len(body). Map keys
// are kept for the duplicate check, which the item limits and the
// free-form budget bound; the path naming a field is built only for the
// error that names it.
//
// Its findings are kept apart, for decodeJSON to rank the depth refusal
// ahead of any other and to choose how to decode; among them, where the
// resource lists of a top-level struct lie, for decodeSpliced.
func scanBody(body []byte, t reflect.Type) scan {
	k := keyScanner{data: body, freeRoot: -1, freeLeft: maxFreeFormValues}
	_, e, ok := k.value(t)
	out := scan{err: e, end: -1, free: k.freeSeen, lists: k.lists}
	if ok {
		out.end = k.pos
	} else if e == nil && len(k.path) == 0 && k.pos < len(body) && (body[k.pos] == '[' || body[k.pos] == '{') {
		out.topMismatch = true
	}
	// Where the walk stopped (at the end of the value, at a refusal, or
	// at something for the decoder to report), len(k.path) levels are
	// open: the depth check reads on from there.
	if jsonlimit.CheckDepthFrom(body, k.pos, len(k.path), jsonlimit.MaxDepth) != nil {
		out.deep, out.err = true, nil
	}
	return out
}

// maxFreeFormValues is the most values (objects, arrays and scalars,
// nested ones included) the free-form parts of one request body may hold
// between them: decoding each into an interface costs an allocation or
// more, so this bounds the time and memory a body's free-form values
// cost. The context of a delegation and the metadata of a routed request
// carry a few ids and flags; this leaves them ample room.
const maxFreeFormValues = 10000

// itemLimits are the most items the list and map fields of request bodies
// may hold, by struct type and JSON name: the agent record's limits, and
// the same for the labels and resources a discovery or a delegation asks
// for (no agent holds more, so no more could match). scanBody refuses a
// body over one before anything decodes the items.
var itemLimits = map[reflect.Type]map[string]int{
	agentType: agentItemLimits(),
	reflect.TypeFor[discoverBody](): {
		"labels":            registry.MaxLabels,
		"requiredResources": registry.MaxResources,
		"resources":         registry.MaxResources,
	},
	reflect.TypeFor[delegateBody](): {"resources": registry.MaxResources},
}

var agentType = reflect.TypeFor[registry.Agent]()

func agentItemLimits() map[string]int {
	m := map[string]int{}
	for name := range jsonFields(agentType) {
		if max, ok := registry.MaxItems(name); ok {
			m[name] = max
		}
	}
	return m
}

// tooMany is the refusal of the field at the path name, of a value of
// struct type t whose field key holds n items, over its limit max.
func tooMany(t reflect.Type, name, key string, max, n int) *apiError {
	if t == agentType {
		return describe(registry.TooManyItems(key, n)) // as Validate words it
	}
	return fieldError(name, "invalid %s: must have at most %d items, got %d", name, max, n)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// keyScanner is the state of one scanBody pass: the body, the offset
// read up to, the path to the value being read, one segment per level,
// and the free-form budget: the path length of the free-form value being
// read (-1: none) and the values left.
type keyScanner struct {
	data     []byte
	pos      int
	path     []pathSeg
	freeRoot int
	freeLeft int
	freeSeen bool // a free-form value was read
	// limit is the item limit of the array or object value reads next
	// (0: none); counting is how many of the open ones are past theirs:
	// their remaining items are only counted, not checked or kept.
	limit    int
	counting int
	lists    []listSpan // the spans of the resource lists read so far
}

// pathSeg is one level of a path: an object key, or an array index when
// isKey is false.
type pathSeg struct {
	key   []byte
	isKey bool
	index int
}

// name renders the path ("agents[2].labels.x"), for an error message.
func (k *keyScanner) name() string { return k.nameTo(len(k.path)) }

// nameTo renders the first n segments of the path.
func (k *keyScanner) nameTo(n int) string { return pathName(k.path[:n]) }

// pathName renders a path as the error messages name fields:
// "agents[2].labels.x".
func pathName(path []pathSeg) string {
	var b strings.Builder
	for i, s := range path {
		if !s.isKey {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.Write(s.key)
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

// freeForm reports whether values of t are decoded into interfaces: an
// interface, or a map or slice of them.
func freeForm(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Map, reflect.Slice, reflect.Array:
		return t.Elem().Kind() == reflect.Interface
	}
	return false
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
// keys only). It returns the number of items of an array or object (0
// for a scalar), the refusal, if any, and ok false when scanBody must
// stop: after a refusal, at malformed JSON, or at a value whose kind
// does not fit t.
func (k *keyScanner) value(t reflect.Type) (n int, e *apiError, ok bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && k.freeRoot < 0 && freeForm(t) {
		k.freeRoot, k.freeSeen = len(k.path), true
		n, e, ok = k.anyValue(t)
		k.freeRoot = -1
		return n, e, ok
	}
	return k.anyValue(t)
}

func (k *keyScanner) anyValue(t reflect.Type) (int, *apiError, bool) {
	limit := k.limit
	k.limit = 0
	if k.freeRoot >= 0 && k.counting == 0 {
		if k.freeLeft--; k.freeLeft < 0 {
			name := k.nameTo(k.freeRoot)
			return 0, fieldError(name, "invalid %s: the free-form values of a request may hold at most %d values (objects, arrays and scalars, nested ones included)", name, maxFreeFormValues), false
		}
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // opaque: check duplicates only
	}
	switch c := k.skipSpace(); c {
	case '{', '[':
		if len(k.path) >= jsonlimit.MaxDepth {
			return 0, tooDeep(), false
		}
		if t != nil && !fits(t.Kind(), c) {
			return 0, nil, false // a type error, for the decoder to name
		}
		k.pos++
		if c == '{' {
			return k.object(t, limit)
		}
		return k.array(t, limit)
	case '"':
		_, _, ok := k.str()
		return 0, nil, ok
	}
	// A number, true, false or null: the decoder validates it. Anything
	// else ends it, and is malformed where no delimiter follows.
	start := k.pos
	for ; k.pos < len(k.data); k.pos++ {
		switch c := k.data[k.pos]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '+', c == '.':
		default:
			return 0, nil, k.pos > start
		}
	}
	return 0, nil, k.pos > start
}

// object checks the members of an object of type t (a struct, a map, or
// nil), k.pos just past its '{', and returns their number. Past max
// members (0: no limit), the rest are only counted.
func (k *keyScanner) object(t reflect.Type, max int) (int, *apiError, bool) {
	var (
		fields map[string]jsonField
		limits map[string]int
		elem   reflect.Type
		seen   fieldSet
		keys   map[string]struct{}
	)
	if t != nil {
		if t.Kind() == reflect.Struct {
			fields, limits = jsonFields(t), itemLimits[t]
		} else {
			elem = t.Elem()
		}
	}
	k.path = append(k.path, pathSeg{isKey: true})
	top := len(k.path) - 1
	if k.skipSpace() == '}' {
		k.pos++
		k.path = k.path[:top]
		return 0, nil, true
	}
	for n := 1; ; n++ {
		if max > 0 && n == max+1 {
			k.counting++ // the rest is only counted
		}
		if k.skipSpace() != '"' {
			return 0, nil, false
		}
		key, escaped, ok := k.str()
		if !ok {
			return 0, nil, false
		}
		if escaped {
			var s string
			if json.Unmarshal(k.data[k.pos-len(key)-2:k.pos], &s) != nil {
				return 0, nil, false
			}
			key = []byte(s)
		}
		k.path[top].key = key
		next := elem
		list := -1 // the field number of a resource list of the top struct
		switch {
		case k.counting > 0:
			fields, elem, next = nil, nil, nil
		case fields != nil:
			f, ok := fields[string(key)]
			if !ok {
				name := k.name()
				return 0, fieldError(name, "unknown field %q (field names are case-sensitive)", name), false
			}
			if !seen.add(f.index) {
				name := k.name()
				return 0, fieldError(name, "field %q is given twice", name), false
			}
			next = f.typ
			if top == 0 && f.field >= 0 && resourceListTypes[f.typ] {
				list = f.field
			}
		default:
			if _, dup := keys[string(key)]; dup {
				name := k.name()
				return 0, fieldError(name, "field %q is given twice", name), false
			}
			if keys == nil {
				keys = map[string]struct{}{}
			}
			keys[string(key)] = struct{}{}
		}
		if k.skipSpace() != ':' {
			return 0, nil, false
		}
		k.pos++
		k.limit = limits[string(key)]
		start := k.pos
		if list >= 0 {
			k.skipSpace()
			start = k.pos
		}
		items, e, ok := k.value(next)
		if !ok {
			return 0, e, false
		}
		if max, ok := limits[string(key)]; ok && items > max {
			return 0, tooMany(t, k.name(), string(key), max, items), false
		}
		if list >= 0 {
			k.lists = append(k.lists, listSpan{start, k.pos, list})
		}
		switch k.skipSpace() {
		case ',':
			k.pos++
		case '}':
			k.pos++
			k.path = k.path[:top]
			if max > 0 && n > max {
				k.counting--
			}
			return n, nil, true
		default:
			return 0, nil, false
		}
	}
}

// array checks the elements of an array of type t (a slice, an array, or
// nil), k.pos just past its '[', and returns their number. Past max
// elements (0: no limit), the rest are only counted.
func (k *keyScanner) array(t reflect.Type, max int) (int, *apiError, bool) {
	var elem reflect.Type
	if t != nil {
		elem = t.Elem()
	}
	k.path = append(k.path, pathSeg{})
	top := len(k.path) - 1
	if k.skipSpace() == ']' {
		k.pos++
		k.path = k.path[:top]
		return 0, nil, true
	}
	for i := 0; ; i++ {
		if max > 0 && i == max {
			k.counting++ // the rest is only counted
			elem = nil
		}
		k.path[top].index = i
		if _, e, ok := k.value(elem); !ok {
			return 0, e, false
		}
		switch k.skipSpace() {
		case ',':
			k.pos++
		case ']':
			k.pos++
			k.path = k.path[:top]
			if max > 0 && i+1 > max {
				k.counting--
			}
			return i + 1, nil, true
		default:
			return 0, nil, false
		}
	}
}

// fieldSet is a set of a struct's field indexes, for the duplicate-key
// check: a bit each for the first 64, a map past them.
type fieldSet struct {
	bits uint64
	more map[int]struct{}
}

// add adds i and reports whether it was not in s.
func (s *fieldSet) add(i int) bool {
	if i < 64 {
		had := s.bits&(1<<i) != 0
		s.bits |= 1 << i
		return !had
	}
	if _, had := s.more[i]; had {
		return false
	}
	if s.more == nil {
		s.more = map[int]struct{}{}
	}
	s.more[i] = struct{}{}
	return true
}

// jsonField is a struct field as encoding/json names it: its type, an
// index unique among the struct's JSON names, and its number among the
// struct's own fields (-1 for a field of an embedded struct).
type jsonField struct {
	typ   reflect.Type
	index int
	field int
}

// fieldCache maps a struct type to its JSON fields.
var fieldCache sync.Map // reflect.Type → map[string]jsonField

// jsonFields returns the JSON names of t's fields as encoding/json sees
// them: the json tag name, else the Go name; "-" skipped; embedded structs
// without a tag flattened.
func jsonFields(t reflect.Type) map[string]jsonField {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]jsonField)
	}
	m := map[string]jsonField{}
	addFields(t, m, true)
	fieldCache.Store(t, m)
	return m
}

// addFields adds the JSON fields of t to m, numbered from len(m), keeping
// a name m has; own is whether t is the struct itself, not one embedded
// in it.
func addFields(t reflect.Type, m map[string]jsonField, own bool) {
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
				addFields(ft, m, false)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			field := -1
			if own {
				field = f.Index[0]
			}
			m[name] = jsonField{typ: ft, index: len(m), field: field}
		}
	}
}
