// The agentmesh dashboard: a login form, the Agents page (with discovery
// search) and the Delegations page, kept current by the event stream.
import {ApiError, follow, getAll, getJSON, request, setToken, token} from './api.js';
import {agentEvent, agentLink, showAgent} from './agent.js';
import {delegationEvent, delegationHref, showDelegation} from './delegation.js';
import {chartsEvent, hideCharts, showCharts} from './charts.js';
import {hideRouting, resetRouting, routingEvent, showRouting} from './routing.js';

// The helpers below are exported for the pages' own modules (agent.js,
// delegation.js), which import them back: they use them only once the
// page runs, so the cycle is harmless.

export const $ = (id) => document.getElementById(id);

// el builds an element with text content (never HTML: what the API
// returns is shown as text).
export function el(tag, {text, cls, attrs} = {}, ...children) {
  const e = document.createElement(tag);
  if (text !== undefined) {
    e.textContent = text;
  }
  if (cls) {
    e.className = cls;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

// cell is a <td> labelled with its column's header, for the narrow layout.
export function cell(table, i, content, cls) {
  const label = table.tHead.rows[0].cells[i].textContent;
  const td = el('td', {cls, attrs: {'data-label': label}});
  if (content instanceof Node) {
    td.append(content);
  } else {
    td.textContent = content;
  }
  return td;
}

export function fill(table, rows, empty) {
  const body = table.tBodies[0];
  if (rows.length === 0) {
    const td = el('td', {text: empty, attrs: {colspan: String(table.tHead.rows[0].cells.length)}});
    body.replaceChildren(el('tr', {cls: 'empty'}, td));
    return;
  }
  body.replaceChildren(...rows);
}

export function time(iso) {
  if (!iso) {
    return el('span', {text: '—'});
  }
  const d = new Date(iso);
  const secs = Math.round((Date.now() - d.getTime()) / 1000);
  let ago;
  if (secs < 60) {
    ago = `${Math.max(secs, 0)} s ago`;
  } else if (secs < 3600) {
    ago = `${Math.round(secs / 60)} min ago`;
  } else if (secs < 86400) {
    ago = `${Math.round(secs / 3600)} h ago`;
  } else {
    ago = d.toLocaleDateString();
  }
  return el('time', {text: ago, attrs: {datetime: iso, title: d.toISOString()}});
}

export function badge(word) {
  return el('span', {text: word, cls: `badge ${word}`});
}

// ---- state ----

let breakers = {};
let stopEvents = null;
const state = {agents: [], page: 'agents', offset: 0};

// ---- login ----

function showLogin(message) {
  setToken('');
  if (stopEvents) {
    stopEvents();
    stopEvents = null;
  }
  state.agents = [];
  breakers = {};
  resetRouting();
  hideCharts();
  for (const t of ['agents-table', 'results-table', 'delegations-table']) {
    $(t).tBodies[0].replaceChildren();
  }
  $('results').hidden = true;
  for (const p of pages) {
    $(p).hidden = true;
  }
  $('nav').hidden = true;
  $('logout').hidden = true;
  $('live').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('token').value = '';
  $('token').focus();
}

async function signIn(ev) {
  ev.preventDefault();
  const tok = $('token').value.trim();
  const msg = $('login-error');
  msg.textContent = '';
  if (!tok) {
    msg.textContent = 'Enter a token.';
    return;
  }
  try {
    await request('/v1/agents?limit=1', {tok});
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      msg.textContent = 'This token was refused: it is not a valid token of this mesh.';
    } else if (err instanceof ApiError && err.status === 403) {
      msg.textContent = 'This token lacks the read scope the dashboard needs.';
    } else if (err instanceof ApiError) {
      msg.textContent = `The mesh refused the sign-in: ${err.message}`;
    } else {
      msg.textContent = 'The mesh could not be reached.';
    }
    $('token').select();
    return;
  }
  $('token').value = '';
  setToken(tok);
  start();
}

// start shows the pages once a token is known.
function start() {
  $('login').hidden = true;
  $('nav').hidden = false;
  $('logout').hidden = false;
  $('live').hidden = false;
  setLive(false);
  stopEvents = follow({
    onEvent,
    onState: setLive,
    onDenied: () => showLogin('The token is no longer accepted. Sign in again.'),
  });
  route(true);
}

function setLive(on) {
  const live = $('live');
  live.textContent = on ? 'Live' : 'Connecting…';
  live.classList.toggle('on', on);
}

// ---- routing between pages ----

// pages are the sections of the pages, by name: the lists, then the
// detail pages of one agent (#/agents/{name}) or delegation
// (#/delegations/{id}).
const pages = ['agents', 'delegations', 'agent', 'delegation', 'routing', 'charts'];

// pageOf returns the page a location hash names, and for a detail page
// the agent's name or the delegation's id.
function pageOf(hash) {
  const m = /^#\/(agents|delegations)\/([^/]+)$/.exec(hash);
  if (m) {
    try {
      return {page: m[1] === 'agents' ? 'agent' : 'delegation', key: decodeURIComponent(m[2])};
    } catch {
      // a malformed escape: the list
    }
  }
  if (hash === '#/routing' || hash === '#/charts') {
    return {page: hash.slice(2), key: ''};
  }
  return {page: hash.startsWith('#/delegations') ? 'delegations' : 'agents', key: ''};
}

function route(focus) {
  if (!token()) {
    return;
  }
  const {page, key} = pageOf(location.hash);
  state.page = page;
  for (const p of pages) {
    $(p).hidden = p !== page;
  }
  // The list a detail page belongs to stays marked in the navigation.
  const list = page === 'agent' ? 'agents' : page === 'delegation' ? 'delegations' : page;
  if (page !== 'routing') {
    hideRouting();
  }
  if (page !== 'charts') {
    hideCharts();
  }
  for (const p of ['agents', 'delegations', 'routing', 'charts']) {
    const a = $(`nav-${p}`);
    if (p === list) {
      a.setAttribute('aria-current', p === page ? 'page' : 'true');
    } else {
      a.removeAttribute('aria-current');
    }
  }
  if (page === 'agents') {
    document.title = 'Agents · agentmesh';
    loadAgents();
  } else if (page === 'delegations') {
    document.title = 'Delegations · agentmesh';
    loadDelegations();
  } else if (page === 'routing') {
    showRouting();
  } else if (page === 'charts') {
    showCharts();
  } else if (page === 'agent') {
    showAgent(key);
  } else {
    showDelegation(key);
  }
  if (focus) {
    $(`${page}-title`).focus();
  }
}

// guard runs a load, turning a 401 into the login form and other errors
// into the page's error line.
export async function guard(errId, fn) {
  try {
    await fn();
    $(errId).textContent = '';
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      showLogin('The token is no longer accepted. Sign in again.');
      return;
    }
    if (err instanceof DOMException && err.name === 'AbortError') {
      return;
    }
    $(errId).textContent = err instanceof ApiError ? `${err.message} (${err.code || err.status})` : 'The mesh could not be reached.';
  }
}

