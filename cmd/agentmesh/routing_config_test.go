package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRoutingConfigCheck(t *testing.T) {
	ok := routingConfig{classifier: "lexical", sessionTTL: 30 * time.Minute, sessionMaxTurns: 100, clarification: true}
	assert.NoError(t, ok.check())
	llm := ok
	llm.classifier = "llm"
	assert.ErrorContains(t, llm.check(), "--llm-base-url")
	llm.llmBaseURL, llm.llmModel = "http://127.0.0.1:11434/v1", "m"
	assert.NoError(t, llm.check())
	bad := ok
	bad.classifier = "bayes"
	assert.ErrorContains(t, bad.check(), "--classifier")
	bad = ok
	bad.sessionTTL = -time.Second
	assert.ErrorContains(t, bad.check(), "--session-ttl")
}
