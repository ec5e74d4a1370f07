package activity_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/principal"
	"github.com/agentmesh/agentmesh/routing"
)

func TestRoutingKeepsTheNewestFirstAndForgetsTheOldest(t *testing.T) {
	r := activity.NewRouting(&activity.RoutingOptions{Size: 3})
	for i := range 5 {
		r.Record(activity.Decision{RequestID: fmt.Sprint(i)})
	}
	require.Equal(t, 3, r.Len())
	var ids []string
	for _, d := range r.Recent(0, nil) {
		ids = append(ids, d.RequestID)
	}
	assert.Equal(t, []string{"4", "3", "2"}, ids)
	got := r.Recent(2, nil)
	require.Len(t, got, 2)
	assert.Equal(t, "4", got[0].RequestID)
	assert.Equal(t, "3", got[1].RequestID)
	odd := r.Recent(10, func(d activity.Decision) bool { return d.RequestID != "3" })
	require.Len(t, odd, 2)
	assert.Equal(t, "2", odd[1].RequestID)
}

func TestRoutingObserveTakesTheInputFromTheContext(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var published []activity.Decision
	r := activity.NewRouting(&activity.RoutingOptions{
		Now:      func() time.Time { return at },
		OnRecord: func(d activity.Decision) { published = append(published, d) },
	})
	ctx := principal.NewContext(context.Background(), principal.Principal{Name: "team-a"})
	r.Observe(routing.WithRequest(ctx, routing.Request{Input: "réfund my invoice"}), routing.Response{
		RequestID: "req-1", SessionID: "s-1", AgentID: "billing", Decision: routing.ActionRoute,
		Reason: routing.ReasonConfidence, Confidence: 0.82, DurationMs: 12,
	}, nil)
	// Without the input (a front-end that does not pass it), and for a
	// failure: the code of the error, and the suggested agent of clarify.
	r.Observe(context.Background(), routing.Response{RequestID: "req-2", Decision: routing.ActionFallback, Reason: routing.ReasonDispatchFailed},
		routing.ErrNoDefaultAgent)
	r.Observe(context.Background(), routing.Response{RequestID: "req-3", Decision: routing.ActionClarify, SuggestedAgent: "hr"}, errors.New("boom"))

	got := r.Recent(0, nil)
	require.Len(t, got, 3)
	first := got[2]
	assert.Equal(t, activity.Decision{
		Time: at, RequestID: "req-1", Decision: routing.ActionRoute, Reason: routing.ReasonConfidence, Agent: "billing",
		Confidence: 0.82, InputLen: 17, InputHash: activity.InputHash("réfund my invoice"), SessionID: "s-1",
		DurationMs: 12, Principal: "team-a", Text: "réfund my invoice",
	}, first)
	assert.Len(t, first.InputHash, 16)
	assert.Equal(t, "", first.Redacted().Text)
	assert.Equal(t, first.InputHash, first.Redacted().InputHash)

	assert.Equal(t, routing.CodeNoDefaultAgent, got[1].Error)
	assert.Equal(t, principal.Default, got[1].Principal)
	assert.Zero(t, got[1].InputLen)
	assert.Empty(t, got[1].InputHash)
	assert.Equal(t, "hr", got[0].Agent)
	assert.Equal(t, "internal", got[0].Error)
	assert.Equal(t, r.Recent(0, nil)[2], published[0], "OnRecord gets what is kept")
	require.Len(t, published, 3)
}

// A long message keeps its first MaxTextRunes characters, its length and
// hash those of the whole.
func TestRoutingKeepsTheStartOfALongText(t *testing.T) {
	r := activity.NewRouting(&activity.RoutingOptions{MaxTextRunes: 4})
	r.Observe(routing.WithRequest(context.Background(), routing.Request{Input: "ééééé long"}), routing.Response{}, nil)
	r.Observe(routing.WithRequest(context.Background(), routing.Request{Input: "four"}), routing.Response{}, nil)
	got := r.Recent(0, nil)
	assert.Equal(t, "four", got[0].Text)
	assert.False(t, got[0].TextTruncated)
	assert.Equal(t, "éééé", got[1].Text)
	assert.True(t, got[1].TextTruncated)
	assert.Equal(t, 10, got[1].InputLen)
	assert.Equal(t, activity.InputHash("ééééé long"), got[1].InputHash)
}

func TestNilRoutingIsInert(t *testing.T) {
	var r *activity.Routing
	r.Record(activity.Decision{})
	r.Observe(context.Background(), routing.Response{}, nil)
	assert.Equal(t, 0, r.Len())
	assert.Empty(t, r.Recent(10, nil))
}

func TestRoutingConcurrentUse(t *testing.T) {
	r := activity.NewRouting(&activity.RoutingOptions{Size: 50})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				r.Observe(routing.WithRequest(context.Background(), routing.Request{Input: "x"}), routing.Response{RequestID: fmt.Sprint(g, "-", i)}, nil)
				_ = r.Recent(10, nil)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 50, r.Len())
	assert.Len(t, r.Recent(0, nil), 50)
}

// Whatever the message, a decision shows its length in runes and a
// 16-hex-digit hash, keeps its text for the admin, and Redacted drops
// only the text.
func FuzzRoutingObserve(f *testing.F) {
	for _, s := range []string{"refund invoice 42", "", "réfund ✓", "\xff\xfe", strings.Repeat("a", 4000), strings.Repeat("é", 1000) + "x"} {
		f.Add(s)
	}
	hexDigits := regexp.MustCompile(`^[0-9a-f]{16}$`)
	f.Fuzz(func(t *testing.T, text string) {
		r := activity.NewRouting(&activity.RoutingOptions{Size: 2})
		r.Observe(routing.WithRequest(context.Background(), routing.Request{Input: text}), routing.Response{RequestID: "r"}, nil)
		got := r.Recent(0, nil)
		require.Len(t, got, 1)
		d := got[0]
		assert.Equal(t, utf8.RuneCountInString(text), d.InputLen)
		assert.Regexp(t, hexDigits, d.InputHash)
		assert.True(t, strings.HasPrefix(text, d.Text))
		assert.Equal(t, d.InputLen > activity.DefaultMaxTextRunes, d.TextTruncated)
		assert.Equal(t, min(d.InputLen, activity.DefaultMaxTextRunes), utf8.RuneCountInString(d.Text))
		red := d.Redacted()
		assert.Empty(t, red.Text)
		assert.False(t, red.TextTruncated)
		red.Text, red.TextTruncated = d.Text, d.TextTruncated
		assert.Equal(t, d, red)
		b, err := json.Marshal(d.Redacted())
		require.NoError(t, err)
		if text != "" {
			assert.NotContains(t, string(b), `"text"`)
		}
	})
}

func BenchmarkRoutingObserve(b *testing.B) {
	r := activity.NewRouting(nil)
	ctx := routing.WithRequest(context.Background(), routing.Request{Input: strings.Repeat("refund my invoice please ", 20)}) // 500 bytes
	resp := routing.Response{RequestID: "r", AgentID: "billing", Decision: routing.ActionRoute, Confidence: 0.9}
	b.ReportAllocs()
	for b.Loop() {
		r.Observe(ctx, resp, nil)
	}
}