// ---- agents ----

async function loadAgents() {
  await guard('agents-error', async () => {
    const [agents, health] = await Promise.all([
      getAll('/v1/agents?limit=1000'),
      getJSON('/health/deep', {accept: [503]}),
    ]);
    state.agents = agents;
    breakers = health.breakers || {};
    renderAgents();
  });
}

function breakerCell(name) {
  const b = breakers[name];
  const s = b ? b.state : 'closed';
  const wrap = el('span', {cls: 'breaker', attrs: {'data-state': s}}, badge(s));
  if (s === 'open' && b.openUntil) {
    const until = new Date(b.openUntil);
    wrap.append(el('span', {cls: 'until', text: `until ${until.toLocaleTimeString()}`, attrs: {title: until.toISOString()}}));
  }
  return wrap;
}

function renderAgents() {
  const table = $('agents-table');
  const rows = state.agents.map((a) => {
    const labels = el('span');
    for (const [k, v] of Object.entries(a.labels || {})) {
      labels.append(el('span', {cls: 'label', text: `${k}=${v}`}));
    }
    const name = el('span', {}, el('strong', {}, agentLink(a.name)));
    if (a.description) {
      name.append(el('span', {cls: 'until', text: a.description}));
    }
    return el('tr', {attrs: {'data-agent': a.name}},
      cell(table, 0, name, 'name'),
      cell(table, 1, badge(a.stale ? 'stale' : 'fresh'), 'health'),
      cell(table, 2, breakerCell(a.name), 'breaker'),
      cell(table, 3, time(a.lastSeen), 'seen'),
      cell(table, 4, a.protocol || 'http', 'protocol'),
      cell(table, 5, a.source || 'api', 'source'),
      cell(table, 6, labels, 'labels'));
  });
  fill(table, rows, 'No agent is registered.');
  const n = state.agents.length;
  $('agents-count').textContent = `${n} agent${n === 1 ? '' : 's'}`;
}

// ---- search ----

let searchTimer = 0;
let searchCtrl = null;

function onSearch() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(search, 250);
}

