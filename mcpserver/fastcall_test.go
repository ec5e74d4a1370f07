package mcpserver

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// sdkDiscoverArgs is what the SDK's typed tool path makes of arguments:
// decoded into a map, the schema's defaults applied, validated, encoded
// again and decoded into DiscoverArgs; ok is false for a refusal.
func sdkDiscoverArgs(t *testing.T, resolved *jsonschema.Resolved, raw []byte) (DiscoverArgs, bool) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return DiscoverArgs{}, false
	}
	if err := resolved.ApplyDefaults(&m); err != nil {
		t.Fatal(err)
	}
	if err := resolved.Validate(m); err != nil {
		return DiscoverArgs{}, false
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var in DiscoverArgs
	if err := json.Unmarshal(b, &in); err != nil {
		return DiscoverArgs{}, false
	}
	return in, true
}

// Arguments decodeDiscoverArgs accepts are valid under mesh_discover's
// published input schema and decode to what the SDK would hand the
// handler; what it declines goes to the SDK, which judges it.
func FuzzDiscoverArguments(f *testing.F) {
	for _, s := range []string{
		`{"query":"budget"}`, `{"query":"budget","limit":3}`, `{"query":"b","limit":100,"labels":{"team":"fin"},"requiredResources":["https://x/y"]}`,
		`{"query":"budget","labels":{}}`, `{"query":"budget","requiredResources":[]}`, `{"query":"é ✓ <&>"}`, `{"query":"bud\u0067et"}`,
		`{"query":""}`, `{"query":"x","limit":0}`, `{"query":"x","limit":101}`, `{"query":"x","limit":1.5}`, `{"query":"x","limit":10.0}`,
		`{"query":"x","query":5}`, `{"query":5,"query":"x"}`, `{"query":"x","labels":{"a":5,"a":"b"}}`, `{"query":"\ud800"}`,
		`{"Query":"x"}`, `{"query":"x","extra":1}`, `{"query":"x","labels":{"a":null}}`, `{"query":"x","requiredResources":[""]}`,
		`{}`, `[]`, `null`, `5`, ` {"query" : "x" , "limit" : 7 } `,
	} {
		f.Add([]byte(s))
	}
	schema, err := discoverInputSchema()
	if err != nil {
		f.Fatal(err)
	}
	resolved, err := schema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, ok := decodeDiscoverArgs(raw)
		if !ok {
			return
		}
		sdk, valid := sdkDiscoverArgs(t, resolved, raw)
		if !valid {
			t.Fatalf("accepted %s, which the schema refuses", raw)
		}
		if !reflect.DeepEqual(fast, sdk) {
			t.Fatalf("%s: decoded %#v, the SDK %#v", raw, fast, sdk)
		}
	})
}
