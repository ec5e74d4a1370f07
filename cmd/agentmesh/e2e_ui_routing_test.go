package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signIn signs the dashboard in with token and waits for the Agents page.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.do("sign in",
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.Clear(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token+kb.Enter))
	b.waitFor(10*time.Second, "signed in", `!document.getElementById('nav').hidden && document.getElementById('login').hidden`)
}

// overflowing lists the visible elements wider than the viewport.
func overflowing(b *browser) []string {
	b.t.Helper()
	return eval[[]string](b, `[...document.querySelectorAll('body *')].filter((e) => e.getClientRects().length > 0 && `+
		`e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5).map((e) => e.tagName + '#' + e.id + '.' + e.getAttribute('class'))`)
}

// TestE2EDashboardRouting drives the dashboard's Routing and Charts pages
// of a live `agentmesh serve` with routing on, in headless Chromium: a
// message routed while the page is open appears within 5 s with its
// decision, reason, agent and confidence; a read-only token sees its
// length and hash but never its text, nor the session view; the admin
// sees the text and the session's turns; the charts draw the delegations
// the mesh made, with text alternatives; both layouts; no console errors.
func TestE2EDashboardRouting(t *testing.T) {
	b := newBrowser(t) // first: without chromium the test fails here
	ag := newAgents(t)
	tokens := writeTemp(t, "tokens.yaml", `
- name: viewer
  principal: default
  token: viewer-token-0123456789
  scopes: [read]
`)
	p := startServe(t, serveSpec{
		token: e2eMeshToken,
		args:  []string{"--agents", "../../examples/agents", "--allow-private-endpoints", "--store", "memory", "--tokens-file", tokens},
		env: []string{
			"BILLING_AGENT_ENDPOINT=" + ag.url("/sync"),
			"GENERAL_AGENT_ENDPOINT=" + ag.url("/sync"),
			"PASSWORD_RESET_AGENT_ENDPOINT=" + ag.url("/sync"),
		},
	})
	admin := p.client()
	// A failed delegation for the charts, next to the routed ones.
	require.Equal(t, http.StatusCreated, admin.do("POST", "/v1/agents", agentJSON("reports", ag.url("/fail"), "reports")).status)
	failed := admin.do("POST", "/v1/delegate", map[string]any{"targetName": "reports", "task": "the weekly report"}).obj(t)
	require.Equal(t, "failed", failed["status"], failed)

	// The viewer (read only) on the Routing page, before any message.
	b.at("viewer")
	b.do("open /ui/", chromedp.Navigate(p.url+"/ui/#/routing"))
	b.signIn("viewer-token-0123456789")
	b.waitFor(5*time.Second, "the Routing page", `!document.getElementById('routing').hidden && document.getElementById('decisions-count').textContent !== ''`)
	assert.Equal(t, "page", eval[string](b, `document.getElementById('nav-routing').getAttribute('aria-current')`))
	assert.Equal(t, "0 decisions", eval[string](b, `document.getElementById('decisions-count').textContent`))
	assert.Equal(t, "0", eval[string](b, `document.getElementById('routing-sessions').textContent`))
	assert.Equal(t, 8, eval[int](b, `document.querySelectorAll('#decisions-table thead th[scope=col]').length`))
	b.waitFor(10*time.Second, "the event stream is connected", `document.getElementById('live').textContent === 'Live'`)
	eval[bool](b, `window.agentmeshMarker = true`)

	// Messages routed while the page is open appear, newest first, without
	// a reload.
	const secret = "I need a refund for invoice 4711 from Nightingale Ltd"
	start := time.Now()
	r := admin.do(http.MethodPost, "/v1/request", map[string]any{"input": secret, "user_id": "ann"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	routed := r.obj(t)
	reqID := routed["request_id"].(string)
	row := `document.querySelector('#decisions-table tr[data-request=` + js(reqID) + `]')`
	b.waitFor(5*time.Second, "the decision appears", row+` !== null`)
	t.Logf("the routed message appeared after %s", time.Since(start).Round(time.Millisecond))
	assert.True(t, eval[bool](b, `window.agentmeshMarker === true`), "the page was reloaded")
	cellText := func(cls string) string {
		return strings.TrimSpace(eval[string](b, row+`.querySelector('td.`+cls+`').textContent`))
	}
	assert.Equal(t, routed["decision"], cellText("decision"))
	assert.Equal(t, routed["reason"], cellText("reason"))
	assert.Equal(t, routed["agent_id"], cellText("agent"))
	assert.Equal(t, fmt.Sprintf("%.2f", routed["confidence"].(float64)), cellText("confidence"))
	assert.Contains(t, cellText("input"), fmt.Sprintf("%d chars", len(secret)))
	assert.Regexp(t, `[0-9a-f]{16}$`, cellText("input"))
	assert.Equal(t, "admin only", cellText("text"))
	b.waitFor(5*time.Second, "the active sessions are counted", `document.getElementById('routing-sessions').textContent === '1'`)

	r = admin.do(http.MethodPost, "/v1/request", map[string]any{"input": "it was on the 3rd of March", "user_id": "ann"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	second := r.obj(t)
	b.waitFor(5*time.Second, "the second decision appears first",
		`document.querySelector('#decisions-table tbody tr').dataset.request === `+js(second["request_id"].(string)))
	assert.Equal(t, "session", strings.TrimSpace(eval[string](b, `document.querySelector('#decisions-table tbody tr td.reason').textContent`)))
	// Never the text, anywhere in the page, and no session view.
	assert.NotContains(t, eval[string](b, `document.body.innerText`), "Nightingale")
	assert.NotContains(t, eval[string](b, `document.documentElement.outerHTML`), "Nightingale")
	assert.True(t, eval[bool](b, `document.getElementById('session-view').hidden`))
	dir := artifactsDir(t)
	b.screenshot(dir, "dashboard-routing-viewer-1400.png", false)

	// Charts: the routed messages' delegations (completed) and the failed
	// one, drawn as SVG with a text alternative and a table.
	b.at("charts")
	b.do("open Charts", chromedp.Click(chromedp.CSS("#nav-charts")))
	b.waitFor(5*time.Second, "the charts are drawn", `document.querySelectorAll('#chart-counts rect.bar').length > 0`)
	assert.True(t, eval[bool](b, `document.querySelectorAll('#chart-counts rect.bar.completed').length > 0 && document.querySelectorAll('#chart-counts rect.bar.failed').length > 0`))
	assert.Equal(t, "img", eval[string](b, `document.getElementById('chart-counts').getAttribute('role')`))
	desc := eval[string](b, `document.getElementById('chart-counts-d').textContent`)
	assert.Contains(t, desc, "3 delegations ended in the last hour: 2 completed, 1 failed, 0 timeout, 0 canceled")
	assert.Contains(t, eval[string](b, `document.getElementById('chart-latency-d').textContent`), "median latency")
	assert.Equal(t, "3 delegations in the last hour", eval[string](b, `document.getElementById('charts-summary').textContent`))
	assert.GreaterOrEqual(t, eval[int](b, `document.querySelectorAll('#chart-latency .series.p99 circle').length`), 1)
	assert.GreaterOrEqual(t, eval[int](b, `document.querySelectorAll('#charts-table tbody tr[data-minute]').length`), 1)
	// Every chart is named by its title and description.
	assert.True(t, eval[bool](b, `[...document.querySelectorAll('svg.chart')].every((s) => s.getAttribute('aria-labelledby').split(' ').every((id) => document.getElementById(id).textContent.length > 0))`))
	// A delegation that ends while the page is open is counted without a reload.
	require.Equal(t, "failed", admin.do("POST", "/v1/delegate", map[string]any{"targetName": "reports", "task": "again"}).obj(t)["status"])
	b.waitFor(5*time.Second, "the new delegation is drawn", `document.getElementById('charts-summary').textContent === '4 delegations in the last hour'`)
	b.screenshot(dir, "dashboard-charts-1400.png", false)

	// The admin: the texts, and one session's turns.
	b.at("admin")
	b.do("sign out", chromedp.Click(chromedp.CSS("#logout")))
	b.waitFor(5*time.Second, "the login form", `!document.getElementById('login').hidden`)
	assert.NotContains(t, eval[string](b, `document.documentElement.outerHTML`), "3rd of March")
	b.signIn(e2eMeshToken)
	b.do("open Routing", chromedp.Click(chromedp.CSS("#nav-routing")))
	b.waitFor(5*time.Second, "the texts are shown", row+` !== null && `+row+`.querySelector('td.text').textContent === `+js(secret))
	assert.False(t, eval[bool](b, `document.getElementById('session-view').hidden`))
	b.do("show the session", chromedp.Click(chromedp.CSS(`#decisions-table tr[data-request="`+reqID+`"] button[data-session]`)))
	b.waitFor(5*time.Second, "the session's turns", `document.querySelectorAll('#session-turns-table tbody tr[data-role]').length === 4`)
	turns := eval[[]string](b, `[...document.querySelectorAll('#session-turns-table tbody tr')].map((r) => r.dataset.role + ': ' + r.querySelector('td.text').textContent)`)
	assert.Equal(t, "user: "+secret, turns[0])
	assert.Equal(t, "user: it was on the 3rd of March", turns[2])
	assert.Contains(t, eval[string](b, `document.getElementById('session-summary').textContent`), routed["session_id"].(string))
	assert.Equal(t, routed["session_id"], eval[string](b, `document.getElementById('session-id').value`))
	// A live decision while the admin looks: its text follows.
	r = admin.do(http.MethodPost, "/v1/request", map[string]any{"input": "how do I reset my password?"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	third := `document.querySelector('#decisions-table tr[data-request=` + js(r.obj(t)["request_id"].(string)) + `]')`
	b.waitFor(5*time.Second, "the third decision with its text", third+` !== null && `+third+`.querySelector('td.text').textContent === 'how do I reset my password?'`)
	b.screenshot(dir, "dashboard-routing-admin-1400.png", false)

	// 400 px: both pages as cards, nothing wider than the screen.
	b.at("narrow")
	b.do("400 px", chromedp.EmulateViewport(400, 900))
	b.waitFor(5*time.Second, "the layout is narrow", `document.documentElement.clientWidth <= 400`)
	assert.Empty(t, overflowing(b), "Routing: elements wider than the 400 px screen")
	assert.Equal(t, "block", eval[string](b, `getComputedStyle(document.querySelector('#decisions-table tbody tr')).display`), "rows are cards")
	b.screenshot(dir, "dashboard-routing-400.png", true)
	b.do("open Charts", chromedp.Click(chromedp.CSS("#nav-charts")))
	b.waitFor(5*time.Second, "the charts at 400 px", `!document.getElementById('charts').hidden && document.querySelectorAll('#chart-counts rect.bar').length > 0`)
	assert.Empty(t, overflowing(b), "Charts: elements wider than the 400 px screen")
	assert.LessOrEqual(t, eval[float64](b, `document.getElementById('chart-counts').getBoundingClientRect().width`), 400.0)
	b.screenshot(dir, "dashboard-charts-400.png", true)

	time.Sleep(300 * time.Millisecond) // the last messages arrive
	assert.Empty(t, b.problems(func(string, chromedp.ConsoleMessage) bool { return false }),
		"console errors, warnings or page exceptions")
}

// TestE2EDashboardRoutingOff: with --routing=false the Routing page says
// routing is off instead of showing an empty table, and the charts still
// count delegations.
func TestE2EDashboardRoutingOff(t *testing.T) {
	b := newBrowser(t)
	ag := newAgents(t)
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{"--routing=false", "--allow-private-endpoints", "--store", "memory"}})
	c := p.client()
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", agentJSON("billing", ag.url("/sync"), "billing")).status)
	require.Equal(t, "completed", c.do("POST", "/v1/delegate", map[string]any{"targetName": "billing", "task": "refund"}).obj(t)["status"])
	c.do("GET", "/v1/routing/decisions", nil).requireError(t, http.StatusNotFound, "not_found")

	b.at("routing off")
	b.do("open /ui/", chromedp.Navigate(p.url+"/ui/#/routing"))
	b.signIn(e2eMeshToken)
	b.waitFor(5*time.Second, "routing is said to be off", `document.getElementById('routing-error').textContent.startsWith('Routing is off on this server')`)
	assert.Equal(t, "—", eval[string](b, `document.getElementById('routing-sessions').textContent`))
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll('#decisions-table tbody tr[data-request]').length`))
	b.at("charts")
	b.do("open Charts", chromedp.Click(chromedp.CSS("#nav-charts")))
	b.waitFor(5*time.Second, "the delegation is drawn", `document.getElementById('charts-summary').textContent === '1 delegation in the last hour'`)
	assert.Equal(t, 1, eval[int](b, `document.querySelectorAll('#chart-counts rect.bar.completed').length`))

	time.Sleep(300 * time.Millisecond)
	// The only console entries allowed: the browser's notes of the two
	// routes routing leaves out, answered 404.
	assert.Empty(t, b.problems(func(phase string, m chromedp.ConsoleMessage) bool {
		return phase == "routing off" && m.Source == "network" && strings.Contains(m.Text, "404")
	}), "console errors, warnings or page exceptions")
}
