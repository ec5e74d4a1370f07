package discovery

import (
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/textnorm"
	"github.com/agentmesh/agentmesh/registry"
)

// Scorer names a ranking function.
type Scorer string

// The scorers a [Query] may name (docs/API.md#discovery).
const (
	// ScorerBM25 is BM25F over the name, display name, capabilities,
	// description and examples, with field weights, stemming and stop words.
	// It is the default.
	ScorerBM25 Scorer = "bm25"
	// ScorerOverlap is the seed's scorer, with whole-token matching: the
	// fraction of query terms found in the description, capabilities or
	// name.
	ScorerOverlap Scorer = "overlap"
)

// Limits of [Query.Limit].
const (
	DefaultLimit = 10
	MaxLimit     = 100
)

// Query holds the options of a search. A nil *Query, and the zero value of
// every field, mean the documented default.
type Query struct {
	// Limit is the maximum number of results. Zero or less means
	// DefaultLimit (10); more than MaxLimit (100) means MaxLimit.
	Limit int

	// MinScore leaves out results whose Score is below it. It must be in
	// [0, 1]; zero keeps every matching agent.
	MinScore float64

	// Scorer picks the ranking function: "" means ScorerBM25.
	Scorer Scorer

	// Labels keeps only agents that have every one of these labels with
	// exactly this value. Nil or empty keeps all.
	Labels map[string]string

	// Protocol keeps only agents of this protocol; an agent with no
	// protocol set counts as registry.ProtocolHTTP. "" keeps all.
	Protocol registry.Protocol

	// RequiredResources keeps only agents that cover every one of these
	// resource URIs with one of their resources (see [ResourceCovers]).
	// Covering is a filter, not a score boost.
	RequiredResources []string

	// IncludeUnavailable keeps agents for which Options.Available returns
	// false. False (the default) leaves them out.
	IncludeUnavailable bool
}

// Result is one ranked agent.
type Result struct {
	// Agent is a copy of the agent record without its auth token.
	Agent registry.Agent `json:"agent"`

	// Score is in (0, 1], higher is better. For bm25 it is the BM25F score
	// divided by the sum of the idf of the query's terms (its value if every
	// term matched with unbounded frequency): it does not depend on the
	// other results, so a MinScore keeps its meaning as agents come and go.
	// An agent matching every term once in its description scores about
	// 0.4. For overlap it equals Coverage.
	Score float64 `json:"score"`

	// Coverage is the fraction of the query's terms that the agent matched
	// (for overlap: in its description, capabilities or name).
	Coverage float64 `json:"coverage"`

	// MatchedTerms are the query tokens that matched, case-folded, in query
	// order. Tokens that share a stem match together ("budget budgets").
	MatchedTerms []string `json:"matchedTerms"`

	// MatchedCapabilities are the agent's capabilities that contain a
	// matched term.
	MatchedCapabilities []string `json:"matchedCapabilities"`

	// MatchedResources are the agent's resources that cover a required
	// resource, in the agent's order. Empty when none were required.
	MatchedResources []registry.Resource `json:"matchedResources"`
}

// scoring holds the BM25F parameters.
type scoring struct {
	k1     float64
	weight [numFields]float64
	b      [numFields]float64
}

// defaultScoring is the tuned BM25F configuration; see DESIGN.md.
var defaultScoring = scoring{
	k1:     1.6,
	weight: [numFields]float64{fieldName: 2, fieldDisplayName: 1, fieldCapabilities: 2, fieldDescription: 1, fieldExamples: 0.5},
	b:      [numFields]float64{fieldName: 0.5, fieldDisplayName: 0.5, fieldCapabilities: 0.5, fieldDescription: 0.3, fieldExamples: 0.3},
}

// queryTerm is one distinct term of a query.
type queryTerm struct {
	key   string   // stemmed
	forms []string // the query tokens that stem to key, in query order
	id    int32    // term id, or -1 when no agent has the term
	ub    float64  // upper bound of the term's contribution
	idf   float64
}

// MaxQueryTerms is the number of distinct terms of a query that count: the
// first ones, in query order. Longer queries (a whole task description,
// say) are cut there rather than refused; a term-per-cursor search stays
// bounded whatever the query.
const MaxQueryTerms = 256

