// Package redact masks personal data and secrets in log output
// (docs/OPERATIONS.md#logs): e-mail addresses, payment card numbers and
// bearer tokens, in any string a log record carries — its message, its
// attributes, nested groups and errors.
//
// Wrap the handler of a logger once, where the logger is made:
//
//	log := slog.New(redact.NewHandler(slog.NewJSONHandler(os.Stderr, nil)))
//
// Redaction is a last line of defence: code should not log task text,
// tokens or personal data in the first place.
package redact

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
)

// The masks that replace what is redacted.
const (
	Email  = "[email]"
	Card   = "[card]"
	Bearer = "Bearer [redacted]"
)

var (
	emailRE  = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}`)
	bearerRE = regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]+`)
	// cardRE finds runs of 13–19 digits, optionally grouped by single
	// spaces or dashes; Luhn decides which are card numbers.
	cardRE = regexp.MustCompile(`\b\d(?:[ \-]?\d){12,18}\b`)
)

// String returns s with e-mail addresses, card numbers (13–19 digits that
// pass the Luhn check, optionally grouped by spaces or dashes) and bearer
// tokens masked. Strings with nothing to mask are returned as they are,
// cheaply: each pattern runs only when a character it needs is present.
func String(s string) string {
	if strings.IndexByte(s, '@') >= 0 {
		s = emailRE.ReplaceAllString(s, Email)
	}
	if hasFold(s, "bearer") {
		s = bearerRE.ReplaceAllString(s, Bearer)
	}
	if digits(s) >= 13 {
		s = cardRE.ReplaceAllStringFunc(s, func(m string) string {
			if luhn(m) {
				return Card
			}
			return m
		})
	}
	return s
}

// hasFold reports whether s contains the lower-case ASCII word w in any
// case.
func hasFold(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(w)], w) {
			return true
		}
	}
	return false
}

// digits counts the ASCII digits of s.
func digits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

// luhn reports whether the digits of s pass the Luhn check.
func luhn(s string) bool {
	sum, double := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// Handler is a slog.Handler that masks, with [String], every string in
// the records it passes on to the handler it wraps.
type Handler struct {
	next slog.Handler
}

// NewHandler returns a Handler that passes redacted records to next.
func NewHandler(next slog.Handler) *Handler { return &Handler{next: next} }

// Enabled reports whether the wrapped handler handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle masks r's message and attributes and passes the result on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs returns a Handler whose wrapped handler has the masked attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = attr(a)
	}
	return &Handler{next: h.next.WithAttrs(masked)}
}

// WithGroup returns a Handler whose wrapped handler opens the group.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name)}
}

// attr masks the strings of one attribute: string values, groups
// recursively, and errors, Stringers and other values by their text.
func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		masked := make([]slog.Attr, len(group))
		for i, g := range group {
			masked[i] = attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(masked...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, String(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, String(x.String()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
