package discovery_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/discovery"
)

func TestResourceCovers(t *testing.T) {
	tests := []struct {
		have, want string
		covers     bool
	}{
		// The seed's uriMatches cases.
		{"file://vm1/foo", "file://vm1/foo", true},
		{"file://vm1/foo/*", "file://vm1/foo/bar", true},
		{"file://vm1/foo/*", "file://vm1/foo/bar/baz", true},
		{"file://vm1/foo/*", "file://vm2/foo/bar", false},
		{"file://vm1/foo", "git://vm1/foo", false},
		{"https://api.github.com", "https://api.github.com/repos", true},
		{"https://api.github.com", "https://api.gitlab.com/repos", false},
		{"service://k8s/svc-a", "service://k8s/svc-a", true},
		{"service://k8s/svc-a", "service://k8s/svc-b", false},
		{"file://vm1/projects/*", "file://vm1/projects/agentlens", true},
		{"file://vm1/projects/*", "file://vm2/projects/agentlens", false},
		{"git://github.com/org/*", "git://github.com/org/repo", true},
		// The seed's resourceMatches cases (non-URL strings).
		{"/foo/bar", "/foo/bar", true},
		{"/foo/*", "/foo/bar", true},
		{"/foo/*", "/foo/bar/baz", true},
		{"/home/amit/projects", "/home/amit/projects/agentlens/src", true},
		{"/opt/data", "/home/amit/projects", false},
		{"https://api.github.com", "https://api.github.com", true},
		{"agentkitai/*", "agentkitai/agentlens", true},
		{"agentkitai/agentlens", "agentkitai/agentlens", true},
		{"kubernetes-cluster-prod", "kubernetes-cluster-prod", true},
		// Scheme and host, with port.
		{"https://api.example.com:8443/v1", "https://api.example.com:8443/v1/x", true},
		{"https://api.example.com:8443/v1", "https://api.example.com/v1/x", false},
		{"https://api.example.com:443/v1", "https://api.example.com/v1/x", true}, // default port
		{"http://api.example.com:80/", "http://api.example.com/v1", true},
		{"HTTPS://API.Example.com/v1", "https://api.example.com/v1/x", true}, // case-insensitive
		{"https://api.example.com/v1", "http://api.example.com/v1", false},
		{"https://user@api.example.com/v1", "https://api.example.com/v1/x", true}, // userinfo is not the host
		// Paths.
		{"https://h/", "https://h/anything/below", true},
		{"https://h", "https://h/", true},
		{"https://h/foo", "https://h/foobar", false}, // a parent covers children, not prefixes
		{"https://h/foo/", "https://h/foo/bar", true},
		{"https://h/foo/*", "https://h/foo", false}, // below, not the directory itself
		{"https://h/foo/*", "https://h/foo/", true},
		{"https://h/foo/bar", "https://h/foo", false}, // a child does not cover its parent
		{"https://h/foo/*", "https://h/foo/../etc/passwd", false},
		{"https://h/foo/*", "https://h/foo/%2e%2e/etc", false},
		{"https://h/foo/*", "https://h/foo/./bar", true},
		{"https://h/foo?a=1", "https://h/foo?b=2", true}, // queries are ignored, as in the seed
		{"https://h/foo#x", "https://h/foo/bar", true},
		{"urn:isbn:0451450523", "urn:isbn:0451450523", true},
		{"urn:isbn:0451450523", "urn:isbn:0451450524", false},
		// Non-URL strings.
		{"/", "/etc/passwd", true}, // "/" covers all
		{"/", "relative/path", false},
		{"/opt/data", "/opt/database", false}, // no substring prefix (the seed's bug)
		{"/opt/data/", "/opt/data/x", true},
		{"/home/*", "/home/../etc", false},
		{"/home/*", "/home/./amit", true},
		{"/home/*", "file://vm1/home/amit", false}, // one is a URL, one is not
		{"file://vm1/home/*", "/home/amit", false},
		{"", "", true},
		{"", "/anything", false},
		{".", "/anything", false},
		{"agentkitai", "agentkitai/agentlens", true},
		{"agentkitai", "agentkitaix", false},
		{"https://[::1", "https://[::1/x", true}, // unparsable URLs fall back to strings
	}
	for _, tt := range tests {
		if got := discovery.ResourceCovers(tt.have, tt.want); got != tt.covers {
			t.Errorf("ResourceCovers(%q, %q) = %v, want %v", tt.have, tt.want, got, tt.covers)
		}
	}
}

func FuzzResourceCovers(f *testing.F) {
	for _, s := range [][2]string{
		{"file://vm1/foo/*", "file://vm1/foo/bar"},
		{"https://api.github.com", "https://api.github.com/repos"},
		{"/home/amit/projects/*", "/home/amit/projects/../../etc"},
		{"agentkitai/*", "agentkitai/agentlens"},
		{"https://h:443/%2e%2e/", "https://h/a/b"},
		{"urn:x:y", "urn:x:y/z"},
		{"/", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, have, want string) {
		got := discovery.ResourceCovers(have, want) // must not panic
		if have == want && !got {
			t.Fatalf("%q does not cover itself", have)
		}
		// Scheme and host must be equal for URLs.
		hu, herr := url.Parse(have)
		wu, werr := url.Parse(want)
		if got && herr == nil && werr == nil && hu.Scheme != "" && wu.Scheme != "" && have != want &&
			isScheme(hu.Scheme) && isScheme(wu.Scheme) && strings.Contains(have, ":") && strings.Contains(want, ":") {
			if !strings.EqualFold(hu.Scheme, wu.Scheme) {
				t.Fatalf("%q covers %q across schemes", have, want)
			}
			if !strings.EqualFold(hu.Hostname(), wu.Hostname()) {
				t.Fatalf("%q covers %q across hosts", have, want)
			}
		}
		// A "/*" path pattern never covers a path that climbs out of it:
		// P/* against P/../X, for a plain absolute path P and segment X.
		if p, ok := strings.CutSuffix(have, "/*"); ok && strings.HasPrefix(p, "/") && strings.Trim(p, "/") != "" &&
			!strings.ContainsAny(p, ":.%?#") {
			if x, ok := strings.CutPrefix(want, p+"/../"); ok && !strings.ContainsAny(x, "/%.?#") && got {
				t.Fatalf("%q covers %q", have, want)
			}
		}
	})
}

func isScheme(s string) bool {
	for i, c := range s {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')
		if !ok {
			return false
		}
	}
	return s != ""
}
