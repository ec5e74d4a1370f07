// Package evalharness measures retrieval quality: it loads a corpus of
// agents and a set of labelled queries (JSON Lines) and computes Recall@1,
// Recall@5, nDCG@10 and MRR of a ranking function, overall and per query
// subset. It backs "agentmesh eval discovery" and the discovery package's
// quality tests.
//
// The package does not import the ranking code: callers pass a
// [SearchFunc], so any ranker (and any configuration of one) can be
// measured the same way.
package evalharness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/registry"
)

// ErrData is wrapped by every error about the content of an input file;
// the error message names the file and line.
var ErrData = errors.New("evalharness: bad data")

// DataError is an error in an input file. It wraps [ErrData].
type DataError struct {
	File string
	Line int // 1-based; 0 when the error is not about one line
	Msg  string
}

func (e *DataError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns [ErrData].
func (e *DataError) Unwrap() error { return ErrData }

// corpusLine is one line of a corpus file. Both the snake_case and the
// camelCase spellings are accepted; unknown fields are ignored.
type corpusLine struct {
	ID               string   `json:"id"`
	Name             string   `json:"name"`
	Description      string   `json:"description"`
	Capabilities     []string `json:"capabilities"`
	DisplayName      string   `json:"displayName"`
	DisplayNameSnake string   `json:"display_name"`
	Examples         []string `json:"examples"`
}

// LoadCorpus reads a corpus file; see [ReadCorpus].
func LoadCorpus(path string) ([]registry.Agent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadCorpus(f, path)
}

// ReadCorpus reads a corpus in JSON Lines, one agent per line:
// {"id" or "name", "description", "capabilities", "display_name" or
// "displayName", "examples"}. The agent's name is the id (else the name)
// exactly as given, even where it breaks the registry's name rule: the
// queries refer to it. Blank lines are skipped; file names the input in
// errors.
func ReadCorpus(r io.Reader, file string) ([]registry.Agent, error) {
	var agents []registry.Agent
	seen := make(map[string]int)
	err := EachLine(r, file, func(line int, data []byte) error {
		var c corpusLine
		if err := json.Unmarshal(data, &c); err != nil {
			return &DataError{file, line, "invalid JSON: " + err.Error()}
		}
		name := c.ID
		if name == "" {
			name = c.Name
		}
		if name == "" {
			return &DataError{file, line, `agent has no "id" or "name"`}
		}
		if prev, dup := seen[name]; dup {
			return &DataError{file, line, fmt.Sprintf("duplicate id %q (first on line %d)", name, prev)}
		}
		seen[name] = line
		display := c.DisplayName
		if display == "" {
			display = c.DisplayNameSnake
		}
		agents = append(agents, registry.Agent{
			Name:         name,
			DisplayName:  display,
			Description:  c.Description,
			Capabilities: c.Capabilities,
			Examples:     c.Examples,
		})
		return nil
	})
	if err == nil && len(agents) == 0 {
		err = &DataError{File: file, Msg: "no agents"}
	}
	return agents, err
}

// Query is one labelled query.
type Query struct {
	ID       string   `json:"id"`
	Text     string   `json:"query"`
	Relevant []string `json:"relevant"`
	Subset   string   `json:"subset"`

	File string `json:"-"`
	Line int    `json:"-"`
}

// LoadQueries reads a query file; see [ReadQueries].
func LoadQueries(path string) ([]Query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadQueries(f, path)
}

// ReadQueries reads queries in JSON Lines: {"query", "relevant": [ids],
// "subset"?, "id"?}. Every query needs a non-empty text and at least one
// relevant id. Blank lines are skipped.
func ReadQueries(r io.Reader, file string) ([]Query, error) {
	var qs []Query
	err := EachLine(r, file, func(line int, data []byte) error {
		var q Query
		if err := json.Unmarshal(data, &q); err != nil {
			return &DataError{file, line, "invalid JSON: " + err.Error()}
		}
		if q.Text == "" {
			return &DataError{file, line, `query has no "query" text`}
		}
		if len(q.Relevant) == 0 {
			return &DataError{file, line, `query has no "relevant" ids`}
		}
		q.File, q.Line = file, line
		qs = append(qs, q)
		return nil
	})
	if err == nil && len(qs) == 0 {
		err = &DataError{File: file, Msg: "no queries"}
	}
	return qs, err
}

// MaxLine bounds one line of a JSON Lines file.
const MaxLine = 16 << 20

// EachLine calls fn with every non-blank line of r (trimmed) and its
// 1-based number, stopping at fn's first error. A line over MaxLine is a
// *DataError; file names r in errors.
func EachLine(r io.Reader, file string, fn func(line int, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	line := 0
	for sc.Scan() {
		line++
		data := bytes.TrimSpace(sc.Bytes())
		if len(data) == 0 {
			continue
		}
		if err := fn(line, data); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &DataError{file, line + 1, fmt.Sprintf("line longer than %d bytes", MaxLine)}
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// Check reports the first query whose relevant ids are not all in the
// corpus, as a *[DataError] naming the query's file and line.
func Check(corpus []registry.Agent, queries []Query) error {
	ids := make(map[string]bool, len(corpus))
	for _, a := range corpus {
		ids[a.Name] = true
	}
	for _, q := range queries {
		for _, id := range q.Relevant {
			if !ids[id] {
				return &DataError{q.File, q.Line, fmt.Sprintf("relevant id %q is not in the corpus", id)}
			}
		}
	}
	return nil
}

// SearchFunc ranks the corpus for a query and returns agent names, best
// first. Returning fewer names than the corpus holds is fine; the metrics
// only look at the top 10 (MRR at everything returned).
type SearchFunc func(query string) ([]string, error)

// Metrics are averages over queries.
type Metrics struct {
	Queries int `json:"queries"`
	// RecallAt1 and RecallAt5: |relevant ∩ top k| / |relevant|.
	RecallAt1 float64 `json:"recallAt1"`
	RecallAt5 float64 `json:"recallAt5"`
	// NDCGAt10: binary-relevance nDCG of the top 10.
	NDCGAt10 float64 `json:"ndcgAt10"`
	// MRR: reciprocal rank of the first relevant result among those
	// returned (0 when none is).
	MRR float64 `json:"mrr"`
}

// Report is the outcome of [Evaluate].
type Report struct {
	Overall Metrics            `json:"overall"`
	Subsets map[string]Metrics `json:"subsets,omitempty"`
	// Elapsed is the time spent in the SearchFunc.
	Elapsed time.Duration `json:"-"`
}

// SubsetNames returns the subset names of r in ascending order.
func (r *Report) SubsetNames() []string {
	names := make([]string, 0, len(r.Subsets))
	for n := range r.Subsets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Evaluate runs every query through search and averages the metrics, overall
// and per non-empty Subset. A search error stops the evaluation and is
// returned with the query's file and line; to score a query the ranker
// refuses (such as one without words) as a miss, return no names and no
// error.
func Evaluate(queries []Query, search SearchFunc) (Report, error) {
	type acc struct {
		n                int
		r1, r5, ndcg, rr float64
	}
	var all acc
	subsets := make(map[string]*acc)
	var elapsed time.Duration
	for _, q := range queries {
		start := time.Now()
		ranked, err := search(q.Text)
		elapsed += time.Since(start)
		if err != nil {
			return Report{}, fmt.Errorf("%s:%d: %w", q.File, q.Line, err)
		}
		r1, r5, ndcg, rr := score(ranked, q.Relevant)
		add := func(a *acc) {
			a.n++
			a.r1 += r1
			a.r5 += r5
			a.ndcg += ndcg
			a.rr += rr
		}
		add(&all)
		if q.Subset != "" {
			a := subsets[q.Subset]
			if a == nil {
				a = &acc{}
				subsets[q.Subset] = a
			}
			add(a)
		}
	}
	mean := func(a *acc) Metrics {
		if a.n == 0 {
			return Metrics{}
		}
		n := float64(a.n)
		return Metrics{Queries: a.n, RecallAt1: a.r1 / n, RecallAt5: a.r5 / n, NDCGAt10: a.ndcg / n, MRR: a.rr / n}
	}
	rep := Report{Overall: mean(&all), Elapsed: elapsed}
	if len(subsets) > 0 {
		rep.Subsets = make(map[string]Metrics, len(subsets))
		for name, a := range subsets {
			rep.Subsets[name] = mean(a)
		}
	}
	return rep, nil
}

// score computes the metrics of one ranking. Duplicate names in ranked count
// once, at their first position.
func score(ranked, relevant []string) (r1, r5, ndcg, rr float64) {
	rel := make(map[string]bool, len(relevant))
	for _, id := range relevant {
		rel[id] = true
	}
	nrel := len(rel)
	seen := make(map[string]bool, len(ranked))
	found1, found5 := 0, 0
	dcg := 0.0
	pos := 0
	for _, id := range ranked {
		if seen[id] {
			continue
		}
		seen[id] = true
		pos++
		if !rel[id] {
			continue
		}
		if rr == 0 {
			rr = 1 / float64(pos)
		}
		if pos <= 1 {
			found1++
		}
		if pos <= 5 {
			found5++
		}
		if pos <= 10 {
			dcg += 1 / math.Log2(float64(pos)+1)
		}
	}
	idcg := 0.0
	for i := 1; i <= min(nrel, 10); i++ {
		idcg += 1 / math.Log2(float64(i)+1)
	}
	return float64(found1) / float64(nrel), float64(found5) / float64(nrel), dcg / idcg, rr
}