async function search() {
  const q = $('search').value.trim();
  if (searchCtrl) {
    searchCtrl.abort();
  }
  if (!q) {
    $('results').hidden = true;
    $('search-status').textContent = '';
    return;
  }
  searchCtrl = new AbortController();
  const signal = searchCtrl.signal;
  await guard('agents-error', async () => {
    const params = new URLSearchParams({query: q, limit: '20', includeUnavailable: 'true'});
    const results = await getJSON(`/v1/discover?${params}`, {signal});
    const table = $('results-table');
    const rows = results.map((r, i) => el('tr', {attrs: {'data-agent': r.agent.name}},
      cell(table, 0, String(i + 1), 'num'),
      cell(table, 1, el('strong', {}, agentLink(r.agent.name)), 'name'),
      cell(table, 2, r.score.toFixed(3), 'num score'),
      cell(table, 3, `${Math.round(r.coverage * 100)} %`, 'num'),
      cell(table, 4, el('span', {}, ...(r.matchedTerms || []).map((t) => el('span', {cls: 'term', text: t}))), 'terms'),
      cell(table, 5, (r.matchedCapabilities || []).join(', ') || '—')));
    fill(table, rows, 'No agent matches.');
    $('results').hidden = false;
    $('search-status').textContent = `${results.length} match${results.length === 1 ? '' : 'es'} for “${q}”`;
  });
}

// ---- delegations ----

// pageSize is how many delegations a page of the list shows.
const pageSize = 100;

// turnPage moves the list by a page (+1 older, -1 newer).
function turnPage(dir) {
  state.offset = Math.max(0, state.offset + dir * pageSize);
  loadDelegations();
}

async function loadDelegations() {
  await guard('delegations-error', async () => {
    const status = $('status-filter').value;
    const params = new URLSearchParams({limit: String(pageSize)});
    if (status) {
      params.set('status', status);
    }
    if (state.offset > 0) {
      params.set('offset', String(state.offset));
    }
    const records = await getJSON(`/v1/delegations?${params}`);
    const table = $('delegations-table');
    const rows = records.map((d) => el('tr', {attrs: {'data-delegation': d.id, 'data-status': d.status}},
      cell(table, 0, el('a', {attrs: {href: delegationHref(d.id), title: d.id}}, el('code', {text: d.id.slice(0, 8)})), 'id'),
      cell(table, 1, agentLink(d.targetAgent), 'target'),
      cell(table, 2, badge(d.status), 'status'),
      cell(table, 3, String(d.attempts), 'num'),
      cell(table, 4, `${d.latencyMs} ms`, 'num'),
      cell(table, 5, time(d.createdAt)),
      cell(table, 6, d.error ? `${d.code ? `${d.code}: ` : ''}${d.error}` : '—', 'err')));
    fill(table, rows, status ? `No ${status} delegation.` : 'No delegation yet.');
    const n = records.length;
    $('delegations-count').textContent = `${n}${n === pageSize ? '+' : ''} delegation${n === 1 ? '' : 's'}`;
    // A full page means the API has a next one (its Link header).
    $('delegations-older').disabled = n < pageSize;
    $('delegations-newer').disabled = state.offset === 0;
    $('delegations-page').textContent = n === 0 && state.offset === 0 ? '' : `${state.offset + 1}–${state.offset + n}`;
  });
}

// ---- live updates ----

const pending = new Set();
let reloadTimer = 0;

// reload coalesces the reloads events ask for into one, 150 ms later.
function reload(what) {
  pending.add(what);
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(() => {
    if (pending.has('agents') && state.page === 'agents') {
      loadAgents();
      if ($('search').value.trim()) {
        search();
      }
    }
    if (pending.has('delegations') && state.page === 'delegations') {
      loadDelegations();
    }
    pending.clear();
  }, 150);
}

function onEvent(ev) {
  agentEvent(ev);
  delegationEvent(ev);
  routingEvent(ev);
  chartsEvent(ev);
  if (ev.type.startsWith('agent.') || ev.type === 'breaker.changed') {
    reload('agents');
  } else if (ev.type === 'delegation.finished') {
    reload('delegations');
    reload('agents'); // a breaker may have moved with it
  } else if (ev.type === 'reset') {
    reload('agents');
    reload('delegations');
  }
}

// ---- wiring ----

function init() {
  $('login-form').addEventListener('submit', signIn);
  $('logout').addEventListener('click', () => showLogin(''));
  $('search').addEventListener('input', onSearch);
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    clearTimeout(searchTimer);
    search();
  });
  $('filter-form').addEventListener('submit', (ev) => ev.preventDefault());
  $('status-filter').addEventListener('change', () => {
    state.offset = 0;
    loadDelegations();
  });
  $('delegations-older').addEventListener('click', () => turnPage(1));
  $('delegations-newer').addEventListener('click', () => turnPage(-1));
  window.addEventListener('hashchange', () => route(true));
  // Health and "last seen" age without events: refresh every 30 s.
  setInterval(() => {
    if (token() && state.page === 'agents') {
      loadAgents();
    }
  }, 30000);
  if (token()) {
    start();
  } else {
    showLogin('');
  }
}

init();
