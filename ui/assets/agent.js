// The agent page (#/agents/{name}): the record as the API returns it
// (never its credential's token), its circuit breaker now and its recent
// transitions (GET /v1/agents/{name}/breaker), and the delegations sent to
// it (GET /v1/delegations?target=).
import {ApiError, getJSON} from './api.js';
import {$, badge, cell, el, fill, guard, time} from './app.js';

// recentLimit is how many of the agent's delegations the page lists.
const recentLimit = 20;

let current = '';
let loading = null;
let again = false;

// agentHref is the page of the agent name.
export function agentHref(name) {
  return `#/agents/${encodeURIComponent(name)}`;
}

// agentLink is a link to the page of the agent name.
export function agentLink(name, content) {
  return el('a', {attrs: {href: agentHref(name)}}, content || name);
}

// fact appends a term and its description to a <dl>.
function fact(dl, term, value) {
  const dd = el('dd');
  if (value instanceof Node) {
    dd.append(value);
  } else {
    dd.textContent = value === undefined || value === null || value === '' ? '—' : String(value);
  }
  dl.append(el('dt', {text: term}), dd);
}

// showAgent shows the page of the agent name and loads it.
export function showAgent(name) {
  if (name !== current) {
    current = name;
    $('agent-title').textContent = `Agent ${name}`;
    for (const id of ['agent-record', 'agent-breaker']) {
      $(id).replaceChildren();
    }
    for (const id of ['agent-breaker-table', 'agent-delegations-table']) {
      $(id).tBodies[0].replaceChildren();
    }
    $('agent-json').textContent = '';
    $('agent-breaker-note').textContent = '';
    $('agent-delegations-more').replaceChildren();
  }
  document.title = `${name} · Agents · agentmesh`;
  return loadAgent();
}

// loadAgent reads the three parts of the page: one load at a time, and
// one more after it when asked for during a load.
function loadAgent() {
  if (loading) {
    again = true;
    return loading;
  }
  loading = guard('agent-error', async () => {
    const name = current;
    const path = encodeURIComponent(name);
    const [agent, brk, recs] = await Promise.all([
      getJSON(`/v1/agents/${path}`),
      getJSON(`/v1/agents/${path}/breaker`).catch((err) => {
        if (err instanceof ApiError && err.status === 404 && err.code === 'not_found') {
          return null; // no history on this server (an unknown agent fails the record's read)
        }
        throw err;
      }),
      getJSON(`/v1/delegations?${new URLSearchParams({target: name, limit: String(recentLimit)})}`),
    ]);
    if (name !== current) {
      return;
    }
    renderRecord(agent);
    renderBreaker(brk);
    renderDelegations(recs);
  }).finally(() => {
    loading = null;
    if (again) {
      again = false;
      loadAgent();
    }
  });
  return loading;
}

function renderRecord(a) {
  const dl = $('agent-record');
  dl.replaceChildren();
  const desc = el('span', {text: a.description || '—'});
  fact(dl, 'Name', el('strong', {text: a.name}));
  if (a.displayName && a.displayName !== a.name) {
    fact(dl, 'Display name', a.displayName);
  }
  fact(dl, 'Description', desc);
  fact(dl, 'Health', badge(a.stale ? 'stale' : 'fresh'));
  fact(dl, 'Last seen', time(a.lastSeen));
  fact(dl, 'Registered', time(a.registeredAt));
  fact(dl, 'Protocol', a.protocol || 'http');
  fact(dl, 'Endpoint', el('code', {text: a.endpoint || '—'}));
  fact(dl, 'Source', a.source || 'api');
  fact(dl, 'Owner', a.owner);
  const caps = el('span');
  for (const c of a.capabilities || []) {
    caps.append(el('span', {cls: 'term', text: c}));
  }
  fact(dl, 'Capabilities', caps);
  const labels = el('span');
  for (const [k, v] of Object.entries(a.labels || {})) {
    labels.append(el('span', {cls: 'label', text: `${k}=${v}`}));
  }
  fact(dl, 'Labels', labels.childElementCount ? labels : '—');
  // The API never returns the token; the page drops it too, should a
  // server ever send one.
  const shown = structuredClone(a);
  if (shown.auth) {
    delete shown.auth.token;
    fact(dl, 'Authentication', `${shown.auth.type}${shown.auth.headerName ? ` (${shown.auth.headerName})` : ''}`);
  }
  $('agent-json').textContent = JSON.stringify(shown, null, 2);
}

function renderBreaker(b) {
  const dl = $('agent-breaker');
  const table = $('agent-breaker-table');
  const note = $('agent-breaker-note');
  dl.replaceChildren();
  if (!b) {
    fill(table, [], 'This server keeps no breaker history.');
    note.textContent = '';
    return;
  }
  const c = b.current;
  fact(dl, 'State', el('span', {cls: 'breaker', attrs: {'data-state': c.state}}, badge(c.state)));
  fact(dl, 'Since', time(c.since));
  if (c.state === 'open' && c.openUntil) {
    const until = new Date(c.openUntil);
    fact(dl, 'Open until', el('time', {text: until.toLocaleTimeString(), attrs: {datetime: c.openUntil, title: until.toISOString()}}));
  }
  fact(dl, 'Backoff', `×${c.multiplier}`);
  if (c.state === 'closed') {
    fact(dl, 'Consecutive failures', String(c.failures || 0));
  }
  const rows = b.transitions.map((tr) => el('tr', {attrs: {'data-from': tr.from, 'data-to': tr.to}},
    cell(table, 0, time(tr.at), 'at'),
    cell(table, 1, badge(tr.from), 'from'),
    cell(table, 2, badge(tr.to), 'to')));
  fill(table, rows, 'No transition since this server started.');
  note.textContent = b.dropped > 0 ?
    `${b.dropped} older transition${b.dropped === 1 ? ' is' : 's are'} no longer kept.` :
    'Transitions this server saw since it started, newest first.';
}

function renderDelegations(recs) {
  const table = $('agent-delegations-table');
  const rows = recs.map((d) => el('tr', {attrs: {'data-delegation': d.id, 'data-status': d.status}},
    cell(table, 0, el('a', {attrs: {href: `#/delegations/${encodeURIComponent(d.id)}`, title: d.id}}, el('code', {text: d.id.slice(0, 8)})), 'id'),
    cell(table, 1, badge(d.status), 'status'),
    cell(table, 2, String(d.attempts), 'num'),
    cell(table, 3, `${d.latencyMs} ms`, 'num'),
    cell(table, 4, time(d.createdAt)),
    cell(table, 5, d.error ? `${d.code ? `${d.code}: ` : ''}${d.error}` : '—', 'err')));
  fill(table, rows, 'No delegation was sent to this agent.');
  const more = $('agent-delegations-more');
  more.replaceChildren();
  if (recs.length === recentLimit) {
    more.append(`The ${recentLimit} newest are shown.`);
  }
}

// agentEvent reloads the page shown when an event concerns its agent.
export function agentEvent(ev) {
  if ($('agent').hidden || !current) {
    return;
  }
  const d = ev.data || {};
  if (ev.type === 'reset' ||
      (ev.type.startsWith('agent.') && d.name === current) ||
      (ev.type === 'breaker.changed' && d.name === current) ||
      (ev.type === 'delegation.finished' && d.targetAgent === current)) {
    loadAgent();
  }
}
