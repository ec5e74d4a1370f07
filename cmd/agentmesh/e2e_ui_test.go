package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// browser is a headless Chromium tab, with every console message, page
// exception and browser log entry it produced.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	phase    string // what the test is doing, for the messages
	phases   []string
}

// newBrowser starts Chromium headless with a new empty profile, at
// 1400×900, and follows its console.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the dashboard's browser tests need Debian's chromium at %s "+
			"(apt-get install -y chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	b := &browser{t: t, ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, m)
			b.phases = append(b.phases, b.phase)
			b.mu.Unlock()
		}
	}()
	return b
}

// at names what the test does next, for the console messages.
func (b *browser) at(phase string) {
	b.mu.Lock()
	b.phase = phase
	b.mu.Unlock()
}

// do runs actions, failing the test on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, actions...), what)
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

// waitFor polls a JavaScript expression until it is truthy, within d.
func (b *browser) waitFor(d time.Duration, what, expr string) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d)))
	require.NoError(b.t, err, "%s (waited %s for %s)", what, d, expr)
}

// screenshot writes the whole page as a PNG into dir (the viewport only
// when viewport is set: a full-page capture of an emulated narrow
// viewport leaves out the scrollbar's width on the right).
func (b *browser) screenshot(dir, name string, viewport bool) string {
	b.t.Helper()
	shot := chromedp.FullScreenshot(100)
	if viewport {
		shot = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(b.ctx, shot)
	require.NoError(b.t, err)
	path := filepath.Join(dir, name)
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("screenshot: %s", path)
	return path
}

// problems are the console errors, warnings and exceptions, except those
// allowed: allow reports whether a message of a phase was expected.
func (b *browser) problems(allow func(phase string, m chromedp.ConsoleMessage) bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for i, m := range b.messages {
		switch m.Type {
		case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
		default:
			continue
		}
		if !allow(b.phases[i], m) {
			out = append(out, fmt.Sprintf("[%s] %s %s (%s)", b.phases[i], m.Type, m.Text, m.URL))
		}
	}
	return out
}

// artifactsDir is where the browser tests write screenshots:
// $AGENTMESH_ARTIFACTS when set, else a temporary folder of the test.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENTMESH_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// js quotes s as a JavaScript string.
func js(s string) string { return strconv.Quote(s) }

// TestE2EDashboard drives the dashboard of a live `agentmesh serve` in
// headless Chromium (docs/OPERATIONS.md#dashboard): the page and its
// policy, the login, the Agents page with its breakers and discovery
// search, a live registration, the Delegations page, both layouts, and a
// console without errors.
func TestE2EDashboard(t *testing.T) {
	b := newBrowser(t) // first: without chromium the test fails here
	const token = "dashboard-e2e-token-4f9c"
	p := startServe(t, serveSpec{token: token, args: []string{"--allow-private-endpoints"}})
	c := p.client()
	ag := newAgents(t)

	// A mesh with a completed and a failed delegation and an open breaker.
	billing := agentJSON("billing", ag.url("/sync"), "billing", "refund")
	billing["description"] = "Explains invoices and refunds."
	billing["labels"] = map[string]string{"team": "finance"}
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", billing).status)
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", agentJSON("reports", ag.url("/fail"), "reports")).status)
	dead := "http://127.0.0.1:" + freePort(t) + "/task" // nothing listens
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", agentJSON("flaky", dead, "flaky")).status)

	done := c.do("POST", "/v1/delegate", map[string]any{"targetName": "billing", "task": "refund invoice 7"}).obj(t)
	require.Equal(t, "completed", done["status"], done)
	failed := c.do("POST", "/v1/delegate", map[string]any{"targetName": "reports", "task": "the weekly report"}).obj(t)
	require.Equal(t, "failed", failed["status"], failed)
	opened := false
	for range 10 {
		r := c.do("POST", "/v1/delegate", map[string]any{"targetName": "flaky", "task": "anything", "timeoutMs": 5000}).obj(t)
		require.Equal(t, "failed", r["status"], r)
		if r["code"] == "agent_unavailable" {
			opened = true
			break
		}
	}
	require.True(t, opened, "the dead agent's breaker never opened")
	breakers := c.do("GET", "/health/deep", nil).obj(t)["breakers"].(map[string]any)
	require.Equal(t, "open", breakers["flaky"].(map[string]any)["state"], breakers)

	// The page: HTML with a policy forbidding inline scripts, and none.
	resp, err := http.Get(p.url + "/ui/")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'self'")
	assert.Contains(t, csp, "script-src 'self';")
	assert.NotContains(t, csp, "unsafe-inline")
	assert.NotContains(t, csp, "unsafe-eval")
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
	for _, s := range regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`).FindAllStringSubmatch(string(page), -1) {
		assert.Contains(t, s[1], "src=", "an inline script: %s", s[0])
		assert.Empty(t, strings.TrimSpace(s[2]), "an inline script: %s", s[0])
	}
	assert.NotRegexp(t, `(?i)\son[a-z]+=`, string(page), "an inline event handler")

	// In the browser, the policy is in force: an inline script does not run.
	b.at("load")
	b.do("open /ui/", chromedp.Navigate(p.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	assert.Equal(t, "password", eval[string](b, `document.getElementById('token').type`))
	assert.Equal(t, "search", eval[string](b, `document.getElementById('search').type`))
	assert.True(t, eval[bool](b, `[...document.querySelectorAll('input, select')].every((e) => e.labels.length > 0)`),
		"every input has a label")
	assert.True(t, eval[bool](b, `document.querySelector('[role=search]') !== null && document.querySelector('nav[aria-label]') !== null`))

	// A wrong token: an error, no data, nothing stored.
	b.at("wrong token")
	b.do("sign in with a wrong token", // typed, and Enter
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"+kb.Enter))
	b.waitFor(5*time.Second, "the refusal is shown", `document.getElementById('login-error').textContent.includes('refused')`)
	assert.True(t, eval[bool](b, `document.getElementById('agents').hidden && document.getElementById('delegations').hidden`))
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll('#agents-table tbody tr').length`))
	assert.Equal(t, 0, eval[int](b, `sessionStorage.length + localStorage.length`))

	// The right token: the agents, the token in sessionStorage only.
	b.at("sign in")
	b.do("sign in",
		chromedp.Clear(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token+kb.Enter))
	b.waitFor(10*time.Second, "the agents are listed", `document.querySelectorAll('#agents-table tbody tr[data-agent]').length === 3`)
	names := eval[[]string](b, `[...document.querySelectorAll('#agents-table tbody tr')].map((r) => r.dataset.agent)`)
	assert.ElementsMatch(t, []string{"billing", "reports", "flaky"}, names)
	assert.Equal(t, token, eval[string](b, `sessionStorage.getItem('agentmesh.token')`))
	assert.Equal(t, 0, eval[int](b, `localStorage.length`))
	href := eval[string](b, `location.href`)
	assert.NotContains(t, href, token)
	assert.NotContains(t, href, url.QueryEscape(token))
	assert.Empty(t, eval[string](b, `document.cookie`))
	assert.Equal(t, "", eval[string](b, `document.getElementById('token').value`), "the form is cleared")
	assert.Equal(t, "team=finance", eval[string](b, `document.querySelector('tr[data-agent=billing] td.labels').textContent`))
	assert.Equal(t, "fresh", eval[string](b, `document.querySelector('tr[data-agent=billing] td.health').textContent`))
	assert.Equal(t, "api", eval[string](b, `document.querySelector('tr[data-agent=billing] td.source').textContent`))
	assert.Equal(t, "http", eval[string](b, `document.querySelector('tr[data-agent=billing] td.protocol').textContent`))

	// The open breaker, next to its agent; the others closed.
	assert.Equal(t, "open", eval[string](b, `document.querySelector('tr[data-agent=flaky] td.breaker .breaker').dataset.state`))
	assert.Equal(t, "open", eval[string](b, `document.querySelector('tr[data-agent=flaky] td.breaker .badge').textContent`))
	assert.Regexp(t, `^until \S`, eval[string](b, `document.querySelector('tr[data-agent=flaky] td.breaker .until').textContent`))
	assert.Equal(t, "closed", eval[string](b, `document.querySelector('tr[data-agent=billing] td.breaker .breaker').dataset.state`))

	// Search ranks through the discovery API: the same agents, order and
	// scores as GET /v1/discover.
	b.at("search")
	b.do("search", chromedp.SendKeys(chromedp.CSS("#search"), "refund invoice"))
	b.waitFor(5*time.Second, "the results are shown", `!document.getElementById('results').hidden && document.querySelectorAll('#results-table tbody tr[data-agent]').length > 0`)
	var want []map[string]any
	c.do("GET", "/v1/discover?query=refund+invoice&limit=20&includeUnavailable=true", nil).decode(t, &want)
	require.NotEmpty(t, want)
	shown := eval[[]string](b, `[...document.querySelectorAll('#results-table tbody tr')].map((r) => r.dataset.agent + ' ' + r.querySelector('td.score').textContent)`)
	require.Len(t, shown, len(want))
	for i, w := range want {
		assert.Equal(t, fmt.Sprintf("%s %.3f", w["agent"].(map[string]any)["name"], w["score"].(float64)), shown[i])
	}
	assert.Equal(t, "billing", want[0]["agent"].(map[string]any)["name"])
	terms := eval[[]string](b, `[...document.querySelectorAll('#results-table tbody tr:first-child td.terms .term')].map((e) => e.textContent)`)
	assert.ElementsMatch(t, []string{"refund", "invoice"}, terms)

	// An agent registered while the page is open appears within 5 s,
	// without a reload (the marker set on the page survives).
	b.at("live")
	b.waitFor(10*time.Second, "the event stream is connected", `document.getElementById('live').textContent === 'Live'`)
	eval[bool](b, `window.agentmeshMarker = true`)
	start := time.Now()
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", agentJSON("newcomer", ag.url("/sync"), "translation")).status)
	b.waitFor(5*time.Second, "the new agent appears", `document.querySelector('#agents-table tr[data-agent=newcomer]') !== null`)
	t.Logf("the registered agent appeared after %s", time.Since(start).Round(time.Millisecond))
	assert.True(t, eval[bool](b, `window.agentmeshMarker === true`), "the page was reloaded")

	dir := artifactsDir(t)
	b.screenshot(dir, "dashboard-agents-1400.png", false)

	// The Delegations page lists the completed and the failed ones, and
	// filters by status.
	b.at("delegations")
	b.do("open Delegations", chromedp.Click(chromedp.CSS("#nav-delegations")))
	b.waitFor(5*time.Second, "the delegations are listed", `document.querySelectorAll('#delegations-table tbody tr[data-delegation]').length >= 3`)
	statuses := eval[[]string](b, `[...document.querySelectorAll('#delegations-table tbody tr')].map((r) => r.dataset.status)`)
	assert.Contains(t, statuses, "completed")
	assert.Contains(t, statuses, "failed")
	assert.Equal(t, "page", eval[string](b, `document.getElementById('nav-delegations').getAttribute('aria-current')`))
	assert.Contains(t, eval[string](b, `document.querySelector('#delegations-table tr[data-delegation=`+js(done["id"].(string))+`]').textContent`), "billing")
	b.screenshot(dir, "dashboard-delegations-1400.png", false)
	for _, status := range []string{"failed", "completed"} {
		eval[bool](b, `(() => { const s = document.getElementById('status-filter'); s.value = `+js(status)+`; s.dispatchEvent(new Event('change')); return true; })()`)
		b.waitFor(5*time.Second, "the "+status+" filter applies",
			`(() => { const rows = [...document.querySelectorAll('#delegations-table tbody tr[data-delegation]')]; return rows.length > 0 && rows.every((r) => r.dataset.status === `+js(status)+`); })()`)
	}
	n := eval[int](b, `document.querySelectorAll('#delegations-table tbody tr[data-delegation]').length`)
	assert.Equal(t, 1, n, "one completed delegation")

	// 400 px wide: the same pages, as cards, with nothing wider than the
	// screen.
	b.at("narrow")
	b.do("400 px", chromedp.EmulateViewport(400, 900), chromedp.Click(chromedp.CSS("#nav-agents")))
	b.waitFor(5*time.Second, "the agents at 400 px", `!document.getElementById('agents').hidden && document.querySelectorAll('#agents-table tbody tr[data-agent]').length === 4`)
	wide := eval[[]string](b, `[...document.querySelectorAll('body *')].filter((e) => e.getClientRects().length > 0 && e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5).map((e) => e.tagName + '#' + e.id + '.' + e.className)`)
	assert.Empty(t, wide, "elements wider than the 400 px screen")
	assert.Equal(t, "block", eval[string](b, `getComputedStyle(document.querySelector('#agents-table tbody tr')).display`), "rows are cards")
	b.screenshot(dir, "dashboard-agents-400.png", true)

	// Nothing went wrong in the page: the only console entry allowed is
	// the browser's note of the refused sign-in's 401.
	time.Sleep(300 * time.Millisecond) // the last messages arrive
	assert.Empty(t, b.problems(func(phase string, m chromedp.ConsoleMessage) bool {
		return phase == "wrong token" && m.Source == "network" && strings.Contains(m.Text, "401")
	}), "console errors, warnings or page exceptions")
}

// TestE2EDashboardOff: --ui=false leaves /ui/ out; the event stream, an
// API route, stays, and ends when the server shuts down.
func TestE2EDashboardOff(t *testing.T) {
	const token = "dashboard-off-token-77c1"
	p := startServe(t, serveSpec{token: token, args: []string{"--ui=false"}})
	resp, err := http.Get(p.url + "/ui/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	req, err := http.NewRequest(http.MethodGet, p.url+"/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	start := time.Now()
	p.signal(os.Interrupt)
	_, err = io.Copy(io.Discard, resp.Body) // the stream ends with the server
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "the stream held the shutdown")
	assert.Equal(t, 0, p.waitExit(20*time.Second))
}
