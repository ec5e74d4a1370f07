package retryafter_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/internal/retryafter"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestParse(t *testing.T) {
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		v     string
		limit time.Duration
		want  time.Duration
	}{
		{"", time.Hour, 0},
		{"   ", time.Hour, 0},
		{"0", time.Hour, 0},
		{"7", time.Hour, 7 * time.Second},
		{" 12 ", time.Hour, 12 * time.Second},
		{"3600", time.Hour, time.Hour},
		{"3601", time.Hour, time.Hour},
		{"999999999", time.Hour, time.Hour},
		{"99999999999999999999999", time.Hour, time.Hour},
		{"99999999999999999999999", 0, time.Duration(1<<63 - 1)},
		{"86400", 0, 24 * time.Hour},
		{"-1", time.Hour, 0},
		{"+5", time.Hour, 0},
		{"1.5", time.Hour, 0},
		{"5s", time.Hour, 0},
		{"soon", time.Hour, 0},
		{date(90 * time.Second), time.Hour, 90 * time.Second},
		{" " + date(90*time.Second) + " ", time.Hour, 90 * time.Second},
		{date(2 * time.Hour), time.Hour, time.Hour},
		{date(0), time.Hour, 0},
		{date(-time.Minute), time.Hour, 0},
		{now.Add(time.Minute).Format(time.RFC850), time.Hour, time.Minute},
		{now.Add(time.Minute).Format(time.ANSIC), time.Hour, time.Minute},
	} {
		if got := retryafter.Parse(tc.v, now, tc.limit); got != tc.want {
			t.Errorf("Parse(%q, limit %v) = %v, want %v", tc.v, tc.limit, got, tc.want)
		}
	}
}

// Parse never panics, never returns a negative wait or one over the limit,
// and reads digits as seconds.
func FuzzParse(f *testing.F) {
	for _, v := range []string{"", "7", " 12 ", "-1", "+5", "99999999999999999999", "1e3",
		now.Add(time.Minute).Format(http.TimeFormat), "Wed, 21 Oct 2015 07:28:00 GMT"} {
		f.Add(v, int64(time.Hour))
	}
	f.Fuzz(func(t *testing.T, v string, limit int64) {
		d := retryafter.Parse(v, now, time.Duration(limit))
		max := time.Duration(limit)
		if max <= 0 {
			max = time.Duration(1<<63 - 1)
		}
		if d < 0 || d > max {
			t.Fatalf("Parse(%q, %v) = %v, outside [0, %v]", v, limit, d, max)
		}
		s := strings.TrimSpace(v)
		if s != "" && strings.Trim(s, "0123456789") == "" && len(s) < 10 {
			var n time.Duration
			for _, c := range s {
				n = n*10 + time.Duration(c-'0')
			}
			if want := min(n*time.Second, max); d != want {
				t.Fatalf("Parse(%q, %v) = %v, want %v", v, limit, d, want)
			}
		}
	})
}
