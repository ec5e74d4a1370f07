package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// fastCall answers a tools/call whose arguments it can decode and check
// in one pass, reporting true; it reports false for any other call, which
// then takes the SDK's path (its schema validation gives a refusal its
// text). A fastCall accepts only arguments the tool's input schema
// accepts, and decodes them to the value the SDK would give the handler.
type fastCall func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error, bool)

// resultTypeVersion is the first protocol version whose clients get a
// resultType in tool results, which only the SDK's own path can set:
// their calls take that path.
const resultTypeVersion = "2026-07-28"

// fastCalls is the receiving middleware that answers the calls of the
// tools in fast with their fastCall, skipping the SDK's per-call argument
// handling (decoding the arguments into a map, applying the schema's
// defaults, validating, encoding the map again and decoding it into the
// handler's type, with a 32 KiB decoder buffer each time) and its
// re-encoding of the result: together about a third of a mesh_discover
// call's CPU over stdio. The replies are those of the SDK's path byte for
// byte (TestWireUnchanged, FuzzDiscoverArguments).
//
// It also reads arguments given as JSON null as absent, for every tool:
// the SDK would apply the schema's defaults to a nil map, and panic.
func fastCalls(fast map[string]fastCall) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			cr, ok := req.(*mcp.CallToolRequest)
			if method != "tools/call" || !ok || cr.Params == nil {
				return next(ctx, method, req)
			}
			if bytes.Equal(bytes.TrimSpace(cr.Params.Arguments), []byte("null")) {
				cr.Params.Arguments = nil
			}
			if f := fast[cr.Params.Name]; f != nil && !wantsResultType(cr.Session) {
				if res, err, ok := f(ctx, cr); ok {
					return res, err
				}
			}
			return next(ctx, method, req)
		}
	}
}

// wantsResultType reports whether the client of ss speaks a protocol
// version whose tool results carry a resultType (as the SDK decides it:
// no initialize parameters mean its latest version).
func wantsResultType(ss *mcp.ServerSession) bool {
	if ss == nil {
		return true
	}
	p := ss.InitializeParams()
	return p == nil || p.ProtocolVersion >= resultTypeVersion
}

// fastTool is the fastCall of a tool whose handler is h and whose
// arguments decode decodes (false: not plainly valid, let the SDK judge).
// It answers as the SDK's typed tool path does, for a tool without an
// output schema at run time (see addTool): a handler error becomes an
// isError result with its text (a *jsonrpc.Error stays a protocol
// error); the output, encoded, is the structured content and, when the
// handler gave no content, the text content too. An output that is a
// json.RawMessage must be compact JSON as json.Marshal writes it (the
// discovery engine's encoding is), and is the result's from then on: its
// bytes must not change.
func fastTool[In, Out any](decode func(json.RawMessage) (In, bool), h mcp.ToolHandlerFor[In, Out]) fastCall {
	respond := respondFor(h)
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error, bool) {
		in, ok := decode(req.Params.Arguments)
		if !ok {
			return nil, nil, false
		}
		res, err := respond(ctx, req, in)
		return res, err, true
	}
}

// respondFor is the part of fastTool after the decoding: it calls h with
// the decoded arguments and turns its answer into the SDK's result.
func respondFor[In, Out any](h mcp.ToolHandlerFor[In, Out]) func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, error) {
		res, out, err := h(ctx, req, in)
		if err != nil {
			if we, ok := err.(*jsonrpc.Error); ok {
				return nil, we
			}
			var r mcp.CallToolResult
			r.SetError(err)
			return &r, nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		var b []byte
		switch o := any(out).(type) {
		case nil:
		case json.RawMessage:
			b = o
		default:
			if b, err = json.Marshal(o); err != nil {
				return nil, fmt.Errorf("marshaling output: %w", err)
			}
		}
		if b != nil {
			res.StructuredContent = json.RawMessage(b)
			// The text copy shares b's bytes: nothing writes to them once
			// the output is made (json.Marshal's, or the handler's own,
			// which it hands over), and copying a discover answer was a
			// fifth of the bytes a stdio call allocates.
			text := unsafe.String(unsafe.SliceData(b), len(b))
			if res.Content == nil {
				res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
			} else if b[0] != '{' {
				res.Content = append(res.Content, &mcp.TextContent{Text: text})
			}
		}
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		return res, nil
	}
}

// errNotPlain is argument decoding's "let the SDK judge".
var errNotPlain = errors.New("not plainly valid")

// decodeDiscoverArgs decodes mesh_discover's arguments when they are
// plainly valid under discoverInputSchema: an object of the four known
// keys, spelled exactly, each of the type and within the bounds the
// schema states, limit a plain integer (the schema's default, 10, when
// absent), the text valid UTF-8 without escaped surrogates. It reports
// false for anything else, valid or not.
func decodeDiscoverArgs(raw json.RawMessage) (DiscoverArgs, bool) {
	var in DiscoverArgs
	err := plainObject(raw, func(key string, v json.RawMessage) error {
		switch key {
		case "query":
			s, err := plainString(v, 1, discovery.MaxQueryRunes)
			in.Query = s
			return err
		case "limit":
			n, err := plainInt(v, 1, discovery.MaxLimit)
			in.Limit = n
			return err
		case "labels":
			m, err := plainStringMap(v)
			in.Labels = m
			return err
		case "requiredResources":
			ss, err := plainStrings(v, registry.MaxResources, 1, registry.MaxResourceURILen)
			in.RequiredResources = ss
			return err
		}
		return errNotPlain
	}, "query")
	if err != nil {
		return DiscoverArgs{}, false
	}
	if in.Limit == 0 {
		in.Limit = discovery.DefaultLimit
	}
	return in, true
}

