package mcpserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// Schemas are inferred from the argument and result types, then made
// plain and tightened here:
//
//   - Every "type" is a single JSON type. Inference gives slices and
//     pointers the type ["null", X]; the tools never return null for them
//     (absent fields are omitted, slices are non-nil), and a null argument
//     is a mistake, so "null" is dropped. Type unions are refused by strict
//     validators (Ajv's strictTypes), so the one argument that takes two
//     types, the context of mesh_delegate (an object or a string holding
//     one), says so with anyOf.
//   - Bounds that the library enforces anyway (lengths, ranges, enums) are
//     written into the input schemas so that a model sees them before it
//     calls. The library's own checks stay authoritative.
//   - No $schema, $id, $ref, $defs or formats, and no combinator but that
//     anyOf: the schemas use only keywords every client validator (the Go,
//     TypeScript and Python SDKs, strict Ajv) reads the same way.

// inferSchema infers the schema of T and drops "null" from every type
// union.
func inferSchema[T any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, err
	}
	for sub := range walk(s) {
		if len(sub.Types) == 2 && slices.Contains(sub.Types, "null") {
			i := slices.Index(sub.Types, "null")
			sub.Type, sub.Types = sub.Types[1-i], nil
		}
	}
	return s, nil
}

// walk yields s and every schema below it (properties, items and
// additionalProperties: all that inference produces).
func walk(s *jsonschema.Schema) func(yield func(*jsonschema.Schema) bool) {
	return func(yield func(*jsonschema.Schema) bool) {
		var rec func(*jsonschema.Schema) bool
		rec = func(s *jsonschema.Schema) bool {
			if s == nil {
				return true
			}
			if !yield(s) {
				return false
			}
			for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
				if !rec(s.Properties[name]) {
					return false
				}
			}
			return rec(s.Items) && rec(s.AdditionalProperties)
		}
		rec(s)
	}
}

// prop returns the schema of the property at path (property names; "[]"
// steps into array items, "{}" into the values of a map), or an error
// naming the path.
func prop(s *jsonschema.Schema, path ...string) (*jsonschema.Schema, error) {
	cur := s
	for _, p := range path {
		switch {
		case p == "[]" && cur.Items != nil:
			cur = cur.Items
		case p == "{}" && cur.AdditionalProperties != nil:
			cur = cur.AdditionalProperties
		case cur.Properties[p] != nil:
			cur = cur.Properties[p]
		default:
			return nil, fmt.Errorf("schema has no property %v", path)
		}
	}
	return cur, nil
}

// An edit changes the property of a schema at path.
type edit struct {
	path []string
	fn   func(*jsonschema.Schema)
}

// at returns the edit applying fn at path.
func at(fn func(*jsonschema.Schema), path ...string) edit { return edit{path, fn} }

// applyEdits applies edits to s, failing on a path s does not have.
func applyEdits(s *jsonschema.Schema, edits ...edit) error {
	for _, e := range edits {
		p, err := prop(s, e.path...)
		if err != nil {
			return err
		}
		e.fn(p)
	}
	return nil
}

func maxLen(n int) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.MaxLength = jsonschema.Ptr(n) }
}

func lenRange(lo, hi int) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.MinLength, s.MaxLength = jsonschema.Ptr(lo), jsonschema.Ptr(hi) }
}

func maxItems(n int) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.MaxItems = jsonschema.Ptr(n) }
}

func intRange(lo, hi float64) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Minimum, s.Maximum = jsonschema.Ptr(lo), jsonschema.Ptr(hi) }
}

func enum(values ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		s.Enum = make([]any, len(values))
		for i, v := range values {
			s.Enum[i] = v
		}
	}
}

func pattern(re string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Pattern = re }
}

func defaultValue(v any) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // only called with literals
		}
		s.Default = b
	}
}

// objectOrString makes a schema accept a JSON object or a string. It is
// written as anyOf rather than the type union ["object", "string"], which
// strict validators (Ajv in strict mode) refuse to compile.
func objectOrString(s *jsonschema.Schema) {
	s.Type, s.Types = "", nil
	s.AnyOf = []*jsonschema.Schema{{Type: "object"}, {Type: "string"}}
}