// MaxQueryRunes is the longest query, in characters (Unicode code points):
// the same bound as a routed message. A longer query is refused with
// [ErrInvalidQuery] before it is tokenized, so its cost stays a few
// microseconds whatever its size.
const MaxQueryRunes = 10000

// parseQuery tokenizes a query into distinct terms. Stop words are dropped
// unless every token is one, in which case they are all kept (so "IT" or
// "who" still find agents named after them).
func parseQuery(query string, topt *textOptions) ([]queryTerm, error) {
	if tooLong(query) {
		return nil, apierr.Errorf(ErrInvalidQuery, "query is longer than %d characters", MaxQueryRunes)
	}
	var buf [32]string
	toks := textnorm.Tokens(buf[:0], query)
	if len(toks) == 0 {
		return nil, apierr.Errorf(ErrEmptyQuery, "the query has no letters or digits")
	}
	allStop := true
	for _, t := range toks {
		if !topt.stop(t) {
			allStop = false
			break
		}
	}
	terms := make([]queryTerm, 0, min(len(toks), MaxQueryTerms))
	var seen map[string]bool // for long queries; short ones search terms
	if len(toks) > 32 {
		seen = make(map[string]bool, len(toks))
	}
	for i, t := range toks {
		if !allStop && topt.stop(t) {
			continue
		}
		if seen != nil {
			if seen[t] {
				continue
			}
			seen[t] = true
		} else if slices.Contains(toks[:i], t) {
			continue
		}
		key := topt.stem(t)
		j := slices.IndexFunc(terms, func(q queryTerm) bool { return q.key == key })
		if j < 0 {
			if len(terms) == MaxQueryTerms {
				continue
			}
			terms = append(terms, queryTerm{key: key, id: -1})
			j = len(terms) - 1
		}
		terms[j].forms = append(terms[j].forms, t)
	}
	return terms, nil
}

// tooLong reports whether query has more than MaxQueryRunes characters,
// reading at most 4×MaxQueryRunes bytes of it: a character is one to four
// bytes (an invalid byte counts as one), so a longer string is too long.
func tooLong(query string) bool {
	switch {
	case len(query) <= MaxQueryRunes:
		return false
	case len(query) > utf8.UTFMax*MaxQueryRunes:
		return true
	}
	return utf8.RuneCountInString(query) > MaxQueryRunes
}

// options is a validated Query.
type options struct {
	Query
	limit int
	topt  *textOptions
}

func validate(q *Query) (options, error) {
	var o options
	if q != nil {
		o.Query = *q
	}
	switch o.Scorer {
	case "":
		o.Scorer = ScorerBM25
	case ScorerBM25, ScorerOverlap:
	default:
		return o, apierr.Errorf(ErrInvalidQuery, "unknown scorer %q (want %q or %q)", o.Scorer, ScorerBM25, ScorerOverlap)
	}
	if !(o.MinScore >= 0 && o.MinScore <= 1) { // also catches NaN
		return o, apierr.Errorf(ErrInvalidQuery, "minScore %v is not in [0, 1]", o.MinScore)
	}
	o.limit = o.Limit
	switch {
	case o.limit <= 0:
		o.limit = DefaultLimit
	case o.limit > MaxLimit:
		o.limit = MaxLimit
	}
	return o, nil
}

// Search returns the agents that best match query, best first: by Score
// descending, then by name ascending. Agents that match no query term are
// never returned, nor are stale agents (their TTL lapsed at Options.Now) and,
// unless q.IncludeUnavailable, agents that Options.Available rejects. q nil
// means all defaults.
//
// Search returns an error wrapping [ErrEmptyQuery] when query has no token,
// and one wrapping [ErrInvalidQuery] when query is longer than
// [MaxQueryRunes] characters or q is out of range; both map to
// code "invalid_argument" through [Code]. A query whose terms no agent has
// returns no results and no error.
func (e *Engine) Search(query string, q *Query) ([]Result, error) {
	return search(e, query, q, (*searcher).result)
}

