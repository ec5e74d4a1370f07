package httpserver

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// query is a request's parsed query string. Parameters a route does not
// know are refused (a typo must not silently become a default), and so is
// a single-valued parameter given twice.
type query url.Values

// parseQuery parses raw, allowing only the parameters in allowed (the
// repeatable ones marked with a trailing "*").
func parseQuery(raw string, allowed ...string) (query, *apiError) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badRequest("malformed query string")
	}
	for k, vals := range v {
		switch {
		case slices.Contains(allowed, k+"*"):
		case slices.Contains(allowed, k):
			if len(vals) > 1 {
				return nil, fieldError(k, "query parameter %q is given more than once", k)
			}
		default:
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = strings.TrimSuffix(a, "*")
			}
			return nil, fieldError(k, "unknown query parameter %q (this route takes %s)", truncate(k, 64), strings.Join(names, ", "))
		}
	}
	return query(v), nil
}

func (q query) get(k string) string {
	if v := q[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (q query) has(k string) bool {
	_, ok := q[k]
	return ok
}

// nonNegInt reads an optional integer ≥ 0 (0 when absent).
func (q query) nonNegInt(k string) (int, *apiError) {
	if !q.has(k) {
		return 0, nil
	}
	n, err := strconv.Atoi(q.get(k))
	if err != nil || n < 0 {
		return 0, fieldError(k, "invalid %s: must be a non-negative integer", k)
	}
	return n, nil
}

// limit reads the page size of a list route, "limit": a non-negative
// integer, where absent or 0 means def, capped at maxN.
func (q query) limit(def, maxN int) (int, *apiError) {
	n, e := q.nonNegInt("limit")
	if e != nil {
		return 0, e
	}
	if n == 0 {
		n = def
	}
	return min(n, maxN), nil
}

func (q query) float(k string) (float64, *apiError) {
	if !q.has(k) {
		return 0, nil
	}
	f, err := strconv.ParseFloat(q.get(k), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fieldError(k, "invalid %s: must be a number", k)
	}
	return f, nil
}

// bool reads true/false/1/0/yes/no (any case); a parameter present with
// no value means true.
func (q query) bool(k string) (bool, *apiError) {
	if !q.has(k) {
		return false, nil
	}
	switch strings.ToLower(q.get(k)) {
	case "", "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, fieldError(k, "invalid %s: must be true or false", k)
}

// labels reads repeated label=key=value parameters.
func (q query) labels(k string) (map[string]string, *apiError) {
	vals := q[k]
	if len(vals) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(vals))
	for _, kv := range vals {
		key, val, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return nil, fieldError(k, "invalid %s: must be key=value", k)
		}
		if old, dup := out[key]; dup && old != val {
			return nil, fieldError(k, "invalid %s: label %q is given twice with different values", k, truncate(key, 64))
		}
		out[key] = val
	}
	return out, nil
}

// duration reads a wait such as "30s", "1m" or a plain number of seconds.
func (q query) duration(k string) (time.Duration, *apiError) {
	if !q.has(k) {
		return 0, nil
	}
	s := q.get(k)
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		if n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, fieldError(k, "invalid %s: must be a duration such as 30s", k)
		}
		return time.Duration(min(n, 3600) * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fieldError(k, "invalid %s: must be a duration such as 30s", k)
	}
	return d, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
