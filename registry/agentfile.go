package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file decodes one agent file of the YAML agent directory (see
// [LoadDir]).

// fieldLines maps JSON field paths of the agent record ("name",
// "capabilities[2]", "auth.token") to the line that set them, so that
// validation errors can point into the file.
type fieldLines map[string]int

// line returns the line of path, or of its closest parent that has one.
func (m fieldLines) line(path string) int {
	for path != "" {
		if l, ok := m[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// loadAgentFile reads, parses, expands, decodes and validates one agent
// file. The agent is returned even when there are problems, so the
// directory invariants can still be checked on what was read.
func loadAgentFile(path string, o DirOptions) (Agent, fieldLines, []Problem) {
	fail := func(line int, format string, args ...any) (Agent, fieldLines, []Problem) {
		return Agent{}, nil, []Problem{{File: path, Line: line, Message: fmt.Sprintf(format, args...)}}
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(0, "%s", describeFSError(err))
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return fail(0, "%s", describeFSError(err))
	case !info.Mode().IsRegular():
		return fail(0, "not a regular file")
	case info.Size() > MaxAgentFileSize:
		return fail(0, "file is %d bytes; agent files are limited to %d bytes (1 MiB)", info.Size(), MaxAgentFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxAgentFileSize+1))
	switch {
	case err != nil:
		return fail(0, "%s", describeFSError(err))
	case len(data) > MaxAgentFileSize:
		return fail(0, "file is over %d bytes; agent files are limited to 1 MiB", MaxAgentFileSize)
	}
	return decodeAgentFile(path, data, o)
}

// decodeAgentFile is loadAgentFile after reading: path only names the file
// in problems.
func decodeAgentFile(path string, data []byte, o DirOptions) (Agent, fieldLines, []Problem) {
	d := &fileDecoder{file: path, lookup: o.LookupEnv, lines: fieldLines{}, broken: map[string]bool{},
		expanded: map[*yaml.Node]bool{}, raw: map[*yaml.Node]string{}}
	if d.lookup == nil {
		d.lookup = os.LookupEnv
	}
	root := d.parse(data)
	if root == nil {
		return Agent{}, nil, d.probs
	}
	var a Agent
	d.agent(root, &a)

	// Files may only name the protocols http and mcp; Validate would
	// accept a2a and inprocess too.
	switch a.Protocol {
	case "", ProtocolHTTP, ProtocolMCP:
	default:
		d.add(d.lines.line("protocol"), "type: must be mcp or http, got %q", string(a.Protocol))
		a.Protocol = ProtocolHTTP
	}
	a.Normalize()
	if len(a.Examples) == 0 {
		a.Examples = nil
	}
	if len(a.Resources) == 0 {
		a.Resources = nil
	}
	if err := a.Validate(o.Policy); err != nil {
		for _, e := range flattenErrors(err) {
			var fe *FieldError
			if !errors.As(e, &fe) {
				d.add(0, "%v", e)
				continue
			}
			if d.isBroken(fe.Field) {
				continue
			}
			field := yamlPath(fe.Field)
			if fe.kind == ErrEndpointNotAllowed {
				d.add(d.lines.line(fe.Field), "%s refused: %s", field, fe.Rule)
			} else {
				d.add(d.lines.line(fe.Field), "%s: %s", field, fe.Rule)
			}
		}
	}
	a.Source = SourceFile
	return a, d.lines, d.probs
}

// flattenErrors undoes errors.Join.
func flattenErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flattenErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// The top-level keys of an agent file and the agent record fields they set.
var fileKeys = map[string]string{
	"agent_id":               "name",
	"display_name":           "displayName",
	"description":            "description",
	"endpoint":               "endpoint",
	"type":                   "protocol",
	"is_default":             "isDefault",
	"confidence_threshold":   "confidenceThreshold",
	"clarification_required": "clarificationRequired",
	"clarification_context":  "clarificationContext",
	"capabilities":           "capabilities",
	"examples":               "examples",
	"resources":              "resources",
	"auth":                   "auth",
	"labels":                 "labels",
	"ttl_seconds":            "ttlSeconds",
}

var (
	authKeys     = []string{"type", "token", "header_name"}
	resourceKeys = []string{"uri", "description", "access"}
	fieldToKey   = func() map[string]string {
		m := map[string]string{"auth.headerName": "auth.header_name"}
		for k, v := range fileKeys {
			m[v] = k
		}
		return m
	}()
	// keyHints suggests the file key for names a user may carry over from
	// the JSON API or the seed's documentation.
	keyHints = map[string]string{
		"name": "agent_id", "id": "agent_id", "agentId": "agent_id", "displayName": "display_name",
		"protocol": "type", "isDefault": "is_default", "default": "is_default",
		"confidenceThreshold": "confidence_threshold", "threshold": "confidence_threshold",
		"clarificationRequired": "clarification_required", "clarificationContext": "clarification_context",
		"ttlSeconds": "ttl_seconds", "ttl": "ttl_seconds", "headerName": "header_name", "url": "endpoint",
	}
)

// yamlPath turns a JSON field path of a FieldError into the file's key
// path: "confidenceThreshold" → "confidence_threshold".
func yamlPath(field string) string {
	if k, ok := fieldToKey[field]; ok {
		return k
	}
	head, rest := field, ""
	if i := strings.IndexAny(field, ".["); i >= 0 {
		head, rest = field[:i], field[i:]
	}
	if k, ok := fieldToKey[head]; ok {
		return k + rest
	}
	return field
}

// jsonPath turns a key path of the file into the JSON field path of the
// agent record: "auth.header_name" → "auth.headerName".
func jsonPath(path string) string {
	head, rest := path, ""
	if i := strings.IndexAny(path, ".["); i >= 0 {
		head, rest = path[:i], path[i:]
	}
	if f, ok := fileKeys[head]; ok {
		head = f
	}
	if head == "auth" && rest == ".header_name" {
		rest = ".headerName"
	}
	return head + rest
}

// fileDecoder decodes one agent file's YAML tree, collecting problems.
type fileDecoder struct {
	file   string
	lookup func(string) (string, bool)
	lines  fieldLines
	probs  []Problem
	// broken holds the JSON paths of values that could not be decoded,
	// so validation does not report them a second time.
	broken map[string]bool
	// expanded holds every scalar already expanded (aliases share nodes),
	// with true for those that held a reference; raw keeps the text of
	// those, so that messages quote the file, never a variable's value
	// (which may be a secret).
	expanded map[*yaml.Node]bool
	raw      map[*yaml.Node]string
}

func (d *fileDecoder) add(line int, format string, args ...any) {
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Message: fmt.Sprintf(format, args...)})
}

// fail records that the value at path (a key path of the file) could not
// be read.
func (d *fileDecoder) fail(line int, path, format string, args ...any) {
	d.add(line, "%s: %s", path, fmt.Sprintf(format, args...))
	d.broken[jsonPath(path)] = true
}

var yamlLineRE = regexp.MustCompile(`line (\d+): `)

// yamlParserErrors are the messages of yaml.v3's parser (as opposed to its
// scanner). yaml.v3 reports their line 0-based (the scanner's 1-based),
// and leaves the line out when it is the first.
var yamlParserErrors = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"did not find expected '-' indicator", "did not find expected <document start>",
	"did not find expected <stream-start>", "did not find expected key",
	"did not find expected node content", "found duplicate %TAG directive",
	"found duplicate %YAML directive", "found incompatible YAML document", "found undefined tag handle",
}

// addYAMLError records a yaml.v3 syntax error, taking the line out of its
// text and making it 1-based.
//
// The text is all there is to read: yaml.v3 makes a syntax error with
// fmt.Errorf("yaml: "+format, ...) and exports no type holding its line
// or message (TypeError is for decoding, not parsing). So the library's
// "yaml: " prefix comes off the text, and the line out of it; this is
// about a third-party parser's message, not one of the mesh's errors,
// which describe themselves (apierr).
func (d *fileDecoder) addYAMLError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1 // yaml.v3 leaves out line 1
	if strings.HasPrefix(msg, "unknown anchor") {
		line = 0 // reported without a position
	}
	if m := yamlLineRE.FindStringSubmatchIndex(msg); m != nil {
		line, _ = strconv.Atoi(msg[m[2]:m[3]])
		msg = msg[:m[0]] + msg[m[1]:]
		if slices.Contains(yamlParserErrors, msg) {
			line++
		}
	}
	d.add(line, "invalid YAML: %s", msg)
}

