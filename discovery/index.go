package discovery

import (
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/internal/textnorm"
	"github.com/agentmesh/agentmesh/registry"
)

// The indexed fields of an agent record, in posting order.
const (
	fieldName = iota
	fieldDisplayName
	fieldCapabilities
	fieldDescription
	fieldExamples
	numFields
)

// capSlot is the index in a posting's counts of its capability mask: bit i
// (i < 7) is set when capability i holds the term, bit 7 when one of the
// capabilities from the eighth on does. It lets a search name the matched
// capabilities without analysing text again.
const capSlot = numFields

// metaSlot is the index in a posting's counts of a little-endian uint16
// that says which one field the term occurs in and that field's length:
// field<<13 | length. It is multiField when the term occurs in several
// fields or the field is longer than maxMetaLen. Scoring a one-field posting then needs no look-up in
// index.lens, a large array whose random reads cost a cache miss each.
const metaSlot = numFields + 1

// multiField is the meta of a posting whose term occurs in several fields.
const multiField = 0xffff

// maxMetaLen is the largest field length a posting's meta holds.
const maxMetaLen = 1<<13 - 1

// counts holds a posting's term frequency per field (saturating at 255),
// its capability mask and its meta: 8 bytes.
type counts [numFields + 3]uint8

// meta returns the posting's meta.
func (c *counts) meta() uint16 { return uint16(c[metaSlot]) | uint16(c[metaSlot+1])<<8 }

// setMeta stores the meta of c, given the document's field lengths.
func (c *counts) setMeta(lens *[numFields]uint16) {
	m, n := uint16(multiField), 0
	for f := range numFields {
		if c[f] != 0 {
			m = uint16(f)<<13 | lens[f]
			n++
			if lens[f] > maxMetaLen {
				n = 2 // too long for the meta: read index.lens instead
			}
		}
	}
	if n != 1 {
		m = multiField
	}
	c[metaSlot], c[metaSlot+1] = uint8(m), uint8(m>>8)
}

// postings is one sorted list of postings, as two parallel slices (4 + 8
// bytes per posting, no padding).
type postings struct {
	docs   []int32
	counts []counts
	// maxTF bounds the BM25F pseudo-frequency of the term in these
	// documents: the maximum over postings of the pseudo-frequency computed
	// with the average field lengths of the moment the posting was written.
	// As the length factor 1/(1-b+b·len/avg) grows at most in proportion to
	// avg, maxTF × max(1, avg/index.minAvg) bounds it at any later time. It
	// only grows while postings come and go, so it stays an upper bound;
	// MaxScore uses it to skip documents that cannot make the top k.
	maxTF float32
}

// find returns the counts of doc d, or nil.
func (p *postings) find(d int32) *counts {
	if i, ok := slices.BinarySearch(p.docs, d); ok {
		return &p.counts[i]
	}
	return nil
}

// term is one entry of the dictionary.
type term struct {
	key string
	postings
}

// doc is one indexed agent. Its terms are not stored: analysing the record
// again gives them (see index.docTerms), except those that came only from
// segmenting a concatenated name, which depend on the vocabulary of the
// moment and are kept in seg (usually empty).
type doc struct {
	agent  registry.Agent // redacted, with Labels nil: they are in labels
	labels []label        // sorted by key
	seg    []int32        // ids of the segmentation-only terms, ascending
	enc    *recordJSON    // the record's JSON encoding, made on first use
}

// label is one label of an agent. A slice of them takes a tenth of the
// memory of the map it comes from (a map costs ~300 bytes even for one
// entry); results get a map again.
type label struct{ key, value string }

// newDoc makes the stored form of a redacted agent.
func makeDoc(a registry.Agent) doc {
	d := doc{agent: a, enc: new(recordJSON)}
	if len(a.Labels) > 0 {
		d.labels = make([]label, 0, len(a.Labels))
		for k, v := range a.Labels {
			d.labels = append(d.labels, label{k, v})
		}
		slices.SortFunc(d.labels, func(x, y label) int { return strings.Compare(x.key, y.key) })
	}
	d.agent.Labels = nil
	return d
}

// record returns a copy of the agent record, labels included.
func (d *doc) record() registry.Agent {
	a := d.agent.Clone()
	if d.labels != nil {
		a.Labels = make(map[string]string, len(d.labels))
		for _, l := range d.labels {
			a.Labels[l.key] = l.value
		}
	}
	return a
}

