package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// detailFact is the text of the <dd> of a detail page's fact (data-fact=key)
// in the list of facts id.
func detailFact(b *browser, id, key string) string {
	b.t.Helper()
	return eval[string](b, `(() => { const d = document.querySelector('#`+id+` dd[data-fact=`+js(key)+`]'); return d ? d.textContent : '(no '+`+js(key)+`+')'; })()`)
}

// goHash moves the page to the location hash h, as a link would (the
// same document: no reload).
func (b *browser) goHash(h string) {
	b.t.Helper()
	eval[bool](b, `(location.hash = `+js(h)+`) !== ''`)
}

// TestE2EDashboardDetail drives the dashboard's detail pages of a live
// `agentmesh serve` in headless Chromium (docs/OPERATIONS.md#dashboard):
// an agent's page with its record (never its credential), its breaker
// opened by real failed delegations and the history of it, and its
// delegations; a failed delegation's page with its timing, attempts and
// error; an async delegation's page turning completed when the agent
// reports, without a reload; both layouts; keyboard navigation; a console
// without errors.
func TestE2EDashboardDetail(t *testing.T) {
	b := newBrowser(t) // first: without chromium the test fails here
	const token = "dashboard-detail-token-5e21"
	const credential = "billing-agent-credential-7d2e"
	p := startServe(t, serveSpec{token: token, args: []string{"--allow-private-endpoints"}})
	c := p.client()
	ag := newAgents(t)

	// billing answers and has a credential; flaky's endpoint is dead, so
	// its breaker opens; later answers only through its callback.
	billing := agentJSON("billing", ag.url("/sync"), "billing", "refund")
	billing["auth"] = map[string]any{"type": "bearer", "token": credential}
	billing["labels"] = map[string]string{"team": "finance"}
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", billing).status)
	dead := "http://127.0.0.1:" + freePort(t) + "/task" // nothing listens
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", agentJSON("flaky", dead, "flaky")).status)
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/agents", agentJSON("later", ag.url("/silent"), "later")).status)

	done := c.do("POST", "/v1/delegate", map[string]any{"targetName": "billing", "task": "refund invoice 7", "sourceAgent": "frontdesk"}).obj(t)
	require.Equal(t, "completed", done["status"], done)
	var flakyIDs []string
	var first map[string]any
	opened := false
	for range 10 {
		r := c.do("POST", "/v1/delegate", map[string]any{"targetName": "flaky", "task": "anything", "timeoutMs": 5000}).obj(t)
		require.Equal(t, "failed", r["status"], r)
		flakyIDs = append(flakyIDs, r["id"].(string))
		if first == nil {
			first = r
		}
		if r["code"] == "agent_unavailable" {
			opened = true
			break
		}
	}
	require.True(t, opened, "the dead agent's breaker never opened")
	require.NotEqual(t, "agent_unavailable", first["code"], "the first failure reached the agent")

	// The API: the breaker is open, and its history says when it opened.
	var hist struct {
		Current struct {
			State string `json:"state"`
		} `json:"current"`
		Transitions []struct {
			At   time.Time `json:"at"`
			From string    `json:"from"`
			To   string    `json:"to"`
		} `json:"transitions"`
	}
	c.do("GET", "/v1/agents/flaky/breaker", nil).decode(t, &hist)
	assert.Equal(t, "open", hist.Current.State)
	require.Len(t, hist.Transitions, 1)
	assert.Equal(t, "closed", hist.Transitions[0].From)
	assert.Equal(t, "open", hist.Transitions[0].To)
	c.do("GET", "/v1/agents/nobody/breaker", nil).requireError(t, http.StatusNotFound, "not_found")
	assert.NotContains(t, string(c.do("GET", "/v1/agents/billing/breaker", nil).body), credential)

	// Sign in, and reach flaky's page from the list with the keyboard.
	b.at("sign in")
	b.do("open /ui/", chromedp.Navigate(p.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token+kb.Enter))
	b.waitFor(10*time.Second, "the agents are listed", `document.querySelectorAll('#agents-table tbody tr[data-agent]').length === 3`)
	b.waitFor(10*time.Second, "the event stream is connected", `document.getElementById('live').textContent === 'Live'`)

	b.at("agent page")
	link := `document.querySelector('#agents-table tr[data-agent=flaky] td.name a')`
	assert.Equal(t, "#/agents/flaky", eval[string](b, link+`.getAttribute('href')`))
	eval[bool](b, link+`.focus() || true`)
	assert.True(t, eval[bool](b, `document.activeElement === `+link), "the agent's link takes the focus")
	b.do("follow the link with Enter", chromedp.KeyEvent(kb.Enter))
	b.waitFor(5*time.Second, "flaky's page is shown", `!document.getElementById('agent').hidden && document.getElementById('agents').hidden`)
	assert.Equal(t, "Agent flaky", eval[string](b, `document.getElementById('agent-title').textContent`))
	assert.Equal(t, "agent-title", eval[string](b, `document.activeElement.id`), "the page's heading takes the focus")
	assert.Equal(t, "true", eval[string](b, `document.getElementById('nav-agents').getAttribute('aria-current')`))

	// Its breaker: open now, and the transition that opened it.
	b.waitFor(5*time.Second, "the breaker history is shown", `document.querySelectorAll('#agent-breaker-table tbody tr[data-to]').length === 1`)
	assert.Equal(t, "open", eval[string](b, `document.querySelector('#agent-breaker .breaker').dataset.state`))
	assert.Equal(t, "closed open", eval[string](b, `(() => { const r = document.querySelector('#agent-breaker-table tbody tr'); return r.dataset.from + ' ' + r.dataset.to; })()`))
	at := eval[string](b, `document.querySelector('#agent-breaker-table tbody tr td.at time').getAttribute('datetime')`)
	shown, err := time.Parse(time.RFC3339Nano, at)
	require.NoError(t, err, at)
	assert.True(t, shown.Equal(hist.Transitions[0].At), "the transition's time: %s, the API's %s", shown, hist.Transitions[0].At)
	assert.Contains(t, eval[string](b, `document.getElementById('agent-breaker').textContent`), "Open until")

	// Its delegations: every failed one, newest first.
	b.waitFor(5*time.Second, "flaky's delegations are listed", `document.querySelectorAll('#agent-delegations-table tbody tr[data-delegation]').length === `+strconv.Itoa(len(flakyIDs)))
	ids := eval[[]string](b, `[...document.querySelectorAll('#agent-delegations-table tbody tr')].map((r) => r.dataset.delegation)`)
	want := append([]string(nil), flakyIDs...)
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i]
	}
	assert.Equal(t, want, ids, "newest first")
	assert.True(t, eval[bool](b, `[...document.querySelectorAll('#agent-delegations-table tbody tr')].every((r) => r.dataset.status === 'failed')`))
	dir := artifactsDir(t)
	b.screenshot(dir, "dashboard-agent-1400.png", false)

	// billing's page: the record, its credential's type but never the
	// credential; the delegation from frontdesk.
	b.at("billing page")
	b.goHash("#/agents/billing")
	b.waitFor(5*time.Second, "billing's record is shown", `document.getElementById('agent-title').textContent === 'Agent billing' && document.getElementById('agent-json').textContent.includes('"billing"')`)
	b.waitFor(5*time.Second, "billing's delegation is listed", `document.querySelector('#agent-delegations-table tr[data-delegation=`+js(done["id"].(string))+`]') !== null`)
	page := eval[string](b, `document.documentElement.outerHTML + document.getElementById('agent-json').textContent`)
	assert.NotContains(t, page, credential, "the agent's credential is on the page")
	assert.Contains(t, eval[string](b, `document.getElementById('agent-record').textContent`), "bearer")
	assert.Contains(t, eval[string](b, `document.getElementById('agent-record').textContent`), "team=finance")
	assert.Equal(t, "closed", eval[string](b, `document.querySelector('#agent-breaker .breaker').dataset.state`))
	assert.Equal(t, "No transition since this server started.", eval[string](b, `document.querySelector('#agent-breaker-table tbody td').textContent`))

	// A delegation to billing while its page is open is listed there
	// without a reload (delegation.finished).
	b.at("live agent page")
	eval[bool](b, `window.agentmeshMarker = true`)
	again := c.do("POST", "/v1/delegate", map[string]any{"targetName": "billing", "task": "refund invoice 8"}).obj(t)
	require.Equal(t, "completed", again["status"], again)
	b.waitFor(5*time.Second, "the new delegation is listed on billing's page",
		`document.querySelector('#agent-delegations-table tbody tr:first-child').dataset.delegation === `+js(again["id"].(string)))
	assert.True(t, eval[bool](b, `window.agentmeshMarker === true`), "the page was reloaded")
	assert.Equal(t, 2, eval[int](b, `document.querySelectorAll('#agent-delegations-table tbody tr[data-delegation]').length`))

	// The first failed delegation's page, from flaky's list: timing,
	// attempts, the error's code and message, the chain.
	b.at("delegation page")
	b.goHash("#/agents/flaky")
	firstID := first["id"].(string)
	row := `document.querySelector('#agent-delegations-table tr[data-delegation=` + js(firstID) + `] td.id a')`
	b.waitFor(5*time.Second, "flaky's first delegation is listed", row+` !== null`)
	b.do("open the delegation", chromedp.Click(chromedp.CSS(`#agent-delegations-table tr[data-delegation="`+firstID+`"] td.id a`)))
	b.waitFor(5*time.Second, "the delegation's page is shown", `!document.getElementById('delegation').hidden && document.getElementById('delegation').dataset.status === 'failed'`)
	assert.Equal(t, "#/delegations/"+firstID, eval[string](b, `location.hash`))
	var rec map[string]any
	c.do("GET", "/v1/delegations/"+firstID, nil).decode(t, &rec)
	assert.Equal(t, firstID, detailFact(b, "delegation-summary", "id"))
	assert.Equal(t, "failed", detailFact(b, "delegation-summary", "status"))
	assert.Equal(t, "flaky", detailFact(b, "delegation-summary", "target"))
	assert.Equal(t, rec["code"], detailFact(b, "delegation-outcome", "code"))
	assert.Equal(t, rec["error"], detailFact(b, "delegation-outcome", "error"))
	assert.Equal(t, strconv.Itoa(int(rec["attempts"].(float64))), detailFact(b, "delegation-outcome", "attempts"))
	assert.Greater(t, rec["attempts"].(float64), 0.0)
	for _, k := range []string{"created", "updated", "finished"} {
		dt := eval[string](b, `document.querySelector('#delegation-timing dd[data-fact=`+js(k)+`] time').getAttribute('datetime')`)
		field := map[string]string{"created": "createdAt", "updated": "updatedAt", "finished": "finishedAt"}[k]
		assert.Equal(t, rec[field], dt, k)
	}
	assert.Regexp(t, `^\d+(\.\d+)? (ms|s)$`, detailFact(b, "delegation-timing", "duration"))
	assert.Equal(t, "anything", eval[string](b, `document.getElementById('delegation-task').textContent`))
	assert.Equal(t, []string{"source", "target"}, eval[[]string](b, `[...document.querySelectorAll('#delegation-chain li')].map((l) => l.dataset.role)`))
	assert.Contains(t, eval[string](b, `document.getElementById('delegation-depth').textContent`), "Depth 1")
	b.screenshot(dir, "dashboard-delegation-1400.png", false)

	// The completed one: its caller in the chain, linked to its page.
	b.goHash("#/delegations/" + done["id"].(string))
	b.waitFor(5*time.Second, "the completed delegation is shown", `document.getElementById('delegation').dataset.status === 'completed'`)
	assert.Equal(t, "#/agents/frontdesk", eval[string](b, `document.querySelector('#delegation-chain li[data-role=source] a').getAttribute('href')`))
	assert.Contains(t, eval[string](b, `document.getElementById('delegation-result').textContent`), "refund invoice 7")
	assert.Equal(t, "—", detailFact(b, "delegation-outcome", "code"))

	// An async delegation: accepted on its page, completed there once the
	// agent reports, without a reload (delegation.finished).
	b.at("live delegation")
	acc := c.do("POST", "/v1/delegate", map[string]any{"targetName": "later", "task": "the quarterly report", "async": true}).obj(t)
	require.Equal(t, "accepted", acc["status"], acc)
	accID := acc["id"].(string)
	b.goHash("#/delegations/" + accID)
	b.waitFor(5*time.Second, "the accepted delegation is shown", `document.getElementById('delegation').dataset.status === 'accepted'`)
	assert.Equal(t, "not yet", detailFact(b, "delegation-timing", "finished"))
	b.waitFor(10*time.Second, "the event stream is connected", `document.getElementById('live').textContent === 'Live'`)
	eval[bool](b, `window.agentmeshMarker = true`)
	cb := ag.request(t, accID).CallbackURL
	anon := p.as("")
	r := anon.do("POST", cb[strings.Index(cb, "/v1/"):], `{"status":"completed","result":{"pages":12}}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	start := time.Now()
	b.waitFor(5*time.Second, "the page shows the delegation completed", `document.getElementById('delegation').dataset.status === 'completed'`)
	t.Logf("the finished delegation showed after %s", time.Since(start).Round(time.Millisecond))
	assert.True(t, eval[bool](b, `window.agentmeshMarker === true`), "the page was reloaded")
	assert.Contains(t, eval[string](b, `document.getElementById('delegation-result').textContent`), `"pages": 12`)
	assert.NotEqual(t, "not yet", detailFact(b, "delegation-timing", "finished"))

	// The delegations list pages through the API's pages: 100 a page.
	b.at("pager")
	b.do("open Delegations", chromedp.Click(chromedp.CSS("#nav-delegations")))
	b.waitFor(5*time.Second, "the delegations are listed", `document.querySelectorAll('#delegations-table tbody tr[data-delegation]').length === `+strconv.Itoa(len(flakyIDs)+3))
	assert.True(t, eval[bool](b, `document.getElementById('delegations-older').disabled && document.getElementById('delegations-newer').disabled`), "one page only")
	assert.Equal(t, "#/delegations/"+accID, eval[string](b, `document.querySelector('#delegations-table tbody tr td.id a').getAttribute('href')`), "newest first, linked")

	// Past 100, the list has pages: Older shows the rest, Newer the
	// first again, together every delegation once, as the API lists them.
	for i := range 100 {
		r := c.do("POST", "/v1/delegate", map[string]any{"targetName": "billing", "task": "bulk " + strconv.Itoa(i)}).obj(t)
		require.Equal(t, "completed", r["status"], r)
	}
	total := len(flakyIDs) + 3 + 100
	b.do("reload the list", chromedp.Click(chromedp.CSS("#nav-agents")), chromedp.Click(chromedp.CSS("#nav-delegations")))
	rowsJS := `[...document.querySelectorAll('#delegations-table tbody tr[data-delegation]')].map((r) => r.dataset.delegation)`
	b.waitFor(5*time.Second, "a full first page", `document.querySelectorAll('#delegations-table tbody tr[data-delegation]').length === 100 && !document.getElementById('delegations-older').disabled`)
	page1 := eval[[]string](b, rowsJS)
	assert.True(t, eval[bool](b, `document.getElementById('delegations-newer').disabled`))
	assert.Equal(t, "1–100", eval[string](b, `document.getElementById('delegations-page').textContent`))
	b.do("older", chromedp.Click(chromedp.CSS("#delegations-older")))
	b.waitFor(5*time.Second, "the second page", `document.querySelectorAll('#delegations-table tbody tr[data-delegation]').length === `+strconv.Itoa(total-100))
	page2 := eval[[]string](b, rowsJS)
	assert.Equal(t, "101–"+strconv.Itoa(total), eval[string](b, `document.getElementById('delegations-page').textContent`))
	assert.True(t, eval[bool](b, `document.getElementById('delegations-older').disabled && !document.getElementById('delegations-newer').disabled`))
	var all []map[string]any
	c.do("GET", "/v1/delegations?limit=1000", nil).decode(t, &all)
	require.Len(t, all, total)
	var listed []string
	for _, d := range all {
		listed = append(listed, d["id"].(string))
	}
	assert.Equal(t, listed, append(append([]string(nil), page1...), page2...), "the two pages are the API's list, in order")
	b.do("newer", chromedp.Click(chromedp.CSS("#delegations-newer")))
	b.waitFor(5*time.Second, "the first page again", `document.querySelectorAll('#delegations-table tbody tr[data-delegation]').length === 100 && document.getElementById('delegations-newer').disabled`)
	assert.Equal(t, page1, eval[[]string](b, rowsJS))

	// An unknown delegation id: the API's error, no record.
	b.at("unknown delegation")
	b.goHash("#/delegations/00000000-0000-4000-8000-000000000000")
	b.waitFor(5*time.Second, "the error is shown", `document.getElementById('delegation-error').textContent.includes('not_found')`)
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll('#delegation-summary dd').length`))

	// 400 px wide: the detail pages fit.
	b.at("narrow")
	for _, hash := range []string{"#/agents/flaky", "#/delegations/" + firstID} {
		b.do("400 px", chromedp.EmulateViewport(400, 900))
		b.goHash(hash)
		section := "agent"
		if strings.HasPrefix(hash, "#/delegations/") {
			section = "delegation"
		}
		b.waitFor(5*time.Second, hash+" at 400 px", `!document.getElementById(`+js(section)+`).hidden && document.querySelector('#`+section+` dl.facts dd') !== null`)
		wide := eval[[]string](b, `[...document.querySelectorAll('body *')].filter((e) => e.getClientRects().length > 0 && e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5).map((e) => e.tagName + '#' + e.id + '.' + e.className)`)
		assert.Empty(t, wide, "elements wider than the 400 px screen on %s", hash)
		b.screenshot(dir, "dashboard-"+section+"-400.png", true)
	}

	time.Sleep(300 * time.Millisecond) // the last messages arrive
	// Nothing went wrong in the page: the only console entry allowed is
	// the browser's note of the unknown delegation's 404.
	assert.Empty(t, b.problems(func(phase string, m chromedp.ConsoleMessage) bool {
		return phase == "unknown delegation" && m.Source == "network" && strings.Contains(m.Text, "404")
	}), "console errors, warnings or page exceptions")
}