// parse returns the file's single document's root node, or nil.
func (d *fileDecoder) parse(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add(0, "file is empty; it must hold one agent (a mapping with agent_id, endpoint, …)")
		} else {
			d.addYAMLError(err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.addYAMLError(err)
		return nil
	case len(extra.Content) > 0 && extra.Content[0].ShortTag() != "!!null":
		d.add(extra.Line, "a second YAML document; an agent file holds exactly one agent")
		return nil
	}
	if len(doc.Content) == 0 {
		d.add(0, "file is empty; it must hold one agent")
		return nil
	}
	root := deref(doc.Content[0])
	if root == nil || root.Kind != yaml.MappingNode {
		d.add(doc.Content[0].Line, "the file must be a mapping of agent fields (agent_id: …, endpoint: …), got %s", describeNode(root))
		return nil
	}
	return root
}

// isBroken reports whether the value at JSON path field, or one that
// contains it, could not be decoded.
func (d *fileDecoder) isBroken(field string) bool {
	for field != "" {
		if d.broken[field] {
			return true
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			return false
		}
		field = field[:i]
	}
	return false
}

// deref follows aliases to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func describeNode(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.ShortTag() == "!!null":
		return "null"
	}
	return fmt.Sprintf("%q", clip(n.Value))
}

// pairs walks the key/value pairs of a mapping, reporting keys that are
// not strings or that repeat, and calls fn for the others.
func (d *fileDecoder) pairs(m *yaml.Node, path string, fn func(key string, k, v *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := deref(m.Content[i]), m.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			d.add(m.Content[i].Line, "%skeys must be strings, got %s", prefix(path), describeNode(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(k.Line, "%skey %q appears twice (first on line %d)", prefix(path), k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		fn(k.Value, k, v)
	}
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

// unknownKey reports key as unknown at path, with a hint when one fits.
func (d *fileDecoder) unknownKey(k *yaml.Node, path string, known []string) {
	msg := fmt.Sprintf("%sunknown key %q", prefix(path), k.Value)
	if hint, ok := keyHints[k.Value]; ok && slices.Contains(known, hint) {
		msg += fmt.Sprintf(" (did you mean %q?)", hint)
	} else if near := nearest(k.Value, known); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	} else {
		msg += " (known keys: " + strings.Join(known, ", ") + ")"
	}
	d.add(k.Line, "%s", msg)
}

func (d *fileDecoder) agent(root *yaml.Node, a *Agent) {
	known := slices.Sorted(maps.Keys(fileKeys))
	d.pairs(root, "", func(key string, k, v *yaml.Node) {
		field, ok := fileKeys[key]
		if !ok {
			d.unknownKey(k, "", known)
			return
		}
		d.lines[field] = k.Line
		switch key {
		case "agent_id":
			d.str(v, key, &a.Name)
		case "display_name":
			d.str(v, key, &a.DisplayName)
		case "description":
			d.str(v, key, &a.Description)
		case "endpoint":
			d.str(v, key, &a.Endpoint)
		case "type":
			var s string
			d.str(v, key, &s)
			a.Protocol = Protocol(s)
		case "is_default":
			d.scalar(v, key, &a.IsDefault)
		case "confidence_threshold":
			var th float64
			if d.scalar(v, key, &th) {
				a.ConfidenceThreshold = &th
			}
		case "clarification_required":
			d.scalar(v, key, &a.ClarificationRequired)
		case "clarification_context":
			d.str(v, key, &a.ClarificationContext)
		case "capabilities":
			a.Capabilities = d.strList(v, key, field)
		case "examples":
			a.Examples = d.strList(v, key, field)
		case "resources":
			a.Resources = d.resources(v)
		case "auth":
			a.Auth = d.auth(v)
		case "labels":
			a.Labels = d.labels(v)
		case "ttl_seconds":
			d.scalar(v, key, &a.TTLSeconds)
		}
	})
}

// expand expands the environment references of scalar n, once.
func (d *fileDecoder) expand(n *yaml.Node, path string) {
	if _, done := d.expanded[n]; done {
		return
	}
	d.expanded[n] = strings.Contains(n.Value, "${")
	if !d.expanded[n] {
		return
	}
	d.raw[n] = n.Value
	v, err := expandEnv(n.Value, d.lookup)
	for _, e := range flattenErrors(err) {
		d.fail(n.Line, path, "%v", e)
	}
	n.Value = v
	// A scalar that held a reference is typed by its expanded value
	// (confidence_threshold: ${TH:-0.7} is a number) unless it carries an
	// explicit tag. A string target still takes the value as text.
	if n.Style&yaml.TaggedStyle == 0 {
		n.Tag = ""
		n.Style &^= yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle
	}
}

// str decodes a string value (null is "").
func (d *fileDecoder) str(v *yaml.Node, path string, out *string) {
	n := deref(v)
	if n == nil || n.Kind != yaml.ScalarNode {
		d.fail(v.Line, path, "must be a string, got %s", describeNode(n))
		return
	}
	d.expand(n, path)
	switch {
	case d.expanded[n]:
		// Held a reference: the expansion is the text, even "" or "~".
	case n.ShortTag() == "!!null":
		return
	case n.ShortTag() == "!!binary":
		if err := n.Decode(out); err != nil {
			d.fail(n.Line, path, "%v", err)
		}
		return
	}
	*out = n.Value
}

// scalar decodes a bool, float64 or int value. It returns false for null
// (the field stays unset) and on error.
func (d *fileDecoder) scalar(v *yaml.Node, path string, out any) bool {
	var want string
	switch out.(type) {
	case *bool:
		want = "true or false"
	case *float64:
		want = "a number"
	case *int:
		want = "an integer"
	}
	n := deref(v)
	if n == nil || n.Kind != yaml.ScalarNode {
		d.fail(v.Line, path, "must be %s, got %s", want, describeNode(n))
		return false
	}
	d.expand(n, path)
	if n.ShortTag() == "!!null" {
		return false
	}
	_, isInt := out.(*int)
	if err := n.Decode(out); err != nil || isInt && n.ShortTag() != "!!int" { // yaml.v3 truncates 1.5 to 1
		got := describeNode(n)
		if raw, ok := d.raw[n]; ok {
			got = fmt.Sprintf("the expansion of %q (not shown)", clip(raw))
		}
		d.fail(n.Line, path, "must be %s, got %s", want, got)
		return false
	}
	return true
}

// strList decodes a list of strings; field is its JSON name.
func (d *fileDecoder) strList(v *yaml.Node, path, field string) []string {
	n := deref(v)
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		d.fail(v.Line, path, "must be a list of strings, got %s", describeNode(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		d.lines[fmt.Sprintf("%s[%d]", field, i)] = item.Line
		var s string
		d.str(item, fmt.Sprintf("%s[%d]", path, i), &s)
		out = append(out, s)
	}
	return out
}

func (d *fileDecoder) auth(v *yaml.Node) *Auth {
	n := deref(v)
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n == nil || n.Kind != yaml.MappingNode {
		d.fail(v.Line, "auth", "must be a mapping {type, token, header_name}, got %s", describeNode(n))
		return nil
	}
	var a Auth
	d.pairs(n, "auth", func(key string, k, v *yaml.Node) {
		path := "auth." + key
		switch key {
		case "type":
			d.lines["auth.type"] = k.Line
			d.str(v, path, &a.Type)
		case "token":
			d.lines["auth.token"] = k.Line
			d.str(v, path, &a.Token)
		case "header_name":
			d.lines["auth.headerName"] = k.Line
			d.str(v, path, &a.HeaderName)
		default:
			d.unknownKey(k, "auth", authKeys)
		}
	})
	return &a
}

func (d *fileDecoder) resources(v *yaml.Node) []Resource {
	n := deref(v)
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		d.fail(v.Line, "resources", "must be a list of {uri, description, access}, got %s", describeNode(n))
		return nil
	}
	out := make([]Resource, 0, len(n.Content))
	for i, item := range n.Content {
		path := fmt.Sprintf("resources[%d]", i)
		d.lines[path] = item.Line
		m := deref(item)
		if m == nil || m.Kind != yaml.MappingNode {
			d.fail(item.Line, path, "must be a mapping {uri, description, access}, got %s", describeNode(m))
			continue
		}
		var r Resource
		d.pairs(m, path, func(key string, k, v *yaml.Node) {
			d.lines[path+"."+key] = k.Line
			switch key {
			case "uri":
				d.str(v, path+".uri", &r.URI)
			case "description":
				d.str(v, path+".description", &r.Description)
			case "access":
				d.str(v, path+".access", &r.Access)
			default:
				d.unknownKey(k, path, resourceKeys)
			}
		})
		out = append(out, r)
	}
	return out
}

func (d *fileDecoder) labels(v *yaml.Node) map[string]string {
	n := deref(v)
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n == nil || n.Kind != yaml.MappingNode {
		d.fail(v.Line, "labels", "must be a mapping of strings, got %s", describeNode(n))
		return nil
	}
	out := map[string]string{}
	d.pairs(n, "labels", func(key string, k, v *yaml.Node) {
		d.lines["labels."+key] = k.Line
		var s string
		d.str(v, "labels."+key, &s)
		out[key] = s
	})
	return out
}

// nearest returns the known key within edit distance 2 of key, if one is
// closest.
func nearest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if dist := editDistance(key, k); dist < bestD {
			best, bestD = k, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b in bytes (keys are
// ASCII), capped for long inputs.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
