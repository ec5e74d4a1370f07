// Package retryafter parses the Retry-After header of an HTTP reply, the
// one parser of the mesh's clients (delegation transports, the client
// package, the LLM classifier of routing).
package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Parse returns the wait a Retry-After header value v asks for, measured
// from now, capped at limit (≤ 0 means no cap but the largest Duration).
//
// v is delay-seconds (digits only, as RFC 9110 has it: "120") or an HTTP
// date ("Wed, 21 Oct 2015 07:28:00 GMT"), with surrounding spaces
// ignored. A number of seconds too large to represent is the cap. An
// empty or malformed value, a negative or signed number, and a date that
// is not after now are 0: no wait asked for.
func Parse(v string, now time.Time, limit time.Duration) time.Duration {
	if limit <= 0 {
		limit = math.MaxInt64
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(limit/time.Second) { // err: out of range
			return limit
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), limit)
	}
	return 0
}