// label returns the value of label k.
func (d *doc) label(k string) (string, bool) {
	i, ok := slices.BinarySearchFunc(d.labels, k, func(l label, k string) int { return strings.Compare(l.key, k) })
	if !ok {
		return "", false
	}
	return d.labels[i].value, true
}

// index is the inverted index. It is not safe for concurrent use; Engine
// guards it.
type index struct {
	termIDs   map[string]int32
	terms     []term
	freeTerms []int32

	docIDs   map[string]int32
	docs     []doc
	lens     [][numFields]uint16 // field lengths in tokens, by doc id
	nameKeys []uint64            // first 8 bytes of the name, big-endian, by doc id
	ttl      []bool              // the agent has a TTL, by doc id
	freeDocs []int32
	nDocs    int
	totals   [numFields]int64 // sum of field lengths over live docs

	// p are the scoring parameters maxTF is computed with.
	p *scoring
	// bulk is set while Reset loads the index: bounds are computed once at
	// the end.
	bulk bool
	// avg is the current average length of each field (at least 1), and
	// minAvg the smallest average any maxTF was computed with.
	avg, minAvg [numFields]float64

	// words counts, per folded word, the agents whose text has it as a
	// word: the vocabulary that splits concatenated names.
	words map[string]int32
}

func newIndex(p *scoring) *index {
	ix := &index{
		termIDs: make(map[string]int32),
		docIDs:  make(map[string]int32),
		words:   make(map[string]int32),
		p:       p,
	}
	for f := range numFields {
		ix.avg[f], ix.minAvg[f] = 1, 1
	}
	return ix
}

// avgLen returns an average field length as scoring uses it: at least 1,
// so that a field almost no agent has does not crush the few that do.
func avgLen(total int64, docs int) float64 {
	if docs == 0 {
		return 1
	}
	return max(1, float64(total)/float64(docs))
}

// refreshAvg recomputes the average field lengths after a change.
func (ix *index) refreshAvg() {
	for f := range numFields {
		ix.avg[f] = avgLen(ix.totals[f], ix.nDocs)
		ix.minAvg[f] = min(ix.minAvg[f], ix.avg[f])
	}
}

// boundFactor is what maxTF values must be multiplied by to bound the
// pseudo-frequencies at the current averages.
func (ix *index) boundFactor() float64 {
	r := 1.0
	for f := range numFields {
		if ix.p.b[f] > 0 {
			r = max(r, ix.avg[f]/ix.minAvg[f])
		}
	}
	return r
}

// tfOf is the BM25F pseudo-frequency of a posting at the current averages:
// Σ weight·tf/(1-b+b·len/avg) over its fields.
func (ix *index) tfOf(c *counts, lens *[numFields]uint16) float32 {
	v := 0.0
	for f := range numFields {
		if c[f] != 0 {
			b := ix.p.b[f]
			v += ix.p.weight[f] * float64(c[f]) / (1 - b + b*float64(lens[f])/ix.avg[f])
		}
	}
	return float32(v)
}

// rebound recomputes every maxTF at the current averages when they have
// grown enough since the bounds were computed to make them loose (10%): a
// pass over all postings, rare once a registry's size settles.
func (ix *index) rebound() {
	if ix.boundFactor() >= 1.1 {
		ix.recomputeBounds()
	}
}

// recomputeBounds recomputes every maxTF at the current averages.
func (ix *index) recomputeBounds() {
	for t := range ix.terms {
		p := &ix.terms[t].postings
		p.maxTF = 0
		for i, d := range p.docs {
			p.maxTF = max(p.maxTF, ix.tfOf(&p.counts[i], &ix.lens[d]))
		}
	}
	ix.minAvg = ix.avg
}

// textOptions switch off parts of the text processing. The zero value (all
// on) is what the package uses; the others exist to measure what each part
// gains (see tune_test.go).
type textOptions struct {
	noStem, noStop, noSplit, noSegment bool
	// fields, when non-zero, restricts indexing to the fields whose bit
	// is set.
	fields uint8
}

func (t *textOptions) stem(s string) string {
	if t.noStem {
		return s
	}
	return textnorm.Stem(s)
}

func (t *textOptions) stop(s string) bool { return !t.noStop && textnorm.IsStopWord(s) }

// analysis is the indexable content of one agent.
type analysis struct {
	terms []termCount // sorted by key
	lens  [numFields]uint16
	// segKeys are the keys of terms that only segmentation produced.
	segKeys []string
}

