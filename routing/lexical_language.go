package routing

import (
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/internal/textnorm"
)

// maxLanguageRunes bounds the text looked at by detectLanguage.
const maxLanguageRunes = 1000

// detectLanguage guesses the ISO 639-1 code of text: from the script of its
// letters, and for Latin script from common function words of English,
// Spanish, French, German, Italian, Portuguese and Dutch. It returns "en"
// when unsure. It is a heuristic for choosing the language of a
// clarification question, not a language identifier.
func detectLanguage(text string) string {
	var kana, han, hangul, cyrillic, arabic, devanagari, thai, greek, hebrew, latin int
	n := 0
	for _, r := range text {
		if n++; n > maxLanguageRunes {
			break
		}
		switch {
		case r < utf8.RuneSelf:
			if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
				latin++
			}
		case unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			kana++
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.Is(unicode.Hangul, r):
			hangul++
		case unicode.Is(unicode.Cyrillic, r):
			cyrillic++
		case unicode.Is(unicode.Arabic, r):
			arabic++
		case unicode.Is(unicode.Devanagari, r):
			devanagari++
		case unicode.Is(unicode.Thai, r):
			thai++
		case unicode.Is(unicode.Greek, r):
			greek++
		case unicode.Is(unicode.Hebrew, r):
			hebrew++
		case unicode.Is(unicode.Latin, r):
			latin++
		}
	}
	best, code := latin, "en"
	for _, s := range []struct {
		n    int
		code string
	}{
		{kana + han/2, "ja"}, {han, "zh"}, {hangul, "ko"}, {cyrillic, "ru"}, {arabic, "ar"},
		{devanagari, "hi"}, {thai, "th"}, {greek, "el"}, {hebrew, "he"},
	} {
		if s.n > best && (s.code != "ja" || kana > 0) {
			best, code = s.n, s.code
		}
	}
	if code != "en" || latin == 0 {
		return code
	}
	return latinLanguage(text)
}

// latinWords are frequent words that are distinctive of one language.
var latinWords = map[string]string{
	"the": "en", "is": "en", "and": "en", "what": "en", "my": "en", "you": "en", "how": "en", "can": "en", "please": "en", "i": "en", "to": "en", "of": "en",
	"el": "es", "los": "es", "las": "es", "qué": "es", "cómo": "es", "por": "es", "mi": "es", "es": "es", "y": "es", "una": "es", "necesito": "es", "quiero": "es", "para": "es",
	"le": "fr", "les": "fr", "est": "fr", "et": "fr", "je": "fr", "mon": "fr", "ma": "fr", "pour": "fr", "vous": "fr", "une": "fr", "des": "fr", "pas": "fr", "comment": "fr",
	"der": "de", "die": "de", "das": "de", "und": "de", "ist": "de", "ich": "de", "mein": "de", "nicht": "de", "ein": "de", "eine": "de", "bitte": "de", "wie": "de", "mit": "de",
	"il": "it", "di": "it", "che": "it", "sono": "it", "gli": "it", "della": "it", "mio": "it", "non": "it", "come": "it", "per": "it", "voglio": "it", "grazie": "it",
	"o": "pt", "não": "pt", "meu": "pt", "minha": "pt", "você": "pt", "uma": "pt", "com": "pt", "está": "pt", "obrigado": "pt", "preciso": "pt", "quero": "pt",
	"het": "nl", "een": "nl", "ik": "nl", "niet": "nl", "mijn": "nl", "wat": "nl", "hoe": "nl", "van": "nl", "voor": "nl", "alstublieft": "nl",
}

func latinLanguage(text string) string {
	if len(text) > 4*maxLanguageRunes {
		text = text[:4*maxLanguageRunes]
	}
	votes := map[string]int{}
	var buf [64]string
	for _, t := range textnorm.Tokens(buf[:0], text) {
		if l, ok := latinWords[t]; ok {
			votes[l]++
		}
	}
	best, code := votes["en"], "en"
	for _, l := range []string{"es", "fr", "de", "it", "pt", "nl"} {
		if votes[l] > best {
			best, code = votes[l], l
		}
	}
	return code
}
