package textnorm

import (
	"unicode"
	"unicode/utf8"
)

// SplitIdentifier appends to dst the folded parts of each token of s that
// splits at camelCase or letter/digit boundaries, and returns the extended
// slice. Tokens that do not split add nothing: callers index the whole
// tokens from [Tokens] and add these parts.
//
// "ChatOCR" gives "chat", "ocr"; "OCRTool" gives "ocr", "tool"; "AI2sql"
// gives "ai", "2", "sql"; "snake_case" and "kebab-case" already split in
// [Tokens] and add nothing here.
func SplitIdentifier(dst []string, s string) []string {
	var raw [16]string
	for _, tok := range RawTokens(raw[:0], s) {
		start := len(dst)
		dst = splitCamel(dst, tok)
		if len(dst)-start == 1 {
			dst = dst[:start] // did not split
		}
	}
	return dst
}

type runeClass uint8

const (
	classOther runeClass = iota // letters without case, marks
	classLower
	classUpper
	classDigit
)

func classify(r rune) runeClass {
	switch {
	case 'a' <= r && r <= 'z':
		return classLower
	case 'A' <= r && r <= 'Z':
		return classUpper
	case '0' <= r && r <= '9':
		return classDigit
	case r < utf8.RuneSelf:
		return classOther
	case unicode.IsUpper(r) || unicode.IsTitle(r):
		return classUpper
	case unicode.IsLower(r):
		return classLower
	case unicode.IsDigit(r):
		return classDigit
	}
	return classOther
}

// splitCamel appends the folded camelCase/digit parts of one raw token.
func splitCamel(dst []string, tok string) []string {
	start := 0
	var prev, cur runeClass
	prevPos := -1
	for i, r := range tok {
		cur = classify(r)
		if prevPos >= 0 {
			split := false
			switch {
			case (prev == classDigit) != (cur == classDigit) && cur != classOther && prev != classOther:
				split = true
			case prev == classLower && cur == classUpper:
				split = true
			case prev == classUpper && cur == classUpper:
				// "OCRTool": split before the T, the upper-case letter that
				// starts a capitalised word.
				next, _ := utf8.DecodeRuneInString(tok[i+utf8.RuneLen(r):])
				if i+utf8.RuneLen(r) < len(tok) && classify(next) == classLower {
					split = true
				}
			}
			if split && i > start {
				dst = append(dst, FoldString(tok[start:i]))
				start = i
			}
		}
		prev, prevPos = cur, i
	}
	if start < len(tok) {
		dst = append(dst, FoldString(tok[start:]))
	}
	return dst
}

// maxSegmentLen bounds the words [Segment] considers; longer runs are rare
// in names and the search is quadratic in the length.
const maxSegmentLen = 40

// minKnownPiece is the shortest vocabulary word [Segment] uses as a piece:
// two-letter "words" cut names into noise.
const minKnownPiece = 3

// Segment splits a concatenated lower-case word such as "airqualityforecast"
// into the words of a vocabulary: known reports whether a piece is a word.
// It appends the pieces to dst and returns the extended slice, or returns
// dst unchanged when the word is itself known, is not lower-case ASCII
// letters, is longer than 40 letters, or no segmentation with at least one
// known piece of three letters or more exists.
//
// Among all segmentations it picks the one with the fewest letters outside
// known words, then the fewest pieces; letters outside known words stay
// together as one piece ("stellarexplorer" with only "explorer" known gives
// "stellar", "explorer").
func Segment(dst []string, word string, known func(string) bool) []string {
	n := len(word)
	if n < 2*minKnownPiece || n > maxSegmentLen || known(word) {
		return dst
	}
	for i := 0; i < n; i++ {
		if c := word[i]; c < 'a' || c > 'z' {
			return dst
		}
	}
	// best[i] is the cost of the best segmentation of word[:i]; cost =
	// unknown letters * (maxSegmentLen+1) + pieces, so fewer unknown letters
	// always wins and the piece count breaks ties.
	const unknownWeight = maxSegmentLen + 1
	var best [maxSegmentLen + 1]int
	var from [maxSegmentLen + 1]int8
	var isKnown [maxSegmentLen + 1]bool
	for i := 1; i <= n; i++ {
		best[i] = 1 << 30
		for j := 0; j < i; j++ {
			piece := word[j:i]
			k := len(piece) >= minKnownPiece && known(piece)
			cost := best[j] + 1
			if !k {
				// Merge with a preceding unknown piece rather than
				// starting a new one: unknown letters stay together.
				cost = best[j] + 1 + unknownWeight*len(piece)
				if j > 0 && !isKnown[j] {
					cost--
				}
			}
			if cost < best[i] {
				best[i], from[i], isKnown[i] = cost, int8(j), k
			}
		}
	}
	// Walk back, merging adjacent unknown pieces.
	var cuts [maxSegmentLen + 1]int
	var kinds [maxSegmentLen + 1]bool
	m := 0
	for i := n; i > 0; i = int(from[i]) {
		if m > 0 && !isKnown[i] && !kinds[m-1] {
			cuts[m-1] = int(from[i]) // extend the later unknown piece leftwards
			continue
		}
		cuts[m], kinds[m] = int(from[i]), isKnown[i]
		m++
	}
	if m < 2 {
		return dst
	}
	longKnown := false
	for i := 0; i < m; i++ {
		if kinds[i] {
			longKnown = true
		}
	}
	if !longKnown {
		return dst
	}
	end := n
	start := len(dst)
	for i := 0; i < m; i++ {
		dst = append(dst, word[cuts[i]:end])
		end = cuts[i]
	}
	// Pieces were appended last to first.
	for i, j := start, len(dst)-1; i < j; i, j = i+1, j-1 {
		dst[i], dst[j] = dst[j], dst[i]
	}
	return dst
}
