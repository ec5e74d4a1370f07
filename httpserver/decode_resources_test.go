package httpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resourceSeeds are resource lists of the shapes simpleResources reads
// and of the shapes it leaves to (*resourceList).decode.
var resourceSeeds = []string{
	`[]`, ` [ ] `, `["a"]`, `["a","b"]`, `[{"uri":"a"}]`, ` [ {"uri" : "a" , "type":"fs"} , "b" ] `,
	`[{"uri":"a","type":"t","description":"d","access":"read"}]`,
	`[""]`, `[{"uri":""}]`, `[{}]`, `[{"type":"fs"}]`, `[{"uri":"a","uri":"b"}]`,
	`[{"URI":"a"}]`, `[{"Uri":"a","uri":"b"}]`, `[{"uri":"a","urn":"b"}]`, `[{"uri":1}]`, `[{"uri":"a","type":null}]`,
	`[{"uri":null}]`, `[{"uri":"a","access":5}]`, `[1]`, `[null]`, `[["a"]]`, `[{"uri":"a"}`, `["a",]`, `["a"] x`,
	`null`, `"a"`, `{"uri":"a"}`, `["\u0061"]`, `["\ud800"]`, `["\x"]`, "[\"a\tb\"]", `["a\"b"]`,
	`[{"\u0075ri":"a"}]`, `[{"uri":"\u00e9"}]`, `["é"]`, "[\"\xff\"]", `["a\`,
}

// FuzzSimpleResources holds simpleResources to (*resourceList).decode:
// a list it reads is valid JSON that decode decodes, without error, to
// the same URIs.
func FuzzSimpleResources(f *testing.F) {
	for _, s := range resourceSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		uris, ok := simpleResources(b)
		if !ok {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("%q: simpleResources read %q from invalid JSON", b, uris)
		}
		var l resourceList
		if err := l.decode(b, "resources"); err != nil {
			t.Fatalf("%q: simpleResources read %q, decode refuses it: %v", b, uris, err)
		}
		if !reflect.DeepEqual([]string(l), uris) {
			t.Fatalf("%q: simpleResources read %q, decode %q", b, uris, []string(l))
		}
	})
}

func TestSimpleResourcesShapes(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string // nil: left to decode
	}{
		{`[]`, []string{}},
		{` [ {"uri" : "a" , "type":"fs"} , "b" ] `, []string{"a", "b"}},
		{`[{"uri":"a","type":"t","description":"d","access":"read"}]`, []string{"a"}},
		{`["\u0061\n"]`, []string{"a\n"}},
		{`[{"\u0075ri":"a"}]`, []string{"a"}},
		{`[""]`, nil},
		{`[{"uri":""}]`, nil},
		{`[{"type":"fs"}]`, nil},
		{`[{"uri":"a","uri":"b"}]`, nil},
		{`[{"URI":"a"}]`, nil},
		{`[{"uri":"a","type":null}]`, nil},
		{`[1]`, nil},
		{`null`, nil},
		{"[\"a\tb\"]", nil},
		{"[\"\xff\"]", nil},
		{`["a"] x`, nil},
		{"[\"a\"]\x00", nil},
	} {
		uris, ok := simpleResources([]byte(c.body))
		assert.Equal(t, c.want != nil, ok, c.body)
		assert.Equal(t, c.want, uris, c.body)
	}
}

// decodeLayered is decodeJSON without decodeSpliced: each resource list
// is decoded by encoding/json calling (*resourceList).UnmarshalJSON.
func decodeLayered(body []byte, dst any) *apiError {
	sc, e := scanChecked(body, reflect.TypeOf(dst))
	if e != nil {
		return e
	}
	return decodeValue(body, dst, sc.end, sc.free)
}

// FuzzDecodeSpliced holds decodeJSON to decodeLayered on the bodies that
// carry resource lists: the same refusal, code, message and field, or
// the same value.
func FuzzDecodeSpliced(f *testing.F) {
	for _, s := range resourceSeeds {
		f.Add([]byte(`{"query":"x","resources":`+s+`}`), uint8(0))
		f.Add([]byte(`{"requiredResources":`+s+`,"resources":["z"],"limit":2}`), uint8(0))
		f.Add([]byte(`{"targetName":"a","task":"t","resources":`+s+`,"context":{"n":1.50}}`), uint8(1))
	}
	for _, s := range []string{
		`{"query":"x","resources":["a"],"limit":"two"}`,
		`{"limit":"two","resources":[1]}`,
		`{"query":"x","resources":["a"],"limit":}`,
		`{"query":"x","resources":["a"]} {}`,
		`{"query":"x","resources":["a"],"Limit":1}`,
		`{"query":"x","resources":["a"],"resources":["b"]}`,
		`{"query":"x","labels":{"k":1},"resources":["a"]}`,
		`{"query":"x","resources":["a"],"minScore":1e400}`,
		`{"resources":["a"]`,
		`[{"resources":["a"]}]`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, body []byte, shape uint8) {
		newDst := func() any {
			if shape%2 == 0 {
				return new(discoverBody)
			}
			return new(delegateBody)
		}
		got, want := newDst(), newDst()
		e, ref := decodeJSON(body, got), decodeLayered(body, want)
		if (e == nil) != (ref == nil) || e != nil && (e.status != ref.status || e.code != ref.code || e.msg != ref.msg || !reflect.DeepEqual(e.details, ref.details)) {
			t.Fatalf("%q: decodeJSON %+v, the layered decode %+v", body, e, ref)
		}
		if e == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeJSON %+v, the layered decode %+v", body, got, want)
		}
	})
}

// TestDecodeSplicedTaken checks which bodies decodeSpliced decodes: those
// whose resource lists are all of the plain shapes, and whose rest
// decodes; it leaves the others, and dst zero, to the layered decode.
func TestDecodeSplicedTaken(t *testing.T) {
	long := strings.Repeat("a", 16000)
	for _, c := range []struct {
		body  string
		taken bool
	}{
		{`{"query":"x","resources":[{"uri":"/r/` + long + `"},{"uri":"b","type":"fs"}],"requiredResources":["c"]}`, true},
		{`{"targetName":"a","task":"t","context":{"n":1},"resources":["a"]}`, true},
		{`{"query":"x","resources":[]}`, true},
		{`{"query":"x","resources":[{"URI":"a"}]}`, false},
		{`{"query":"x","resources":["a"],"requiredResources":[""]}`, false},
		{`{"query":"x","resources":["a"],"limit":"two"}`, false},
		{`{"query":"x","resources":["a"]} x`, false},
	} {
		var dst any = new(discoverBody)
		if strings.Contains(c.body, "targetName") {
			dst = new(delegateBody)
		}
		sc, e := scanChecked([]byte(c.body), reflect.TypeOf(dst))
		require.Nil(t, e, c.body)
		require.NotEmpty(t, sc.lists, c.body)
		assert.Equal(t, c.taken, decodeSpliced([]byte(c.body), dst, sc), c.body)
		if !c.taken {
			assert.True(t, reflect.ValueOf(dst).Elem().IsZero(), "%s: dst %+v", c.body, dst)
		}
	}
	var d discoverBody
	require.Nil(t, decodeJSON([]byte(`{"query":"x","limit":3,"resources":[{"uri":"/r/`+long+`"},"b"],"requiredResources":["c"]}`), &d))
	assert.Equal(t, discoverBody{Query: "x", Limit: 3, Resources: resourceList{"/r/" + long, "b"}, RequiredResources: requiredResourceList{"c"}}, d)
}
