package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
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

// decoderMembers is members as a json.Decoder splits an object: the
// reference FuzzMembers holds the hand-written walk to.
func decoderMembers(raw json.RawMessage) ([]member, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errNotPlain
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, errNotPlain
	}
	var ms []member
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil, errNotPlain
		}
		for _, m := range ms {
			if m.key == key {
				return nil, errNotPlain
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errNotPlain
		}
		ms = append(ms, member{key, v})
	}
	if _, err := dec.Token(); err != nil || dec.InputOffset() != int64(len(raw)) { // }
		return nil, errNotPlain
	}
	return ms, nil
}

// members splits an object into the members, keys and value bytes a
// json.Decoder finds, and refuses what it refuses.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, `{ }`, `{"a":1}`, ` {"a":1}`, `{"a":1} `, `{"a" : 1 , "b":[1,{"c":"]}"}] ,"d":{"e":[]}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"x"}}}`,
		`{"a":"\"}\\"}`, `{"\u0061":1,"a":2}`, `{"é":true,"\u00e9":false}`, `{"a":null,"b":-1.5e3}`, `{"a":1,}`,
		`{"a":1}{"b":2}`, `{"a"}`, `{1:2}`, `[1]`, `{"a":1`, "{\"\xff\":1,\"\xfe\":2}", `{"a":tru}`, "{\"a\":1\t}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := members(raw)
		want, werr := decoderMembers(raw)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: members err %v, the decoder's %v", raw, err, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, the decoder %d", raw, len(got), len(want))
		}
		for i := range got {
			if got[i].key != want[i].key || !bytes.Equal(got[i].value, want[i].value) {
				t.Fatalf("%q: member %d is %q: %s, the decoder's %q: %s", raw, i, got[i].key, got[i].value, want[i].key, want[i].value)
			}
		}
	})
}

// jsonOnly is a searcher that encodes JSON but writes no text copy.
type jsonOnly struct{ e *discovery.Engine }

func (j jsonOnly) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	return j.e.Search(query, q)
}

func (j jsonOnly) AppendSearchJSON(dst []byte, query string, q *discovery.Query) ([]byte, error) {
	return j.e.AppendSearchJSON(dst, query, q)
}

// Buffers lent to mesh_discover that hold an earlier answer (the reply's
// buffers are recycled, across servers of one process) never put that
// answer's text copy in a new reply: with either kind of searcher the
// reply is the SDK's encoding of the result.
func TestLentBuffersCarryNoEarlierAnswer(t *testing.T) {
	e := discovery.New(nil)
	e.Put(registry.Agent{Name: "budget", Description: "Budget <numbers> & \"forecasts\"", Capabilities: []string{"budget"}, Endpoint: "https://budget.example.com/task"})
	for _, search := range []discovery.Searcher{e, jsonOnly{e}} {
		tl := &tools{search: search}
		respond := respondFor(func(ctx context.Context, _ *mcp.CallToolRequest, in DiscoverArgs) (*mcp.CallToolResult, any, error) {
			return tl.discover(ctx, in)
		})
		earlier := &answerBuffers{json: []byte(`{"results":[]}`), text: []byte(`{\"results\":[]}`)}
		res, err := respond(lendAnswer(context.Background(), earlier), &mcp.CallToolRequest{}, DiscoverArgs{Query: "budget", Limit: discovery.DefaultLimit})
		require.NoError(t, err)
		got, err := appendResult(nil, res, earlier)
		require.NoError(t, err)
		want, err := json.Marshal(res)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%T", search)
	}
}