// namePattern is the agent name rule: a letter or digit, then up to 127
// letters, digits, '.', '_' or '-' (docs/AGENTS.md#the-agent-record).
const namePattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`

// delegationIDMaxLen bounds delegation ids (UUIDs) in arguments.
const delegationIDMaxLen = 128

// maxWaitSeconds is the longest long-poll of mesh_get_delegation, the
// same 60 s as GET /v1/delegations/{id}?wait= (docs/API.md#delegations).
const maxWaitSeconds = 60

// maxListLimit is the largest page of mesh_list_agents.
const maxListLimit = registry.MaxListLimit

func registerInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[RegisterArgs]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s,
		at(pattern(namePattern), "name"),
		at(lenRange(1, registry.MaxNameLen), "name"),
		at(maxLen(registry.MaxDisplayNameLen), "displayName"),
		at(maxLen(registry.MaxDescriptionLen), "description"),
		at(maxItems(registry.MaxCapabilities), "capabilities"),
		at(lenRange(1, registry.MaxCapabilityLen), "capabilities", "[]"),
		at(lenRange(1, registry.MaxEndpointLen), "endpoint"),
		at(enum(string(registry.ProtocolHTTP), string(registry.ProtocolMCP), string(registry.ProtocolA2A)), "protocol"),
		at(maxItems(registry.MaxExamples), "examples"),
		at(lenRange(1, registry.MaxExampleLen), "examples", "[]"),
		at(maxItems(registry.MaxResources), "resources"),
		at(lenRange(1, registry.MaxResourceURILen), "resources", "[]", "uri"),
		at(maxLen(registry.MaxResourceDescriptionLen), "resources", "[]", "description"),
		at(enum(registry.AccessRead, registry.AccessWrite, registry.AccessAdmin), "resources", "[]", "access"),
		at(func(s *jsonschema.Schema) { s.MaxProperties = jsonschema.Ptr(registry.MaxLabels) }, "labels"),
		at(maxLen(registry.MaxLabelValueLen), "labels", "{}"),
		at(enum(registry.AuthNone, registry.AuthBearer, registry.AuthHeader), "auth", "type"),
		at(maxLen(registry.MaxAuthTokenLen), "auth", "token"),
		at(intRange(0, registry.MaxTTLSeconds), "ttlSeconds"),
		at(intRange(0, 1), "confidenceThreshold"),
		at(maxLen(registry.MaxClarificationContextLen), "clarificationContext"),
	)
}

func discoverInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[DiscoverArgs]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s,
		at(lenRange(1, discovery.MaxQueryRunes), "query"),
		at(intRange(1, discovery.MaxLimit), "limit"),
		at(defaultValue(discovery.DefaultLimit), "limit"),
		at(maxItems(registry.MaxResources), "requiredResources"),
		at(lenRange(1, registry.MaxResourceURILen), "requiredResources", "[]"),
	)
}

func unregisterInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[UnregisterArgs]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s, at(lenRange(1, registry.MaxNameLen), "name"))
}

func delegateInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[DelegateArgs]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s,
		at(lenRange(1, registry.MaxNameLen), "targetName"),
		at(lenRange(1, discovery.MaxQueryRunes), "query"),
		at(lenRange(1, delegation.MaxTaskBytes), "task"),
		at(objectOrString, "context"),
		at(maxItems(registry.MaxResources), "requiredResources"),
		at(lenRange(1, registry.MaxResourceURILen), "requiredResources", "[]"),
		at(maxLen(registry.MaxNameLen), "sourceAgent"),
		at(defaultValue(false), "async"),
		at(intRange(1, float64(delegation.MaxTimeout.Milliseconds())), "timeoutMs"),
	)
}

func getDelegationInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[GetDelegationArgs]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s,
		at(lenRange(1, delegationIDMaxLen), "id"),
		at(intRange(0, maxWaitSeconds), "waitSeconds"),
		at(defaultValue(0), "waitSeconds"),
	)
}

func listAgentsInputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[ListAgentsArgs]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s,
		at(maxLen(512), "label"),
		at(intRange(1, maxListLimit), "limit"),
		at(defaultValue(registry.DefaultListLimit), "limit"),
		at(maxLen(1024), "cursor"),
	)
}

// statusValues lists the delegation statuses for output schemas.
var statusValues = []string{
	string(delegation.StatusPending), string(delegation.StatusRunning), string(delegation.StatusAccepted),
	string(delegation.StatusCompleted), string(delegation.StatusFailed), string(delegation.StatusTimeout),
	string(delegation.StatusCanceled),
}

func delegateOutputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[DelegateResult]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s, at(enum(statusValues...), "status"))
}

func delegationOutputSchema() (*jsonschema.Schema, error) {
	s, err := inferSchema[Delegation]()
	if err != nil {
		return nil, err
	}
	return s, applyEdits(s, at(enum(statusValues...), "status"))
}
