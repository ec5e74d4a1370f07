package routing

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/agentmesh/agentmesh/registry"
)

func TestClarificationQuestion(t *testing.T) {
	withCtx := registry.Agent{
		Name:                 "hr",
		DisplayName:          "HR Assistant",
		Description:          "Leave, payroll and benefits.",
		ClarificationContext: "Is this about leave, payroll or benefits?",
	}
	noCtx := registry.Agent{
		Name:        "finance",
		DisplayName: "Finance Agent",
		Description: "Budgets and cost centers. Also invoices and expense reports.",
	}
	tests := []struct {
		name  string
		agent registry.Agent
		lang  string
		want  string
	}{
		{"context in English", withCtx, "en",
			"Could you tell me a bit more about what you need? Is this about leave, payroll or benefits?"},
		{"context in Spanish", withCtx, "es",
			"¿Podría darme más detalles sobre lo que necesita? Is this about leave, payroll or benefits?"},
		{"display name and first sentence", noCtx, "en",
			"Is your request about Finance Agent (Budgets and cost centers)? Could you tell me a bit more about what you need?"},
		{"French", noCtx, "fr",
			"Votre demande concerne-t-elle Finance Agent (Budgets and cost centers) ? Pourriez-vous m'en dire un peu plus sur ce dont vous avez besoin ?"},
		{"German", noCtx, "de", "Geht es bei Ihrer Anfrage um Finance Agent (Budgets and cost centers)?"},
		{"Portuguese region tag", noCtx, "pt-BR", "Sua solicitação é sobre Finance Agent"},
		{"upper case code", noCtx, "ES", "¿Su solicitud es sobre Finance Agent"},
		{"Japanese", noCtx, "ja", "Finance Agent (Budgets and cost centers)に関するご依頼でしょうか？"},
		{"untranslated language falls back to English", noCtx, "sw", "Is your request about Finance Agent"},
		{"empty language is English", noCtx, "", "Is your request about Finance Agent"},
		{"name when no display name", registry.Agent{Name: "legal"}, "en",
			"Is your request about legal? Could you tell me a bit more about what you need?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Contains(t, ClarificationQuestion(tc.agent, tc.lang), tc.want)
		})
	}
}

func TestClarificationLanguages(t *testing.T) {
	langs := ClarificationLanguages()
	// Every language the lexical classifier detects has a translation.
	for _, l := range []string{"en", "es", "fr", "de", "it", "pt", "nl", "ja", "zh", "ko", "ru", "ar", "hi", "th", "el", "he"} {
		assert.Contains(t, langs, l)
	}
	for _, l := range langs {
		tx := clarifyTexts[l]
		assert.Equal(t, 1, strings.Count(tx.about, "%s"), l)
		assert.NotContains(t, tx.ask, "%", l)
	}
}

func TestClarificationQuestionBoundsDescription(t *testing.T) {
	a := registry.Agent{Name: "x", Description: strings.Repeat("word ", 1000)}
	q := ClarificationQuestion(a, "en")
	assert.Less(t, utf8.RuneCountInString(q), maxDescriptionRunes+120)
	assert.Contains(t, q, "…")
}

func TestBaseLanguage(t *testing.T) {
	for in, want := range map[string]string{"en": "en", "pt-BR": "pt", "ZH_hant": "zh", " fr ": "fr", "": ""} {
		assert.Equal(t, want, baseLanguage(in), in)
	}
}
