package httpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
)

// FuzzDecodeAgent feeds arbitrary bodies to the request decoder with the
// shapes of the API's bodies: it must never panic, and every error must be
// a 400 with a code and a valid UTF-8 message (so it encodes as JSON).
func FuzzDecodeAgent(f *testing.F) {
	for _, seed := range []string{
		`{"name":"finance","description":"d","capabilities":["budget"],"endpoint":"https://x.example.com/task"}`,
		`{"name":"a","auth":{"type":"bearer","token":"t"},"labels":{"k":"v"},"ttlSeconds":60,"resources":[{"uri":"x"}]}`,
		`{"name":"a","capabilitiez":[]}`,
		`{"name":1}`,
		`{"ttlSeconds":1e400}`,
		`[]`, `null`, `""`, `{`, `{}{}`, `{} x`, "\xff", `{"a":"\ud800"}`,
		`{"query":"x","requiredResources":[{"uri":"a"},"b"],"resources":[1]}`,
		`{"targetName":"a","task":"t","context":{"depth":1,"chain":["x"],"n":123456789012345678901234567890}}`,
		strings.Repeat("[", 200),
	} {
		f.Add([]byte(seed), uint8(0))
		f.Add([]byte(seed), uint8(1))
		f.Add([]byte(seed), uint8(2))
	}
	f.Fuzz(func(t *testing.T, body []byte, shape uint8) {
		var dst any
		switch shape % 3 {
		case 0:
			dst = new(registry.Agent)
		case 1:
			dst = new(discoverBody)
		default:
			dst = new(delegateBody)
		}
		e := decodeJSON(body, dst)
		if e == nil {
			return
		}
		if e.status != http.StatusBadRequest || e.code != apierr.CodeInvalidArgument || e.msg == "" {
			t.Fatalf("decode error %+v", e)
		}
		if !utf8.ValidString(e.msg) {
			// encoding/json would replace the bytes: tolerable, but the
			// message should not carry raw input.
			t.Fatalf("message is not valid UTF-8: %q", e.msg)
		}
		if _, err := json.Marshal(ErrorResponse{Error: e.msg, Code: e.code, Details: e.details}); err != nil {
			t.Fatalf("error body does not encode: %v", err)
		}
	})
}

func TestDecodeNamesFields(t *testing.T) {
	var a registry.Agent
	e := decodeJSON([]byte(`{"name":"a","auth":{"type":5}}`), &a)
	require.NotNil(t, e)
	assert.Equal(t, map[string]string{"field": "auth.type"}, e.details)
	assert.Contains(t, e.msg, "must be a string, not number")

	e = decodeJSON([]byte(`{"labels":{"k":1}}`), &a)
	require.NotNil(t, e)
	assert.Equal(t, map[string]string{"field": "labels"}, e.details)

	var d discoverBody
	e = decodeJSON([]byte(`{"query":"x","resources":[{"uri":""}]}`), &d)
	require.NotNil(t, e)
	assert.Equal(t, map[string]string{"field": "resources[0].uri"}, e.details)

	e = decodeJSON([]byte(strings.Repeat("[", 20000)), &d)
	require.NotNil(t, e)
	assert.Equal(t, apierr.CodeInvalidArgument, e.code)
}

func TestLimitersStayBounded(t *testing.T) {
	l := newLimiters(RateLimit{Requests: 2, Per: time.Minute}, 100)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10_000 {
		l.take(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now)
	}
	assert.LessOrEqual(t, l.len(), 100)

	// Idle buckets (full again) are dropped at the next sweep.
	now = now.Add(2 * time.Minute)
	l.take("fresh", now)
	assert.Equal(t, 1, l.len())

	// A bucket in use is kept, and keeps its state.
	q := l.take("fresh", now)
	assert.True(t, q.allowed)
	assert.Equal(t, 0, q.remaining)
	q = l.take("fresh", now)
	assert.False(t, q.allowed)
	assert.Equal(t, 30*time.Second, q.retryAfter)
	assert.Equal(t, time.Minute, q.reset)
	peek := l.peek("fresh", now.Add(29*time.Second))
	assert.False(t, peek.allowed)
	peek = l.peek("fresh", now.Add(30*time.Second))
	assert.True(t, peek.allowed)
	assert.True(t, l.peek("never-seen", now).allowed)
	assert.Nil(t, newLimiters(RateLimit{}, 10))
}

func TestRecorderPassesFlush(t *testing.T) {
	rr := httptest.NewRecorder()
	rec := &recorder{ResponseWriter: rr, routed: true}
	rec.Flush()
	assert.True(t, rr.Flushed)
	assert.Equal(t, http.StatusOK, rec.status)
	var _ http.Flusher = rec
	assert.Equal(t, rr, rec.Unwrap())
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"/":             "/",
		"/v1/agents":    "/v1/agents",
		"/v1/agents/":   "/v1/agents/",
		"/v1//agents":   "/v1/agents",
		"/v1/./agents":  "/v1/agents",
		"/v1/x/../a/":   "/v1/a/",
		"/v1/agents/..": "/v1",
		"":              "/",
		"v1":            "/v1",
	} {
		assert.Equal(t, want, cleanPath(in), in)
	}
}
