package httpserver

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"
)

// The OpenAPI document of the routes is docs/openapi.yaml, the file to
// edit. go:embed cannot reach outside the package directory, so the
// package embeds a byte-for-byte copy of it; TestOpenAPICopy fails when
// the two differ, and go generate refreshes the copy.
//
//go:generate cp ../docs/openapi.yaml openapi.yaml
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON is the embedded document as JSON, converted once, on the
// first GET /openapi.json. The document is a constant of the build, so
// the conversion cannot fail in a binary whose tests passed.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(openAPIYAML) })

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API, as served at
// GET /openapi.json: every route of a [Server] with every option set, plus
// /mcp and /a2a, which cmd/agentmesh mounts with [Server.Handle]. The
// caller must not modify the returned slice.
func OpenAPI() ([]byte, error) { return openAPIJSON() }

// openAPI serves GET /openapi.json (no token).
func (s *Server) openAPI(w *recorder, r *http.Request) {
	b, err := openAPIJSON()
	if err != nil {
		s.fail(w, internal(fmt.Errorf("httpserver: the embedded OpenAPI document: %w", err)))
		return
	}
	writeJSONBytes(w, http.StatusOK, b)
}

// yamlToJSON converts a YAML document whose mapping keys are all strings
// to JSON.
func yamlToJSON(doc []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	v, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// jsonValue returns v, a decoded YAML value, with its mappings as
// map[string]any; a key that is not a string (an unquoted 200, say) is an
// error rather than a silent conversion.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			c, err := jsonValue(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			v[k] = c
		}
		return v, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("mapping key %v is not a string (quote it)", k)
			}
			c, err := jsonValue(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ks, err)
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		for i, e := range v {
			c, err := jsonValue(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			v[i] = c
		}
		return v, nil
	}
	return v, nil
}

// Routes returns the patterns of every route the server serves, in the
// order they were registered: "GET /v1/agents", "POST /v1/delegate", …,
// and the patterns mounted with [Server.Handle] ("/mcp"), which match
// every method. Which routes exist depends on the options given to [New]
// (a route whose option is nil is left out).
func (s *Server) Routes() []string {
	s.patternsMu.Lock()
	defer s.patternsMu.Unlock()
	return slices.Clone(s.patterns)
}

func (s *Server) addPattern(pattern string) {
	s.patternsMu.Lock()
	defer s.patternsMu.Unlock()
	s.patterns = append(s.patterns, pattern)
}
