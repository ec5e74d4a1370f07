package delegation

import (
	"errors"
	"regexp"
	"strings"

	"github.com/agentmesh/agentmesh/registry"
)

// redactedText replaces a secret in the text of an agent's failure.
const redactedText = "[redacted]"

// credentialPattern finds credentials an agent's error body may echo: the
// value after "Bearer"/"Basic", and after a key named like a secret
// (token, api key, secret, password, authorization) followed by : or =.
var credentialPattern = regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}|((?:token|api[_-]?key|secret|password|authorization)["']?\s*[:=]\s*["']?(?:(?:bearer|basic)\s+)?)[^\s"',;}&]{4,}`)

// maskSecrets returns text with the agent's own credential and anything
// that looks like a credential replaced by [redacted]: the head of an
// agent's error reply is stored on the record and shown to every reader,
// and an agent that echoes its request headers would expose its token.
func maskSecrets(text, secret string) string {
	if secret != "" {
		text = strings.ReplaceAll(text, secret, redactedText)
	}
	return credentialPattern.ReplaceAllStringFunc(text, func(m string) string {
		sub := credentialPattern.FindStringSubmatch(m)
		return sub[1] + sub[2] + redactedText
	})
}

// maskAgentSecrets masks the message of a transport failure of a (see
// maskSecrets) before anything records or logs it.
func maskAgentSecrets(err error, a registry.Agent) error {
	var te *TransportError
	if err == nil || !errors.As(err, &te) {
		return err
	}
	var secret string
	if a.Auth != nil {
		secret = a.Auth.Token
	}
	te.Message = maskSecrets(te.Message, secret)
	return err
}