type termCount struct {
	key string
	c   counts
}

// agentWords returns the distinct folded words of a, sorted: every token of
// the description and examples, the camelCase parts of the identifier-like
// fields (name, display name, capabilities), and the tokens of those fields
// when the author separated them ("Space Photo Explorer", "cost-center"),
// but not a field that is one token ("timeport", "weatherforecast": a name,
// maybe a concatenation, not a word). They are the vocabulary that segments
// concatenated names, so only words segmentation can use are kept: three or
// more lower-case ASCII letters.
func agentWords(a *registry.Agent, topt *textOptions) []string {
	var w []string
	ident := func(s string) {
		n := len(w)
		w = textnorm.Tokens(w, s)
		if len(w)-n == 1 {
			w = w[:n]
		}
		if !topt.noSplit {
			w = textnorm.SplitIdentifier(w, s)
		}
	}
	ident(a.Name)
	ident(a.DisplayName)
	for _, c := range a.Capabilities {
		ident(c)
	}
	w = textnorm.Tokens(w, a.Description)
	for _, e := range a.Examples {
		w = textnorm.Tokens(w, e)
	}
	w = slices.DeleteFunc(w, func(s string) bool { return !segmentable(s) })
	slices.Sort(w)
	return slices.Compact(w)
}

// segment appends the pieces of a concatenated word t, unless t is a word
// itself or an inflection of one ("budgeting" when "budget" is known).
func segment(dst []string, t string, isWord func(string) bool, topt *textOptions) []string {
	if !segmentable(t) || isWord(t) || isWord(topt.stem(t)) {
		return dst
	}
	return textnorm.Segment(dst, t, isWord)
}

