package textnorm

// Stem returns the Porter2 ("Snowball English") stem of a folded token, so
// that inflections and derivations share one term: "budgets", "budgeting"
// and "budgeted" all give "budget"; "translation", "translator" and
// "translate" give "translat".
//
// Stemming applies to words of lower-case ASCII letters only; any other
// token (digits, other scripts, accents) is returned unchanged, as are words
// of one or two letters. The result is never empty for a non-empty input.
// Stem allocates only when the stem differs from word.
func Stem(word string) string {
	if len(word) <= 2 {
		return word
	}
	for i := 0; i < len(word); i++ {
		if c := word[i]; c < 'a' || c > 'z' {
			return word
		}
	}
	if s, ok := stemException(word); ok {
		return s
	}
	var buf [64]byte
	var b []byte
	if len(word) <= len(buf) {
		b = append(buf[:0], word...)
	} else {
		b = []byte(word)
	}
	b = porter2(b)
	if string(b) == word {
		return word
	}
	return string(b)
}

// stemException covers the special words of the Porter2 definition.
func stemException(w string) (string, bool) {
	switch w {
	case "skis":
		return "ski", true
	case "skies":
		return "sky", true
	case "dying":
		return "die", true
	case "lying":
		return "lie", true
	case "tying":
		return "tie", true
	case "idly":
		return "idl", true
	case "gently":
		return "gentl", true
	case "ugly":
		return "ugli", true
	case "early":
		return "earli", true
	case "only":
		return "onli", true
	case "singly":
		return "singl", true
	case "sky", "news", "howe", "atlas", "cosmos", "bias", "andes":
		return w, true
	}
	return "", false
}

func isVowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

// stemmer holds a word being stemmed and its regions.
type stemmer struct {
	b      []byte
	r1, r2 int
}

func (s *stemmer) has(suffix string) bool {
	n := len(s.b) - len(suffix)
	return n >= 0 && string(s.b[n:]) == suffix
}

// replace swaps a suffix known to be present for repl.
func (s *stemmer) replace(suffix, repl string) {
	s.b = append(s.b[:len(s.b)-len(suffix)], repl...)
}

// inR1 / inR2 report whether a present suffix lies in the region.
func (s *stemmer) inR1(suffix string) bool { return len(s.b)-len(suffix) >= s.r1 }
func (s *stemmer) inR2(suffix string) bool { return len(s.b)-len(suffix) >= s.r2 }

// longest returns the longest suffix of a table that ends the word, or "".
func (s *stemmer) longest(table *suffixTable) string {
	c := s.b[len(s.b)-1]
	if c < 'a' || c > 'z' {
		return ""
	}
	best := ""
	for _, x := range table[c-'a'] {
		if len(x) > len(best) && s.has(x) {
			best = x
		}
	}
	return best
}

// suffixTable lists suffixes by their last letter.
type suffixTable [26][]string

func newSuffixTable(suffixes ...string) *suffixTable {
	var t suffixTable
	for _, x := range suffixes {
		c := x[len(x)-1] - 'a'
		t[c] = append(t[c], x)
	}
	return &t
}

func (s *stemmer) vowel(i int) bool { return s.b[i] != 'Y' && isVowel(s.b[i]) }

// shortSyllableAt reports whether the word's last syllable, ending at index
// end (exclusive), is short.
func (s *stemmer) shortSyllableEndingAt(end int) bool {
	switch {
	case end == 2:
		return s.vowel(0) && !s.vowel(1)
	case end >= 3:
		c := s.b[end-1]
		return !s.vowel(end-3) && s.vowel(end-2) && !s.vowel(end-1) &&
			c != 'w' && c != 'x' && c != 'Y'
	}
	return false
}

func (s *stemmer) isShort() bool {
	return s.r1 >= len(s.b) && s.shortSyllableEndingAt(len(s.b))
}

// region returns the start of the region after the first non-vowel that
// follows a vowel, searching from start.
func (s *stemmer) region(start int) int {
	for i := start + 1; i < len(s.b); i++ {
		if !s.vowel(i) && s.vowel(i-1) {
			return i + 1
		}
	}
	return len(s.b)
}

// The suffixes of each step, by last letter. They are never modified.
var (
	step1bSuffixes = newSuffixTable("eed", "eedly", "ed", "edly", "ing", "ingly")
	step2Suffixes  = newSuffixTable(
		"tional", "enci", "anci", "abli", "entli", "izer", "ization", "ational",
		"ation", "ator", "alism", "aliti", "alli", "fulness", "ousli", "ousness",
		"iveness", "iviti", "biliti", "bli", "ogi", "fulli", "lessli", "li",
	)
	step3Suffixes = newSuffixTable("tional", "ational", "alize", "icate", "iciti", "ical", "ful", "ness", "ative")
	step4Suffixes = newSuffixTable(
		"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment",
		"ent", "ism", "ate", "iti", "ous", "ive", "ize", "ion",
	)
)

