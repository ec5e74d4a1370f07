package discovery

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"

	"github.com/agentmesh/agentmesh/internal/jsonvalue"
)

// AppendSearchJSON runs Search(query, q) and appends the JSON encoding of
// its results to dst: the bytes json.Marshal would give for them, made
// without copying or re-encoding agent records. Each indexed record is
// encoded once, on its first appearance in a result, and the encoding is
// reused until the agent changes. It returns the errors of Search.
//
// It is the fast path of a server answering discovery requests, where
// encoding ten full agent records through reflection would cost more than
// the search itself.
func (e *Engine) AppendSearchJSON(dst []byte, query string, q *Query) ([]byte, error) {
	res, err := search(e, query, q, (*searcher).encodedResult)
	if err != nil {
		return dst, err
	}
	dst = append(dst, '[')
	for i := range res {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = res[i].appendJSON(dst); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// AppendSearchJSONText is [Engine.AppendSearchJSON] that also appends to
// text the same JSON as it stands inside a JSON string (escaped, without
// the quotes): the text copy an MCP tool result gives of its structured
// content. Each record's escaped encoding is made on its first use here
// and kept with its encoding, so the copy costs a copy, not escaping
// every byte again.
func (e *Engine) AppendSearchJSONText(dst, text []byte, query string, q *Query) ([]byte, []byte, error) {
	res, err := search(e, query, q, (*searcher).textResult)
	if err != nil {
		return dst, text, err
	}
	dst = append(dst, '[')
	text = append(text, '[')
	for i := range res {
		if i > 0 {
			dst = append(dst, ',')
			text = append(text, ',')
		}
		start := len(dst)
		if dst, err = res[i].appendJSON(dst); err != nil {
			return dst, text, err
		}
		// The result is {"agent": the record, then what matched}: the
		// record's escaped copy is kept, the rest is short.
		text = append(text, `{\"agent\":`...)
		text = append(text, res[i].escaped...)
		text = jsonvalue.AppendEscaped(text, dst[start+len(`{"agent":`)+len(res[i].agent):])
	}
	return append(dst, ']'), append(text, ']'), nil
}

// recordJSON is the JSON encoding of an indexed record, made on first use,
// and for [Engine.AppendSearchJSONText] that encoding escaped. A doc's
// record never changes (Put makes a new doc), so neither do they.
type recordJSON struct {
	once sync.Once
	b    []byte
	err  error

	escapeOnce sync.Once
	escaped    []byte
}

// json returns the JSON encoding of the record d holds. It is safe to call
// under the engine's read lock from several searches at once.
func (d *doc) json() ([]byte, error) {
	d.enc.once.Do(func() { d.enc.b, d.enc.err = json.Marshal(d.record()) })
	return d.enc.b, d.enc.err
}

// escapedJSON returns d.json() escaped as the contents of a JSON string.
func (d *doc) escapedJSON() ([]byte, error) {
	b, err := d.json()
	if err != nil {
		return nil, err
	}
	d.enc.escapeOnce.Do(func() { d.enc.escaped = jsonvalue.AppendEscaped([]byte(nil), b) })
	return d.enc.escaped, nil
}

// encodedResult is a [Result] whose agent is already encoded.
type encodedResult struct {
	matched
	name    string // the agent's name, for the availability check
	agent   []byte // the agent's JSON encoding, shared with the index
	escaped []byte // for AppendSearchJSONText: agent escaped, shared with the index
	err     error  // from encoding the agent
}

func (r encodedResult) agentName() string { return r.name }

// encodedResult builds the encodedResult of a hit.
func (s *searcher) encodedResult(terms []queryTerm, h hit) encodedResult {
	d := &s.ix.docs[h.doc]
	b, err := d.json()
	return encodedResult{matched: s.match(terms, h), name: d.agent.Name, agent: b, err: err}
}

// textResult builds the encodedResult of a hit with its escaped agent.
func (s *searcher) textResult(terms []queryTerm, h hit) encodedResult {
	r := s.encodedResult(terms, h)
	if r.err == nil {
		r.escaped, r.err = s.ix.docs[h.doc].escapedJSON()
	}
	return r
}

// appendJSON appends r as the JSON object json.Marshal makes of a Result.
func (r *encodedResult) appendJSON(dst []byte) ([]byte, error) {
	if r.err != nil {
		return dst, r.err
	}
	dst = append(dst, `{"agent":`...)
	dst = append(dst, r.agent...)
	dst = append(dst, `,"score":`...)
	dst = appendJSONFloat(dst, r.score)
	dst = append(dst, `,"coverage":`...)
	dst = appendJSONFloat(dst, r.coverage)
	dst = append(dst, `,"matchedTerms":`...)
	dst = appendJSONStrings(dst, r.terms)
	dst = append(dst, `,"matchedCapabilities":`...)
	dst = appendJSONStrings(dst, r.capabilities)
	dst = append(dst, `,"matchedResources":`...)
	if len(r.resources) == 0 {
		dst = append(dst, `[]`...)
	} else {
		b, err := json.Marshal(r.resources)
		if err != nil {
			return dst, err
		}
		dst = append(dst, b...)
	}
	return append(dst, '}'), nil
}

// appendJSONFloat appends f as encoding/json writes a float64. Scores and
// coverages are finite by construction.
func appendJSONFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Like encoding/json: e-09 becomes e-9.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendJSONStrings appends ss as a JSON array of strings ([] when empty).
func appendJSONStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonvalue.AppendString(dst, s)
	}
	return append(dst, ']')
}