// plainObject calls field for each member of the JSON object raw, which
// must have every key of required, no key twice (decoders differ on
// which one wins), valid UTF-8 and no escaped surrogate (\ud800-\udfff:
// decoders differ on lone ones).
func plainObject(raw json.RawMessage, field func(key string, v json.RawMessage) error, required ...string) error {
	raw = bytes.TrimSpace(raw)
	if !utf8.Valid(raw) || hasEscapedSurrogate(raw) {
		return errNotPlain
	}
	ms, err := members(raw)
	if err != nil {
		return err
	}
	for _, k := range required {
		found := false
		for _, m := range ms {
			found = found || m.key == k
		}
		if !found {
			return errNotPlain
		}
	}
	for _, m := range ms {
		if err := field(m.key, m.value); err != nil {
			return err
		}
	}
	return nil
}

type member struct {
	key   string
	value json.RawMessage
}

// members splits the JSON object raw into its members, in order, and
// refuses one with a key twice, or raw if it is not one JSON object with
// nothing around it. Each value is a slice of raw, without the spaces
// around it. It walks raw once json.Valid has vouched for it, so each
// step may trust the grammar (a json.Decoder's tokens cost a tenth of a
// stdio call).
func members(raw json.RawMessage) ([]member, error) {
	if len(raw) == 0 || raw[0] != '{' || raw[len(raw)-1] != '}' || !json.Valid(raw) {
		return nil, errNotPlain
	}
	var ms []member
	i := skipSpace(raw, 1)
	if raw[i] == '}' {
		return ms, nil
	}
	for {
		end := stringEnd(raw, i)
		key, err := objectKey(raw[i:end])
		if err != nil {
			return nil, errNotPlain
		}
		for _, m := range ms {
			if m.key == key {
				return nil, errNotPlain
			}
		}
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the colon
		end = valueEnd(raw, i)
		ms = append(ms, member{key, raw[i:end]})
		i = skipSpace(raw, end)
		if raw[i] == '}' {
			return ms, nil
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

// skipSpace returns the index of the first byte of raw at or after i that
// is not JSON white space.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the valid JSON string that
// starts at raw[i].
func stringEnd(raw []byte, i int) int {
	for i++; raw[i] != '"'; i++ {
		if raw[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd returns the index just past the valid JSON value that starts
// at raw[i].
func valueEnd(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return stringEnd(raw, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch raw[i] {
			case '"':
				i = stringEnd(raw, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for ; i < len(raw); i++ { // a number, true, false or null
		switch raw[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// objectKey decodes the quoted key q as a json.Decoder does: written as
// it is when it holds only ASCII and no escape.
func objectKey(q []byte) (string, error) {
	for _, c := range q[1 : len(q)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			var key string
			err := json.Unmarshal(q, &key)
			return key, err
		}
	}
	return string(q[1 : len(q)-1]), nil
}

// hasEscapedSurrogate reports whether raw holds a \uD800–\uDFFF escape.
func hasEscapedSurrogate(raw []byte) bool {
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i < len(raw) && (raw[i] == 'd' || raw[i] == 'D') && i+1 < len(raw) && bytes.IndexByte([]byte("89abcdefABCDEF"), raw[i+1]) >= 0 {
			return true
		}
	}
}

// plainString decodes a JSON string of minRunes to maxRunes code points.
func plainString(v json.RawMessage, minRunes, maxRunes int) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", errNotPlain
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", errNotPlain
	}
	if n := utf8.RuneCountInString(s); n < minRunes || n > maxRunes {
		return "", errNotPlain
	}
	return s, nil
}

// plainInt decodes an integer written with digits only, in [lo, hi].
func plainInt(v json.RawMessage, lo, hi int) (int, error) {
	if len(v) == 0 || len(v) > 9 || v[0] == '0' {
		return 0, errNotPlain
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, errNotPlain
		}
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < lo || n > hi {
		return 0, errNotPlain
	}
	return n, nil
}

// plainStringMap decodes a JSON object of strings, no key twice.
func plainStringMap(v json.RawMessage) (map[string]string, error) {
	ms, err := members(v)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		s, err := plainString(m.value, 0, int(^uint(0)>>1))
		if err != nil {
			return nil, err
		}
		out[m.key] = s
	}
	return out, nil
}

// plainStrings decodes a JSON array of at most maxItems strings of
// minRunes to maxRunes code points each.
func plainStrings(v json.RawMessage, maxItems, minRunes, maxRunes int) ([]string, error) {
	if len(v) == 0 || v[0] != '[' {
		return nil, errNotPlain
	}
	var a []json.RawMessage
	if err := json.Unmarshal(v, &a); err != nil || len(a) > maxItems {
		return nil, errNotPlain
	}
	out := make([]string, len(a))
	for i, e := range a {
		s, err := plainString(e, minRunes, maxRunes)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}