func porter2(b []byte) []byte {
	s := stemmer{b: b}
	if s.b[0] == 'y' {
		s.b[0] = 'Y'
	}
	for i := 1; i < len(s.b); i++ {
		if s.b[i] == 'y' && isVowel(s.b[i-1]) {
			s.b[i] = 'Y'
		}
	}
	s.r1 = s.region(0)
	switch {
	case len(s.b) >= 5 && (string(s.b[:5]) == "gener" || string(s.b[:5]) == "arsen"):
		s.r1 = 5
	case len(s.b) >= 6 && string(s.b[:6]) == "commun":
		s.r1 = 6
	}
	s.r2 = s.region(s.r1)
	if s.r2 < s.r1 {
		s.r2 = s.r1
	}

	s.step1a()
	switch string(s.b) {
	case "inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed":
		return restoreY(s.b)
	}
	s.step1b()
	s.step1c()
	s.step2()
	s.step3()
	s.step4()
	s.step5()
	return restoreY(s.b)
}

func restoreY(b []byte) []byte {
	for i, c := range b {
		if c == 'Y' {
			b[i] = 'y'
		}
	}
	return b
}

func (s *stemmer) step1a() {
	switch {
	case s.has("sses"):
		s.replace("sses", "ss")
	case s.has("ied"), s.has("ies"):
		if len(s.b) > 4 {
			s.replace("ies", "i") // "ied" has the same length
		} else {
			s.replace("ies", "ie")
		}
	case s.has("us"), s.has("ss"):
	case s.has("s"):
		// Delete if the part before the s contains a vowel not
		// immediately before it.
		for i := 0; i < len(s.b)-2; i++ {
			if s.vowel(i) {
				s.b = s.b[:len(s.b)-1]
				break
			}
		}
	}
}

func (s *stemmer) step1b() {
	x := s.longest(step1bSuffixes)
	switch x {
	case "":
		return
	case "eed", "eedly":
		if s.inR1(x) {
			s.replace(x, "ee")
		}
		return
	}
	stem := len(s.b) - len(x)
	hasVowel := false
	for i := 0; i < stem; i++ {
		if s.vowel(i) {
			hasVowel = true
			break
		}
	}
	if !hasVowel {
		return
	}
	s.b = s.b[:stem]
	switch {
	case s.has("at"), s.has("bl"), s.has("iz"):
		s.b = append(s.b, 'e')
	case s.endsDouble():
		s.b = s.b[:len(s.b)-1]
	case s.isShort():
		s.b = append(s.b, 'e')
	}
}

func (s *stemmer) endsDouble() bool {
	n := len(s.b)
	if n < 2 || s.b[n-1] != s.b[n-2] {
		return false
	}
	switch s.b[n-1] {
	case 'b', 'd', 'f', 'g', 'm', 'n', 'p', 'r', 't':
		return true
	}
	return false
}

func (s *stemmer) step1c() {
	n := len(s.b)
	if n > 2 && (s.b[n-1] == 'y' || s.b[n-1] == 'Y') && !s.vowel(n-2) {
		s.b[n-1] = 'i'
	}
}

func (s *stemmer) step2() {
	x := s.longest(step2Suffixes)
	if x == "" || !s.inR1(x) {
		return
	}
	switch x {
	case "tional":
		s.replace(x, "tion")
	case "enci":
		s.replace(x, "ence")
	case "anci":
		s.replace(x, "ance")
	case "abli":
		s.replace(x, "able")
	case "entli":
		s.replace(x, "ent")
	case "izer", "ization":
		s.replace(x, "ize")
	case "ational", "ation", "ator":
		s.replace(x, "ate")
	case "alism", "aliti", "alli":
		s.replace(x, "al")
	case "fulness":
		s.replace(x, "ful")
	case "ousli", "ousness":
		s.replace(x, "ous")
	case "iveness", "iviti":
		s.replace(x, "ive")
	case "biliti", "bli":
		s.replace(x, "ble")
	case "ogi":
		if n := len(s.b) - 3; n > 0 && s.b[n-1] == 'l' {
			s.replace(x, "og")
		}
	case "fulli":
		s.replace(x, "ful")
	case "lessli":
		s.replace(x, "less")
	case "li":
		if n := len(s.b) - 2; n > 0 {
			switch s.b[n-1] {
			case 'c', 'd', 'e', 'g', 'h', 'k', 'm', 'n', 'r', 't':
				s.b = s.b[:n]
			}
		}
	}
}

func (s *stemmer) step3() {
	x := s.longest(step3Suffixes)
	if x == "" || !s.inR1(x) {
		return
	}
	switch x {
	case "tional":
		s.replace(x, "tion")
	case "ational":
		s.replace(x, "ate")
	case "alize":
		s.replace(x, "al")
	case "icate", "iciti", "ical":
		s.replace(x, "ic")
	case "ful", "ness":
		s.replace(x, "")
	case "ative":
		if s.inR2(x) {
			s.replace(x, "")
		}
	}
}

func (s *stemmer) step4() {
	x := s.longest(step4Suffixes)
	if x == "" || !s.inR2(x) {
		return
	}
	if x == "ion" {
		if n := len(s.b) - 3; n > 0 && (s.b[n-1] == 's' || s.b[n-1] == 't') {
			s.replace(x, "")
		}
		return
	}
	s.replace(x, "")
}

func (s *stemmer) step5() {
	n := len(s.b)
	switch {
	case s.has("e"):
		if s.inR2("e") || s.inR1("e") && !s.shortSyllableEndingAt(n-1) {
			s.b = s.b[:n-1]
		}
	case s.has("l"):
		if s.inR2("l") && n >= 2 && s.b[n-2] == 'l' {
			s.b = s.b[:n-1]
		}
	}
}
