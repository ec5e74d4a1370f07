package discovery

import (
	"net/url"
	"strings"
)

// ResourceCovers reports whether an agent's resource have covers a
// required resource want, with the rules of the agentkit-mesh seed:
//
//   - Equal strings always cover.
//   - When both are absolute URLs (they have a scheme), the schemes and the
//     hosts (with port; case-insensitive, default ports of http, https, ws,
//     wss and ftp dropped) must be equal, and then the path of have must
//     cover the path of want: "/" and the empty path cover every path; a
//     path ending in "/*" covers everything below it ("/foo/*" covers
//     "/foo/bar" and "/foo/bar/baz", not "/foo"); a parent path covers its
//     children ("/foo" and "/foo/" cover "/foo/bar", not "/foobar"). Query
//     strings and fragments are ignored, as in the seed.
//   - Otherwise (either is not a URL: "/home/amit/projects/*",
//     "agentkitai/agentlens", "kubernetes-cluster-prod") the same path
//     rules apply to the raw strings.
//
// Dot segments ("." and "..", also percent-encoded) are resolved before
// comparing, so "/foo/*" does not cover "/foo/../etc". Unlike the seed, a
// non-URL string does not cover every string it is a prefix of: "/opt/data"
// does not cover "/opt/database" (the same substring bug as the seed's
// token matching).
//
// ResourceCovers never panics and is safe for concurrent use.
func ResourceCovers(have, want string) bool {
	if have == want {
		return true
	}
	h, hok := parseResource(have)
	w, wok := parseResource(want)
	if !hok || !wok {
		// An empty string is not a resource: it covers nothing.
		hc := cleanPath(have)
		return hc != "" && pathCovers(hc, cleanPath(want))
	}
	return h.scheme == w.scheme && h.host == w.host && pathCovers(h.path, w.path)
}

// resourceURL is the part of a URL that resource matching compares.
type resourceURL struct {
	scheme, host, path string
}

// parseResource parses an absolute URL; ok is false for anything without a
// scheme or that does not parse.
func parseResource(s string) (resourceURL, bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || !validScheme(s[:i]) {
		return resourceURL{}, false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return resourceURL{}, false
	}
	r := resourceURL{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Host)}
	if port := u.Port(); port != "" && port == defaultPort(r.scheme) {
		r.host = strings.TrimSuffix(r.host, ":"+port)
	}
	p := u.Opaque
	if p == "" {
		p = u.EscapedPath()
	}
	r.path = cleanPath(p)
	return r, true
}

func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func defaultPort(scheme string) string {
	switch scheme {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	case "ftp":
		return "21"
	}
	return ""
}

// pathCovers applies the path rules to cleaned paths.
func pathCovers(have, want string) bool {
	switch {
	case have == want:
		return true
	case have == "" || have == "/":
		// The root (or a URL with no path) covers every path; for
		// non-URL strings "/" covers every absolute path.
		return have == "" || strings.HasPrefix(want, "/")
	case strings.HasSuffix(have, "/*"):
		return strings.HasPrefix(want, have[:len(have)-1])
	case strings.HasSuffix(have, "/"):
		return strings.HasPrefix(want, have)
	}
	return len(want) > len(have) && want[len(have)] == '/' && strings.HasPrefix(want, have)
}

// cleanPath resolves "." and ".." segments (also percent-encoded, as URL
// parsers do). A path without dot segments is returned unchanged.
func cleanPath(p string) string {
	if !strings.Contains(p, ".") && !strings.Contains(p, "%2") {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	abs := strings.HasPrefix(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch dotSegment(s) {
		case 1:
			if last {
				out = append(out, "") // keep the trailing slash
			}
		case 2:
			if n := len(out); n > 0 && !(abs && n == 1) && out[n-1] != ".." {
				out = out[:n-1]
			} else if !abs {
				out = append(out, "..")
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return strings.Join(out, "/")
}

// dotSegment returns 1 for ".", 2 for "..", 0 otherwise.
func dotSegment(s string) int {
	switch strings.ToLower(s) {
	case ".", "%2e":
		return 1
	case "..", ".%2e", "%2e.", "%2e%2e":
		return 2
	}
	return 0
}
