package routing

import (
	"slices"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/internal/textnorm"
)

// Feature kinds. A feature is a 64-bit hash whose top two bits hold its
// kind, so one map serves every kind and the vectoriser can normalise each
// kind separately.
const (
	kindWord   = iota // a stemmed word
	kindBigram        // two adjacent stemmed words
	kindChar          // a character n-gram of a folded word
	numKinds
)

const kindShift = 62

func kindOf(h uint64) int { return int(h >> kindShift) }

// featureOptions choose the features. The zero value is every kind, with
// character 3–5-grams; defaultParams uses 2–4.
type featureOptions struct {
	noStem    bool // words as folded, not stemmed
	noBigrams bool
	noChars   bool
	charMin   int // shortest character n-gram; 0 means 3
	charMax   int // longest; 0 means 5
}

func (o *featureOptions) charRange() (lo, hi int) {
	lo, hi = o.charMin, o.charMax
	if lo <= 0 {
		lo = 3
	}
	if hi <= 0 {
		hi = 5
	}
	return lo, max(lo, hi)
}

// Bounds on the text considered for features, so the cost of classifying
// is bounded whatever the input's size: the first maxTextBytes bytes, the
// first maxTextTokens words, and character n-grams of the first
// maxGramRunes runes of a word.
const (
	maxTextBytes  = 16 << 10
	maxTextTokens = 256
	maxGramRunes  = 32
)

// extractor turns text into feature hashes. It holds scratch buffers, so
// one extractor must not be used by two goroutines at once.
type extractor struct {
	opts   featureOptions
	toks   []string
	stems  []string
	runes  []int // byte offsets of the runes of one bounded word
	hashes []uint64
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvByte(h uint64, b byte) uint64 {
	h ^= uint64(b)
	return h * fnvPrime
}

func withKind(h uint64, kind int) uint64 {
	return h&(1<<kindShift-1) | uint64(kind)<<kindShift
}

// words returns the folded tokens of text (at most maxTextTokens) and their
// stems. The slices are the extractor's scratch space.
func (x *extractor) words(text string) (toks, stems []string) {
	if len(text) > maxTextBytes {
		text = text[:maxTextBytes]
	}
	x.toks = textnorm.Tokens(x.toks[:0], text)
	if len(x.toks) > maxTextTokens {
		x.toks = x.toks[:maxTextTokens]
	}
	x.stems = x.stems[:0]
	for _, t := range x.toks {
		if x.opts.noStem {
			x.stems = append(x.stems, t)
		} else {
			x.stems = append(x.stems, textnorm.Stem(t))
		}
	}
	return x.toks, x.stems
}

// extract returns the sorted feature hashes of text, repeated as often as
// they occur. The slice is the extractor's scratch space.
func (x *extractor) extract(text string) []uint64 {
	toks, stems := x.words(text)
	hs := x.hashes[:0]
	for _, s := range stems {
		hs = append(hs, withKind(fnvString(fnvOffset, s), kindWord))
	}
	if !x.opts.noBigrams && len(stems) > 0 {
		// Sentence boundaries count as words, so "what" at the start of
		// a question is a feature of its own.
		prev := fnvString(fnvOffset, "^")
		for _, s := range stems {
			h := fnvString(fnvByte(prev, ' '), s)
			hs = append(hs, withKind(h, kindBigram))
			prev = fnvString(fnvOffset, s)
		}
		hs = append(hs, withKind(fnvString(fnvByte(prev, ' '), "$"), kindBigram))
	}
	if !x.opts.noChars {
		lo, hi := x.opts.charRange()
		for _, t := range toks {
			hs = x.charGrams(hs, t, lo, hi)
		}
	}
	x.hashes = hs
	slices.Sort(hs)
	return hs
}

// charGrams appends the character n-grams (lo ≤ n ≤ hi runes) of word
// framed by boundary marks, "<word>".
func (x *extractor) charGrams(hs []uint64, word string, lo, hi int) []uint64 {
	// Offsets of each rune of "<" + word + ">", with the marks as virtual
	// positions -1 and len(word).
	x.runes = x.runes[:0]
	x.runes = append(x.runes, -1)
	for i := range word {
		if len(x.runes) > maxGramRunes {
			word = word[:i]
			break
		}
		x.runes = append(x.runes, i)
	}
	x.runes = append(x.runes, len(word))
	n := len(x.runes)
	for start := 0; start < n; start++ {
		h := uint64(fnvOffset)
		for k := 0; k < hi && start+k < n; k++ {
			h = x.hashRune(h, word, start+k)
			if k+1 >= lo {
				hs = append(hs, withKind(h, kindChar))
			}
		}
	}
	return hs
}

// hashRune folds the i-th position of the framed word into h.
func (x *extractor) hashRune(h uint64, word string, i int) uint64 {
	off := x.runes[i]
	switch {
	case off < 0:
		return fnvByte(h, '<')
	case off >= len(word):
		return fnvByte(h, '>')
	}
	_, size := utf8.DecodeRuneInString(word[off:])
	return fnvString(h, word[off:off+size])
}
