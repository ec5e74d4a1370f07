package routing

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/registry"
)

// clarifyText is one language's wording of the clarification question.
type clarifyText struct {
	// ask asks for more detail; it is the whole question when the agent
	// has a clarificationContext, which follows it.
	ask string
	// about asks whether the request concerns the agent; %s is replaced
	// by the agent's display name (and a short description).
	about string
}

// clarifyTexts are the question's translations, by ISO 639-1 code: the
// languages the lexical classifier detects. Others get English.
var clarifyTexts = map[string]clarifyText{
	"en": {"Could you tell me a bit more about what you need?", "Is your request about %s?"},
	"es": {"¿Podría darme más detalles sobre lo que necesita?", "¿Su solicitud es sobre %s?"},
	"fr": {"Pourriez-vous m'en dire un peu plus sur ce dont vous avez besoin ?", "Votre demande concerne-t-elle %s ?"},
	"de": {"Könnten Sie mir etwas genauer sagen, was Sie brauchen?", "Geht es bei Ihrer Anfrage um %s?"},
	"it": {"Potrebbe dirmi qualcosa in più su ciò di cui ha bisogno?", "La sua richiesta riguarda %s?"},
	"pt": {"Poderia me dar mais detalhes sobre o que você precisa?", "Sua solicitação é sobre %s?"},
	"nl": {"Kunt u iets meer vertellen over wat u nodig heeft?", "Gaat uw vraag over %s?"},
	"ja": {"ご用件についてもう少し詳しく教えていただけますか？", "%sに関するご依頼でしょうか？"},
	"zh": {"您能再详细说明一下您的需求吗？", "您的请求是关于%s的吗？"},
	"ko": {"필요하신 내용을 조금 더 자세히 말씀해 주시겠어요?", "%s에 관한 요청이신가요?"},
	"ru": {"Не могли бы вы подробнее рассказать, что вам нужно?", "Ваш запрос касается темы «%s»?"},
	"ar": {"هل يمكنك توضيح ما تحتاجه بمزيد من التفاصيل؟", "هل طلبك متعلق بـ %s؟"},
	"hi": {"क्या आप थोड़ा और बता सकते हैं कि आपको क्या चाहिए?", "क्या आपका अनुरोध %s के बारे में है?"},
	"th": {"ช่วยบอกรายละเอียดเพิ่มเติมเกี่ยวกับสิ่งที่คุณต้องการได้ไหม", "คำขอของคุณเกี่ยวกับ %s ใช่ไหม"},
	"el": {"Θα μπορούσατε να μου πείτε λίγο περισσότερα για το τι χρειάζεστε;", "Το αίτημά σας αφορά %s;"},
	"he": {"תוכל לספר לי קצת יותר על מה שאתה צריך?", "האם הבקשה שלך קשורה ל-%s?"},
}

// ClarificationLanguages returns the ISO 639-1 codes the clarification
// question is translated into.
func ClarificationLanguages() []string {
	out := make([]string, 0, len(clarifyTexts))
	for code := range clarifyTexts {
		out = append(out, code)
	}
	return out
}

// maxDescriptionRunes bounds the part of an agent's description quoted in
// a clarification question.
const maxDescriptionRunes = 160

// ClarificationQuestion builds the clarification question
// (docs/API.md#clarification) about agent in language lang (an ISO 639-1
// code or a BCP 47 tag such as "pt-BR"; case does not matter): the agent's
// clarificationContext after a request for more detail when it has one,
// else a question naming its display name and the first sentence of its
// description. A language without a translation gets English. The question
// never contains the user's input.
func ClarificationQuestion(agent registry.Agent, lang string) string {
	t, ok := clarifyTexts[baseLanguage(lang)]
	if !ok {
		t = clarifyTexts["en"]
	}
	if ctx := strings.TrimSpace(agent.ClarificationContext); ctx != "" {
		return t.ask + " " + ctx
	}
	topic := strings.TrimSpace(agent.DisplayName)
	if topic == "" {
		topic = agent.Name
	}
	if d := firstSentence(agent.Description, maxDescriptionRunes); d != "" {
		topic += " (" + d + ")"
	}
	return strings.Replace(t.about, "%s", topic, 1) + " " + t.ask
}

// baseLanguage returns the lower-case primary subtag of a language tag:
// "pt-BR" and "PT_br" give "pt".
func baseLanguage(tag string) string {
	tag = strings.TrimSpace(tag)
	if i := strings.IndexAny(tag, "-_"); i >= 0 {
		tag = tag[:i]
	}
	return strings.ToLower(tag)
}

// firstSentence returns the first sentence of s, without its final
// punctuation, cut to at most n runes (at a word boundary, with an
// ellipsis, when cut).
func firstSentence(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	for i, r := range s {
		if (r == '.' || r == '!' || r == '?' || r == '。' || r == '！' || r == '？') &&
			(i+utf8.RuneLen(r) == len(s) || s[i+utf8.RuneLen(r)] == ' ' || r >= utf8.RuneSelf) {
			s = s[:i]
			break
		}
	}
	s = strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut, count := len(s), 0
	for i := range s {
		if count == n {
			cut = i
			break
		}
		count++
	}
	s = s[:cut]
	if j := strings.LastIndexByte(s, ' '); j > n/2 {
		s = s[:j]
	}
	return strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) }) + "…"
}