// ranked is what a search builds for each hit: a [Result], or an
// [encodedResult] for [Engine.AppendSearchJSON].
type ranked interface {
	agentName() string
}

// search validates and parses a query, and ranks the agents with build
// making each result. Availability is checked outside the engine's lock
// (Available is the host's code): fetch, drop unavailable agents, and
// fetch again without them while results are missing.
func search[R ranked](e *Engine, query string, q *Query, build func(*searcher, []queryTerm, hit) R) ([]R, error) {
	o, err := validate(q)
	if err != nil {
		return nil, err
	}
	o.topt = &e.text
	terms, err := parseQuery(query, &e.text)
	if err != nil {
		return nil, err
	}
	e.catchUp()      // read-your-writes: index what Follow has queued
	now := e.clock() // host code: called before taking the lock
	if e.available == nil || o.IncludeUnavailable {
		res, _ := rank(e, terms, &o, o.limit, nil, now, build)
		return res, nil
	}
	verdicts := make(map[string]bool)
	var unavailable map[string]bool
	extra := 0
	for {
		res, more := rank(e, terms, &o, o.limit+extra, unavailable, now, build)
		kept := res[:0]
		fresh := false
		for _, r := range res {
			name := r.agentName()
			ok, seen := verdicts[name]
			if !seen {
				ok = e.available(name)
				verdicts[name] = ok
			}
			if !ok {
				if unavailable == nil {
					unavailable = make(map[string]bool)
				}
				unavailable[name] = true
				fresh = true
				continue
			}
			kept = append(kept, r)
		}
		if len(kept) >= o.limit || !more || !fresh {
			if len(kept) > o.limit {
				kept = kept[:o.limit]
			}
			return kept, nil
		}
		extra = 2*extra + o.limit
	}
}

// hit is a scored document.
type hit struct {
	score float64
	doc   int32
}

// rank runs one query under the read lock and builds up to k results;
// more reports whether other matching agents were left out by k.
func rank[R ranked](e *Engine, terms []queryTerm, o *options, k int, exclude map[string]bool, now time.Time, build func(*searcher, []queryTerm, hit) R) (res []R, more bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	ix := e.ix
	if ix == nil || ix.nDocs == 0 {
		return []R{}, false
	}
	s := searchers.Get().(*searcher)
	defer searchers.Put(s)
	*s = searcher{ix: ix, o: o, exclude: exclude, now: now, p: e.scoring()}
	s.filtered = len(exclude) > 0 || o.Protocol != "" || len(o.Labels) > 0 || len(o.RequiredResources) > 0
	hits, more := s.run(terms, k)
	res = make([]R, len(hits))
	for i, h := range hits {
		res[i] = build(s, terms, h)
	}
	s.ix, s.o, s.p, s.exclude = nil, nil, nil, nil // not kept alive by the pool
	return res, more
}

// searchers recycles the state of searches: its per-query caches are a
// few KiB, which would otherwise be garbage after every query.
var searchers = sync.Pool{New: func() any { return new(searcher) }}

// searcher holds the state of one search.
type searcher struct {
	ix      *index
	o       *options
	p       *scoring
	exclude map[string]bool
	now     time.Time
	overlap bool

	// bm25 length normalisation per field: 1-b and b/avglen, and a cache
	// of weight/(1-b+b·len/avglen) for short fields.
	oneMinusB [numFields]float64
	bOverAvg  [numFields]float64
	normCache [numFields][normCache]float64
	satCache  [numFields][normCache]float64
	total     float64 // sum of the idf of the query terms: the normaliser of scores
	// filtered is set when the query has filters beyond TTL staleness.
	filtered bool
}

// normCache is how many field lengths the per-query cache covers.
const normCache = 48

// cursor walks one term's postings.
type cursor struct {
	cur    int32 // docs[pos], or endOfList
	pos    int
	docs   []int32
	counts []counts
	ub     float64
	idf    float64
}

const endOfList = math.MaxInt32

func (c *cursor) next() {
	c.pos++
	if c.pos < len(c.docs) {
		c.cur = c.docs[c.pos]
	} else {
		c.cur = endOfList
	}
}