// segmentable reports whether w can be a piece of a segmented name.
func segmentable(w string) bool {
	if len(w) < 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// analyze computes the indexable content of a. own is agentWords(a); known
// reports whether a word is in the vocabulary of the rest of the index
// (nil: none).
func analyze(a *registry.Agent, own []string, known func(string) bool, topt *textOptions) analysis {
	var an analysis
	type occ struct {
		key   string
		field uint8
		cap   int8 // capability index, -1 outside capabilities
		seg   bool // from segmentation
	}
	var occs []occ
	var scratch []string
	isWord := func(piece string) bool {
		if textnorm.IsStopWord(piece) {
			return false
		}
		if _, ok := slices.BinarySearch(own, piece); ok {
			return true
		}
		return known != nil && known(piece)
	}
	// An identifier-like field gives its tokens, their camelCase parts, and
	// the segmentation of concatenated lower-case words.
	identifier := func(field int, s string, capIdx int) {
		toks := textnorm.Tokens(scratch[:0], s)
		if !topt.noSplit {
			toks = textnorm.SplitIdentifier(toks, s)
		}
		n := len(toks)
		if !topt.noSegment {
			for _, t := range toks[:n] {
				toks = segment(toks, t, isWord, topt)
			}
		}
		for i, t := range toks {
			occs = append(occs, occ{topt.stem(t), uint8(field), int8(capIdx), i >= n})
		}
		an.lens[field] = sat16(int(an.lens[field]) + len(toks))
		scratch = toks[:0]
	}
	text := func(field int, s string) {
		toks := textnorm.Tokens(scratch[:0], s)
		for _, t := range toks {
			occs = append(occs, occ{topt.stem(t), uint8(field), -1, false})
		}
		an.lens[field] = sat16(int(an.lens[field]) + len(toks))
		scratch = toks[:0]
	}
	use := func(field int) bool { return topt.fields == 0 || topt.fields&(1<<field) != 0 }
	if use(fieldName) {
		identifier(fieldName, a.Name, -1)
	}
	if use(fieldDisplayName) {
		identifier(fieldDisplayName, a.DisplayName, -1)
	}
	if use(fieldCapabilities) {
		for i, c := range a.Capabilities {
			identifier(fieldCapabilities, c, min(i, 7))
		}
	}
	if use(fieldDescription) {
		text(fieldDescription, a.Description)
	}
	if use(fieldExamples) {
		for _, e := range a.Examples {
			text(fieldExamples, e)
		}
	}

	slices.SortFunc(occs, func(x, y occ) int { return strings.Compare(x.key, y.key) })
	for i := 0; i < len(occs); {
		tc := termCount{key: occs[i].key}
		segOnly := true
		for ; i < len(occs) && occs[i].key == tc.key; i++ {
			o := occs[i]
			if tc.c[o.field] < 255 {
				tc.c[o.field]++
			}
			if o.cap >= 0 {
				tc.c[capSlot] |= 1 << o.cap
			}
			segOnly = segOnly && o.seg
		}
		an.terms = append(an.terms, tc)
		if segOnly {
			an.segKeys = append(an.segKeys, tc.key)
		}
	}
	return an
}

// docTerms returns the ids of the terms of doc id, ascending: those of its
// record analysed without segmentation, and its segmentation-only ones.
func (ix *index) docTerms(id int32, topt *textOptions) []int32 {
	plain := *topt
	plain.noSegment = true
	an := analyze(&ix.docs[id].agent, nil, nil, &plain)
	ids := make([]int32, 0, len(an.terms)+len(ix.docs[id].seg))
	for _, tc := range an.terms {
		if t, ok := ix.termIDs[tc.key]; ok {
			ids = append(ids, t)
		}
	}
	ids = append(ids, ix.docs[id].seg...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

func sat16(n int) uint16 {
	if n > 65535 {
		return 65535
	}
	return uint16(n)
}

// knownWord reports whether some indexed agent has w as a word.
func (ix *index) knownWord(w string) bool { return ix.words[w] > 0 }

// sameContent reports whether a and b have the same indexed content.
func sameContent(a, b *registry.Agent) bool {
	return a.Name == b.Name && a.DisplayName == b.DisplayName && a.Description == b.Description &&
		slices.Equal(a.Capabilities, b.Capabilities) && slices.Equal(a.Examples, b.Examples)
}

// put indexes a (already redacted), replacing any previous version of the
// agent. own is agentWords(a) and an its analysis.
func (ix *index) put(a registry.Agent, own []string, an *analysis, topt *textOptions) {
	id, exists := ix.docIDs[a.Name]
	var old []int32 // the doc's current terms
	if !exists {
		id = ix.newDoc()
		ix.docIDs[a.Name] = id // the record keeps the name alive anyway
		ix.nDocs++
	} else {
		old = ix.docTerms(id, topt)
		ix.countWords(agentWords(&ix.docs[id].agent, topt), -1)
		for f := range numFields {
			ix.totals[f] -= int64(ix.lens[id][f])
		}
	}
	ix.countWords(own, +1)
	ix.lens[id] = an.lens
	for f := range numFields {
		ix.totals[f] += int64(an.lens[f])
	}
	ix.refreshAvg()
	if !ix.bulk {
		ix.rebound()
	}
	ix.nameKeys[id] = nameKey(a.Name)
	ix.ttl[id] = a.TTLSeconds > 0

	// Resolve term ids, then merge the new sorted term list with the old.
	type idCount struct {
		id int32
		c  counts
	}
	news := make([]idCount, len(an.terms))
	for i, tc := range an.terms {
		tc.c.setMeta(&an.lens)
		news[i] = idCount{ix.termID(tc.key), tc.c}
	}
	slices.SortFunc(news, func(x, y idCount) int { return int(x.id) - int(y.id) })
	i, j := 0, 0
	for i < len(old) || j < len(news) {
		switch {
		case j == len(news) || i < len(old) && old[i] < news[j].id:
			ix.removePosting(old[i], id)
			i++
		case i == len(old) || news[j].id < old[i]:
			ix.insertPosting(news[j].id, id, news[j].c, &an.lens)
			j++
		default: // same term: update in place
			ix.updatePosting(old[i], id, news[j].c, &an.lens)
			i++
			j++
		}
	}
	var seg []int32
	for _, k := range an.segKeys {
		seg = append(seg, ix.termIDs[k])
	}
	slices.Sort(seg)
	d := makeDoc(a)
	d.seg = seg
	ix.docs[id] = d
}

// compact trims every postings list to its length, after a bulk load.
func (ix *index) compact() {
	for t := range ix.terms {
		p := &ix.terms[t].postings
		if cap(p.docs) > len(p.docs) {
			p.docs = slices.Clone(p.docs)
			p.counts = slices.Clone(p.counts)
		}
	}
}

// remove deletes the agent named name and reports whether it was indexed.
func (ix *index) remove(name string, topt *textOptions) bool {
	id, ok := ix.docIDs[name]
	if !ok {
		return false
	}
	for _, t := range ix.docTerms(id, topt) {
		ix.removePosting(t, id)
	}
	ix.countWords(agentWords(&ix.docs[id].agent, topt), -1)
	for f := range numFields {
		ix.totals[f] -= int64(ix.lens[id][f])
	}
	delete(ix.docIDs, name)
	ix.refreshAvg()
	ix.docs[id] = doc{}
	ix.lens[id] = [numFields]uint16{}
	ix.nameKeys[id] = 0
	ix.ttl[id] = false
	ix.freeDocs = append(ix.freeDocs, id)
	ix.nDocs--
	return true
}

func (ix *index) countWords(words []string, delta int32) {
	for _, w := range words {
		n := ix.words[w] + delta
		switch {
		case n <= 0:
			delete(ix.words, w)
		case delta > 0 && n == 1:
			ix.words[strings.Clone(w)] = n
		default:
			ix.words[w] = n
		}
	}
}

func (ix *index) newDoc() int32 {
	if n := len(ix.freeDocs); n > 0 {
		id := ix.freeDocs[n-1]
		ix.freeDocs = ix.freeDocs[:n-1]
		return id
	}
	ix.docs = append(ix.docs, doc{})
	ix.lens = append(ix.lens, [numFields]uint16{})
	ix.nameKeys = append(ix.nameKeys, 0)
	ix.ttl = append(ix.ttl, false)
	return int32(len(ix.docs) - 1)
}

// termID returns the id of key, creating the term if needed.
func (ix *index) termID(key string) int32 {
	if id, ok := ix.termIDs[key]; ok {
		return id
	}
	// Keys are often substrings of an agent's description: copy them so
	// the dictionary does not keep whole records alive.
	key = strings.Clone(key)
	var id int32
	if n := len(ix.freeTerms); n > 0 {
		id = ix.freeTerms[n-1]
		ix.freeTerms = ix.freeTerms[:n-1]
		ix.terms[id] = term{key: key}
	} else {
		id = int32(len(ix.terms))
		ix.terms = append(ix.terms, term{key: key})
	}
	ix.termIDs[key] = id
	return id
}

// insertPosting adds the posting of doc d, whose field lengths are lens,
// to term t.
func (ix *index) insertPosting(t, d int32, c counts, lens *[numFields]uint16) {
	p := &ix.terms[t].postings
	i, _ := slices.BinarySearch(p.docs, d)
	p.docs = slices.Insert(p.docs, i, d)
	p.counts = slices.Insert(p.counts, i, c)
	p.maxTF = max(p.maxTF, ix.tfOf(&c, lens))
}

// updatePosting replaces the posting of doc d in term t.
func (ix *index) updatePosting(t, d int32, c counts, lens *[numFields]uint16) {
	p := &ix.terms[t].postings
	if old := p.find(d); old != nil {
		*old = c
		p.maxTF = max(p.maxTF, ix.tfOf(&c, lens))
	}
}

// removePosting deletes the posting of doc d from term t, and the term when
// it has no postings left.
func (ix *index) removePosting(t, d int32) {
	tm := &ix.terms[t]
	p := &tm.postings
	i, ok := slices.BinarySearch(p.docs, d)
	if !ok {
		return
	}
	p.docs = slices.Delete(p.docs, i, i+1)
	p.counts = slices.Delete(p.counts, i, i+1)
	switch {
	case len(p.docs) == 0:
		delete(ix.termIDs, tm.key)
		*tm = term{}
		ix.freeTerms = append(ix.freeTerms, t)
	case cap(p.docs) > 64 && len(p.docs) < cap(p.docs)/4:
		// Give memory back after mass removals. (The bound stays: it was
		// computed with averages no smaller than minAvg.)
		p.docs = slices.Clip(slices.Clone(p.docs))
		p.counts = slices.Clip(slices.Clone(p.counts))
	}
}

// nameKey packs the first 8 bytes of name so that comparing keys compares
// names (when the keys differ).
func nameKey(name string) uint64 {
	var k uint64
	for i := range 8 {
		k <<= 8
		if i < len(name) {
			k |= uint64(name[i])
		}
	}
	return k
}

// compareNames orders docs a and b by name.
func (ix *index) compareNames(a, b int32) int {
	ka, kb := ix.nameKeys[a], ix.nameKeys[b]
	switch {
	case ka < kb:
		return -1
	case ka > kb:
		return 1
	}
	return strings.Compare(ix.docs[a].agent.Name, ix.docs[b].agent.Name)
}
