package delegation

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMaskSecrets(t *testing.T) {
	for in, want := range map[string]string{
		"agent returned 401: bad header Authorization: Bearer s3cr3t-agent-token": "agent returned 401: bad header Authorization: Bearer [redacted]",
		`agent returned 500: {"token": "abcd1234efgh"}`:                           `agent returned 500: {"token": "[redacted]"}`,
		"agent returned 400: api_key=ZZZZ-9999 missing scope":                     "agent returned 400: api_key=[redacted] missing scope",
		"agent returned 403: my-own-secret-value was refused":                     "agent returned 403: [redacted] was refused",
		"agent returned 503: try again later":                                     "agent returned 503: try again later",
		"agent returned 500: password: hunter22":                                  "agent returned 500: password: [redacted]",
	} {
		assert.Equal(t, want, maskSecrets(in, "my-own-secret-value"), in)
	}
	assert.Equal(t, "nothing here", maskSecrets("nothing here", ""))
}
