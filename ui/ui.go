// Package ui is the agentmesh web dashboard: plain HTML, CSS and ES
// modules embedded in the binary (no build step, no CDN), served by
// [Handler] at /ui/. The page is public; everything it shows it reads from
// the HTTP API with the token the operator types into its login form, kept
// in the tab's sessionStorage only:
//
//   - Agents: every agent with its health (fresh or stale), circuit
//     breaker (GET /health/deep), last heartbeat, protocol, source and
//     labels, and a search box ranking them through GET /v1/discover with
//     scores and matched terms.
//   - Delegations: GET /v1/delegations, filtered by status, a page of
//     100 at a time.
//   - An agent's page (#/agents/{name}): its record without credential,
//     its breaker now and its transitions (GET /v1/agents/{name}/breaker)
//     and the delegations sent to it.
//   - A delegation's page (#/delegations/{id}): its status, timing,
//     attempts, error code and message, caller, target and depth.
//   - Routing (#/routing): the router's recent decisions (GET
//     /v1/routing/decisions, live from routing.decided events), the
//     active sessions count (GET /v1/stats/sessions) and, for an admin
//     token, the messages' texts and one session's turns (GET
//     /v1/sessions/{id}).
//   - Charts (#/charts): delegations per minute by status and their
//     p50/p99 latencies over the last hour (GET /v1/stats/delegations),
//     drawn as inline SVG with a text summary and a table.
//
// Every page follows GET /v1/events (Server-Sent Events, read through
// fetch so the token travels in the Authorization header) and reloads
// what changed.
//
// httpserver mounts the handler (httpserver.Options.UI); agentmesh serve
// does by default (--ui=false leaves it out).
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the policy of every response of [Handler]: only
// the embedded assets (scripts, styles, images) and the API of the same
// origin; no inline script or style, no frames, no plugins.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Assets returns the embedded files: index.html, its scripts, stylesheet
// and icon.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	return sub
}

// Handler serves the dashboard's assets for the paths under /ui/ (/ui/ is
// the page). Each response carries [ContentSecurityPolicy] and the API's
// other security headers (nosniff, X-Frame-Options DENY, no referrer, no
// caching), so the handler is safe to mount on any mux; anything but GET
// and HEAD is 405.
func Handler() http.Handler {
	files := http.StripPrefix("/ui/", http.FileServerFS(Assets()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		files.ServeHTTP(w, r)
	})
}
