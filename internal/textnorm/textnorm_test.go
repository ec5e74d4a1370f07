package textnorm_test

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/agentmesh/agentmesh/internal/textnorm"
)

func TestTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  \t\n", nil},
		{"cost_center", []string{"cost", "center"}},
		{"code-review", []string{"code", "review"}},
		{"Hello, World!", []string{"hello", "world"}},
		{"2-day forecast", []string{"2", "day", "forecast"}},
		{"web3 mp3", []string{"web3", "mp3"}},
		{"don't", []string{"don", "t"}},
		{"ÉCOLE Straße", []string{"école", "straße"}},
		{"ΣΊΣΥΦΟΣ", []string{"σίσυφοσ"}},              // final sigma folds to σ
		{"\u212a", []string{"k"}},                     // Kelvin sign
		{"cafe\u0301 x", []string{"cafe\u0301", "x"}}, // combining mark stays in the word
		{"\u0301abc", []string{"abc"}},                // but does not start one
		{"हिन्दी भाषा", []string{"हिन्दी", "भाषा"}},
		{"東京 tokyo", []string{"東京", "tokyo"}},
		{"a\xffb", []string{"a", "b"}}, // invalid UTF-8 separates
		{"x\uFFFDy", []string{"x", "y"}},
		{"emoji🙂here", []string{"emoji", "here"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, textnorm.Tokens(nil, tt.in), "%q", tt.in)
	}
	// Tokens appends.
	assert.Equal(t, []string{"x", "a", "b"}, textnorm.Tokens([]string{"x"}, "a b"))
}

func TestStem(t *testing.T) {
	tests := map[string]string{
		// Porter2 reference outputs.
		"consign": "consign", "consigned": "consign", "consigning": "consign", "consignment": "consign",
		"consist": "consist", "consistency": "consist", "consistently": "consist",
		"knackered": "knacker", "generously": "generous", "generate": "generat", "generation": "generat",
		"abilities": "abil", "ability": "abil", "able": "abl", "above": "abov", "absolutely": "absolut",
		"abstraction": "abstract", "accumulation": "accumul", "accurately": "accur", "achieved": "achiev",
		"actually": "actual", "agreed": "agre", "happily": "happili", "happy": "happi", "cried": "cri",
		"ties": "tie", "gas": "gas", "gaps": "gap", "kiwis": "kiwi", "caresses": "caress", "ponies": "poni",
		"hopping": "hop", "filing": "file", "failing": "fail", "fizzed": "fizz", "sized": "size",
		"relational": "relat", "conditional": "condit", "rational": "ration", "digitizer": "digit",
		"operator": "oper", "hopefulness": "hope", "electrical": "electr", "adoption": "adopt",
		"communication": "communic", "university": "univers", "effective": "effect", "cry": "cri",
		// Exceptions.
		"skies": "sky", "dying": "die", "news": "news", "only": "onli", "early": "earli", "sky": "sky",
		// What discovery relies on.
		"budget": "budget", "budgets": "budget", "budgeting": "budget", "budgeted": "budget",
		"translation": "translat", "translator": "translat", "translate": "translat",
		"summarize": "summar", "summarizing": "summar", "recommendations": "recommend",
		// Left alone.
		"by": "by", "a": "a", "": "", "mp3": "mp3", "école": "école", "2023": "2023", "straße": "straße",
	}
	for in, want := range tests {
		assert.Equal(t, want, textnorm.Stem(in), "Stem(%q)", in)
	}
}

func TestIsStopWord(t *testing.T) {
	for _, w := range []string{"the", "a", "and", "please", "help", "want", "looking", "don", "t", "isn", "hey"} {
		assert.True(t, textnorm.IsStopWord(w), w)
	}
	for _, w := range []string{"weather", "budget", "search", "won", "The", "", "stock"} {
		assert.False(t, textnorm.IsStopWord(w), w)
	}
}

func TestSplitIdentifier(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"ChatOCR", []string{"chat", "ocr"}},
		{"OCRTool", []string{"ocr", "tool"}},
		{"AI2sql", []string{"ai", "2", "sql"}},
		{"SummarizeAnything_pr", []string{"summarize", "anything"}},
		{"PDF&URLTool", []string{"url", "tool"}},
		{"camelCaseName", []string{"camel", "case", "name"}},
		{"HTTPServer2Go", []string{"http", "server", "2", "go"}},
		{"snake_case kebab-case", nil}, // already split by Tokens
		{"lower", nil},
		{"ÉcoleNormale", []string{"école", "normale"}},
		{"", nil},
	}
	for _, tt := range tests {
		got := textnorm.SplitIdentifier(nil, tt.in)
		if tt.want == nil {
			assert.Empty(t, got, "%q", tt.in)
			continue
		}
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
}

func TestSegment(t *testing.T) {
	vocab := func(words ...string) func(string) bool {
		return func(s string) bool { return slices.Contains(words, s) }
	}
	known := vocab("air", "quality", "forecast", "explorer", "time", "port", "search", "engine", "copy", "writer")
	tests := []struct {
		in   string
		want []string
	}{
		{"airqualityforecast", []string{"air", "quality", "forecast"}},
		{"stellarexplorer", []string{"stellar", "explorer"}}, // unknown letters stay together
		{"timeport", []string{"time", "port"}},
		{"searchengine", []string{"search", "engine"}},
		{"copywriter", []string{"copy", "writer"}},
		{"forecast", nil},                // a known word is not split
		{"mbti", nil},                    // too short
		{"xyzxyzxyz", nil},               // nothing known
		{"Airquality", nil},              // not lower-case ASCII
		{"air_quality", nil},             // not one word
		{strings.Repeat("air", 20), nil}, // too long
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, textnorm.Segment(nil, tt.in, known), "%q", tt.in)
	}
}

// FuzzTokenize checks the tokenizer, the stemmer and identifier splitting on
// arbitrary input: no panic, and tokens are non-empty, case-folded runs of
// letters, digits and marks that start with a letter or digit.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"cost_center code-review", "ΣΊΣΥΦΟΣ Straße \u212a", "a\xffb", "AI2sql ChatOCR",
		"हिन्दी", "cafe\u0301", "budgets budgeting", "\u0301\u0301", "ǅungla ǈ", "İstanbul ı"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := textnorm.Tokens(nil, s)
		for _, tok := range toks {
			checkToken(t, tok)
			if got := textnorm.Tokens(nil, tok); len(got) != 1 || got[0] != tok {
				t.Fatalf("token %q re-tokenizes to %q", tok, got)
			}
			st := textnorm.Stem(tok)
			if st == "" || !utf8.ValidString(st) {
				t.Fatalf("Stem(%q) = %q", tok, st)
			}
			if textnorm.Stem(tok) != st {
				t.Fatalf("Stem(%q) is not deterministic", tok)
			}
			_ = textnorm.IsStopWord(tok)
			_ = textnorm.Segment(nil, tok, func(p string) bool { return len(p)%2 == 0 })
		}
		for _, p := range textnorm.SplitIdentifier(nil, s) {
			checkToken(t, p)
		}
	})
}

func checkToken(t *testing.T, tok string) {
	t.Helper()
	if tok == "" || !utf8.ValidString(tok) {
		t.Fatalf("bad token %q", tok)
	}
	for i, r := range tok {
		if i == 0 && !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			t.Fatalf("token %q starts with %q", tok, r)
		}
		if !textnorm.IsTokenRune(r) {
			t.Fatalf("token %q has %q", tok, r)
		}
		if textnorm.Fold(r) != r {
			t.Fatalf("token %q is not folded at %q", tok, r)
		}
	}
}