// seek advances to the first posting whose doc is ≥ d, galloping.
func (c *cursor) seek(d int32) {
	if c.cur >= d {
		return
	}
	n := len(c.docs)
	lo, step := c.pos, 1
	hi := lo + step
	for hi < n && c.docs[hi] < d {
		lo = hi
		step *= 2
		hi = lo + step
	}
	if hi > n {
		hi = n
	}
	// docs[lo] < d; the answer is in (lo, hi].
	i, _ := slices.BinarySearch(c.docs[lo+1:hi], d)
	c.pos = lo + 1 + i
	if c.pos < n {
		c.cur = c.docs[c.pos]
	} else {
		c.cur = endOfList
	}
}

// idf is the BM25 inverse document frequency, always positive.
func idf(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// run returns the top k hits, best first, and whether more matched.
func (s *searcher) run(terms []queryTerm, k int) ([]hit, bool) {
	ix := s.ix
	s.overlap = s.o.Scorer == ScorerOverlap
	bound := 1.0
	if !s.overlap {
		for f := range numFields {
			s.oneMinusB[f] = 1 - s.p.b[f]
			s.bOverAvg[f] = s.p.b[f] / ix.avg[f]
		}
		bound = ix.boundFactor()
	}
	curs := make([]cursor, 0, len(terms))
	s.total = 0
	for i := range terms {
		t := &terms[i]
		t.id = -1
		df := 0
		if id, ok := ix.termIDs[t.key]; ok {
			t.id = id
			df = len(ix.terms[id].docs)
		}
		if s.overlap {
			t.idf, t.ub = 1, 1
		} else {
			t.idf = idf(ix.nDocs, df)
			t.ub = t.idf
		}
		s.total += t.ub
		if t.id < 0 {
			continue
		}
		{
			p := &ix.terms[t.id].postings
			ub := t.ub
			if !s.overlap {
				// The saturation of the term's largest possible frequency,
				// a little loose against rounding.
				m := float64(p.maxTF) * bound
				ub = t.idf * min(1, m/(s.p.k1+m)*(1+1e-6))
			}
			curs = append(curs, cursor{cur: p.docs[0], docs: p.docs, counts: p.counts, ub: ub, idf: t.idf})
		}
	}
	if len(curs) == 0 {
		return nil, false
	}
	// MaxScore: cursors sorted by upper bound; the ones whose bounds sum
	// below the threshold cannot make a hit on their own ("non-essential")
	// and are only probed for documents found through the others.
	slices.SortFunc(curs, func(a, b cursor) int {
		switch {
		case a.ub < b.ub:
			return -1
		case a.ub > b.ub:
			return 1
		}
		return len(b.docs) - len(a.docs)
	})
	prefix := make([]float64, len(curs))
	sum := 0.0
	for i := range curs {
		sum += curs[i].ub
		prefix[i] = sum
	}
	floor := s.o.MinScore * s.total * (1 - 1e-12)
	theta := floor
	ess := 0
	for ess < len(curs) && prefix[ess] < theta {
		ess++
	}
	h := hitHeap{ix: ix}
	for ess < len(curs) {
		d := int32(endOfList)
		for i := ess; i < len(curs); i++ {
			d = min(d, curs[i].cur)
		}
		if d == endOfList {
			break
		}
		score := 0.0
		for i := ess; i < len(curs); i++ {
			if c := &curs[i]; c.cur == d {
				score += s.contrib(c, d)
				c.next()
			}
		}
		pruned := false
		for i := ess - 1; i >= 0; i-- {
			if score+prefix[i] < theta {
				pruned = true
				break
			}
			c := &curs[i]
			c.seek(d)
			if c.cur == d {
				score += s.contrib(c, d)
			}
		}
		if pruned || score <= 0 || score < theta {
			continue
		}
		cand := hit{score, d}
		if len(h.hits) == k && !h.better(cand, h.hits[0]) {
			continue
		}
		if !s.admit(d) {
			continue
		}
		if len(h.hits) == k {
			h.replaceWorst(cand)
		} else {
			h.push(cand)
		}
		if len(h.hits) == k && h.hits[0].score > theta {
			theta = h.hits[0].score
			for ess < len(curs) && prefix[ess] < theta {
				ess++
			}
		}
	}
	// A full heap may have left out other matching agents; one that is not
	// full holds every admissible match.
	more := len(h.hits) == k
	out := h.sorted()
	n := 0
	for _, x := range out {
		x.score /= s.total
		if x.score >= s.o.MinScore { // exact, whatever the rounding above
			out[n] = x
			n++
		}
	}
	return out[:n], more
}

// contrib is the score contribution of the term under c for doc d, whose
// posting is c.counts[c.pos].
func (s *searcher) contrib(c *cursor, d int32) float64 {
	cnt := &c.counts[c.pos]
	if s.overlap {
		if cnt[fieldName]|cnt[fieldCapabilities]|cnt[fieldDescription] != 0 {
			return 1
		}
		return 0
	}
	if m := cnt.meta(); m != multiField {
		// One field, whose length is in the posting.
		f, l := int(m>>13), m&maxMetaLen
		if cnt[f] == 1 && l < normCache {
			return c.idf * s.sat1(f, l)
		}
		tf := s.norm(f, l) * float64(cnt[f])
		return c.idf * tf / (s.p.k1 + tf)
	}
	lens := &s.ix.lens[d]
	tf := 0.0
	for f := range numFields {
		if cnt[f] != 0 {
			tf += s.norm(f, lens[f]) * float64(cnt[f])
		}
	}
	if tf == 0 {
		return 0
	}
	return c.idf * tf / (s.p.k1 + tf)
}

// sat1 returns the saturated frequency of one occurrence in field f of
// length l < normCache, cached.
func (s *searcher) sat1(f int, l uint16) float64 {
	v := s.satCache[f][l]
	if v == 0 {
		tf := s.norm(f, l)
		v = tf / (s.p.k1 + tf)
		s.satCache[f][l] = v
	}
	return v
}

// norm returns weight/(1-b+b·len/avglen) of field f, cached for short
// lengths.
func (s *searcher) norm(f int, l uint16) float64 {
	if l >= normCache {
		return s.p.weight[f] / (s.oneMinusB[f] + s.bOverAvg[f]*float64(l))
	}
	w := s.normCache[f][l]
	if w == 0 {
		w = s.p.weight[f] / (s.oneMinusB[f] + s.bOverAvg[f]*float64(l))
		s.normCache[f][l] = w
	}
	return w
}

// admit applies the filters of the query to doc d.
func (s *searcher) admit(d int32) bool {
	if !s.filtered && !s.ix.ttl[d] {
		return true // nothing to check: leave the record alone
	}
	doc := &s.ix.docs[d]
	a := &doc.agent
	if a.TTLSeconds > 0 && a.StaleAt(s.now) {
		return false
	}
	if s.exclude[a.Name] {
		return false
	}
	if p := s.o.Protocol; p != "" {
		ap := a.Protocol
		if ap == "" {
			ap = registry.ProtocolHTTP
		}
		if ap != p {
			return false
		}
	}
	for k, v := range s.o.Labels {
		if av, ok := doc.label(k); !ok || av != v {
			return false
		}
	}
	for _, want := range s.o.RequiredResources {
		if !slices.ContainsFunc(a.Resources, func(r registry.Resource) bool { return ResourceCovers(r.URI, want) }) {
			return false
		}
	}
	return true
}

// result builds the Result of a hit.
func (s *searcher) result(terms []queryTerm, h hit) Result {
	m := s.match(terms, h)
	return Result{
		Agent:               s.ix.docs[h.doc].record(),
		Score:               m.score,
		Coverage:            m.coverage,
		MatchedTerms:        m.terms,
		MatchedCapabilities: m.capabilities,
		MatchedResources:    m.resources,
	}
}

func (r Result) agentName() string { return r.Agent.Name }

// matched is what a Result says besides the agent: its score and what
// matched. An encodedResult carries it rather than a Result, whose agent
// record field alone is a few hundred bytes.
type matched struct {
	score, coverage float64
	terms           []string
	capabilities    []string
	resources       []registry.Resource
}

// match returns the score of hit h and what matched.
func (s *searcher) match(terms []queryTerm, h hit) matched {
	d := &s.ix.docs[h.doc]
	r := matched{
		score:        h.score,
		terms:        []string{},
		capabilities: []string{},
		resources:    []registry.Resource{},
	}
	var capMask uint8 // capabilities holding a matched term
	var capStems []string
	nMatched := 0
	for i := range terms {
		t := &terms[i]
		if t.id < 0 {
			continue
		}
		c := s.ix.terms[t.id].find(h.doc)
		if c == nil {
			continue
		}
		hitField := false
		for f := range numFields {
			if c[f] != 0 && (!s.overlap || f == fieldName || f == fieldCapabilities || f == fieldDescription) {
				hitField = true
			}
		}
		if hitField {
			nMatched++
			r.terms = append(r.terms, t.forms...)
			if c[fieldCapabilities] != 0 {
				capMask |= c[capSlot]
				capStems = append(capStems, t.key)
			}
		}
	}
	r.coverage = float64(nMatched) / float64(len(terms))
	if s.overlap {
		r.score = r.coverage
	}
	if capMask != 0 {
		var scratch []string
		for i, c := range d.agent.Capabilities {
			switch {
			case i < 7 && capMask&(1<<i) != 0,
				// From the eighth on, the mask only says "one of them":
				// analyse each the way it was indexed.
				i >= 7 && capMask&(1<<7) != 0 && s.identifierHas(c, capStems, &scratch):
				r.capabilities = append(r.capabilities, c)
			}
		}
	}
	if len(s.o.RequiredResources) > 0 {
		for _, res := range d.agent.Resources {
			if slices.ContainsFunc(s.o.RequiredResources, func(want string) bool { return ResourceCovers(res.URI, want) }) {
				r.resources = append(r.resources, res)
			}
		}
	}
	return r
}

// identifierHas reports whether the identifier-like field value v, analysed
// as the index analyses it (tokens, camelCase parts, segmented pieces), has
// one of stems.
func (s *searcher) identifierHas(v string, stems []string, scratch *[]string) bool {
	has := func(toks []string) bool {
		for _, t := range toks {
			if slices.Contains(stems, s.o.topt.stem(t)) {
				return true
			}
		}
		return false
	}
	toks := textnorm.Tokens((*scratch)[:0], v)
	if !s.o.topt.noSplit {
		toks = textnorm.SplitIdentifier(toks, v)
	}
	*scratch = toks
	if has(toks) {
		return true
	}
	if s.o.topt.noSegment {
		return false
	}
	n := len(toks)
	pieces := toks[n:]
	isWord := func(p string) bool { return !textnorm.IsStopWord(p) && s.ix.knownWord(p) }
	for _, t := range toks[:n] {
		pieces = segment(pieces, t, isWord, s.o.topt)
	}
	return has(pieces)
}

// hitHeap is a min-heap of hits: the root is the worst (lowest score, then
// greatest name).
type hitHeap struct {
	ix   *index
	hits []hit
}

// better reports whether a ranks before b.
func (h *hitHeap) better(a, b hit) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return h.ix.compareNames(a.doc, b.doc) < 0
}

func (h *hitHeap) push(x hit) {
	h.hits = append(h.hits, x)
	i := len(h.hits) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.better(h.hits[p], h.hits[i]) {
			break
		}
		h.hits[p], h.hits[i] = h.hits[i], h.hits[p]
		i = p
	}
}

func (h *hitHeap) replaceWorst(x hit) {
	h.hits[0] = x
	h.down(0, len(h.hits))
}

func (h *hitHeap) down(i, n int) {
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		w := l
		if r := l + 1; r < n && h.better(h.hits[l], h.hits[r]) {
			w = r
		}
		if !h.better(h.hits[i], h.hits[w]) {
			return
		}
		h.hits[i], h.hits[w] = h.hits[w], h.hits[i]
		i = w
	}
}

// sorted empties the heap into a slice, best first.
func (h *hitHeap) sorted() []hit {
	n := len(h.hits)
	for end := n - 1; end > 0; end-- {
		h.hits[0], h.hits[end] = h.hits[end], h.hits[0]
		h.down(0, end)
	}
	// Each step moved the worst remaining hit to the end: best is first.
	return h.hits
}
