package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nothing to hide", "nothing to hide"},
		{"mail jane.doe+work@example.co.uk now", "mail [email] now"},
		{"two: a@b.io, C_D@sub.example.com.", "two: [email], [email]."},
		{"not an address: @handle or user@localhost", "not an address: @handle or user@localhost"},
		{"card 4111 1111 1111 1111 exp", "card [card] exp"},
		{"card 4111-1111-1111-1111", "card [card]"},
		{"card 4111111111111111", "card [card]"},
		{"amex 378282246310005.", "amex [card]."},
		{"order 4111111111111112 fails luhn", "order 4111111111111112 fails luhn"},
		{"id 123456789012 is short", "id 123456789012 is short"},
		{"Authorization: Bearer eyJhbGciOi.J9.x-y_z", "Authorization: Bearer [redacted]"},
		{"bearer   tok/en+=", "Bearer [redacted]"},
		{"the bearer of news", "the Bearer [redacted] news"},
		{"", ""},
	} {
		assert.Equal(t, tc.want, String(tc.in), "%q", tc.in)
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil)))
	log = log.With("owner", "ops@example.com").WithGroup("req")
	log.Info("call from jane@example.com",
		"auth", "Bearer s3cr3t-token",
		"err", errors.New("card 4111 1111 1111 1111 declined"),
		slog.Group("user", "email", "joe@example.org", "id", 42),
		"count", 3,
	)
	out := buf.String()
	for _, secret := range []string{"ops@example.com", "jane@example.com", "s3cr3t-token", "4111", "joe@example.org"} {
		assert.NotContains(t, out, secret)
	}
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	assert.Equal(t, "call from [email]", rec["msg"])
	assert.Equal(t, "[email]", rec["owner"])
	req := rec["req"].(map[string]any)
	assert.Equal(t, "Bearer [redacted]", req["auth"])
	assert.Equal(t, "card [card] declined", req["err"])
	assert.Equal(t, map[string]any{"email": "[email]", "id": float64(42)}, req["user"])
	assert.Equal(t, float64(3), req["count"], "non-string values pass unchanged")

	buf.Reset()
	quiet := slog.New(NewHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	quiet.Info("dropped")
	assert.Empty(t, buf.String(), "levels are the wrapped handler's")
}

// FuzzString checks that String never panics and leaves nothing its
// patterns would mask.
func FuzzString(f *testing.F) {
	for _, s := range []string{"a@b.co", "4111 1111 1111 1111", "Bearer x", "x@y.z@w.io 5555555555554444 bearer bearer t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if m := emailRE.FindString(out); m != "" {
			t.Fatalf("String(%q) = %q keeps address %q", s, out, m)
		}
		for _, m := range cardRE.FindAllString(out, -1) {
			if luhn(m) {
				t.Fatalf("String(%q) = %q keeps card number %q", s, out, m)
			}
		}
		if m := bearerRE.FindString(out); m != "" {
			t.Fatalf("String(%q) = %q keeps token %q", s, out, m)
		}
	})
}
