// The Routing page (#/routing): the router's recent decisions (GET
// /v1/routing/decisions), kept current by the routing.decided events; the
// number of active sessions (GET /v1/stats/sessions); and, for the admin
// scope, one session's turns (GET /v1/sessions/{id}). A message's text is
// shown only to the admin scope: the API leaves it out for every other
// token, and the events never carry it. The page knows it serves an admin
// by the texts the API returns (it asks no route that would refuse).
import {ApiError, getJSON, request} from './api.js';
import {$, badge, cell, el, fill, guard, time} from './app.js';

// shown is how many decisions the table lists.
const shown = 100;

let decisions = [];
let visible = false;
let canReadSessions = false;
let reloadTimer = 0;

// showRouting shows the page and loads it.
export function showRouting() {
  visible = true;
  document.title = 'Routing · agentmesh';
  return loadAll();
}

// hideRouting is called when another page is shown.
export function hideRouting() {
  visible = false;
}

// resetRouting forgets what the page shows (signing out): the texts an
// admin saw must not stay in the page.
export function resetRouting() {
  visible = false;
  canReadSessions = false;
  decisions = [];
  $('decisions-table').tBodies[0].replaceChildren();
  $('session-turns-table').tBodies[0].replaceChildren();
  $('session-view').hidden = true;
  $('session-id').value = '';
  $('session-summary').textContent = '';
  $('routing-sessions').textContent = '';
  $('decisions-count').textContent = '';
}

// routingEvent takes an event of the stream: a decision is shown at once
// (without its text), then the list and the sessions count are reloaded
// a moment later (the admin's texts come from the list; a burst of
// decisions, one reload).
export function routingEvent(ev) {
  if (ev.type !== 'routing.decided' && ev.type !== 'reset') {
    return;
  }
  if (ev.type === 'routing.decided' && ev.data && ev.data.request_id) {
    decisions = [ev.data, ...decisions.filter((d) => d.request_id !== ev.data.request_id)].slice(0, shown);
    if (visible) {
      render();
    }
  }
  if (!visible) {
    return;
  }
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(loadAll, 300);
}

// loadAll reloads the count, then the decisions: one after the other,
// since both report on the page's one error line.
async function loadAll() {
  await loadSessions();
  await loadDecisions();
}

async function loadDecisions() {
  await guard('routing-error', async () => {
    try {
      decisions = await getJSON(`/v1/routing/decisions?limit=${shown}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        throw new ApiError(404, 'not_found', 'Routing is off on this server (agentmesh serve --routing=false): it keeps no decisions.');
      }
      throw err;
    }
    // Only the admin scope gets the texts, and with them the sessions.
    canReadSessions = decisions.some((d) => d.text !== undefined);
    $('session-view').hidden = !canReadSessions;
    render();
  });
}

async function loadSessions() {
  await guard('routing-error', async () => {
    const res = await request('/v1/stats/sessions', {accept: [404]});
    $('routing-sessions').textContent = res.status === 404 ? '—' : String((await res.json()).active);
  });
}

function confidence(c) {
  return typeof c === 'number' ? c.toFixed(2) : '—';
}

function render() {
  const table = $('decisions-table');
  const rows = decisions.map((d) => {
    const input = el('span', {},
      el('span', {text: `${d.input_len} chars`}),
      el('code', {cls: 'until', text: d.input_sha256 || '—', attrs: {title: 'first 8 bytes of the SHA-256 of the message'}}));
    let session = el('span', {text: '—'});
    if (d.session_id) {
      session = canReadSessions
        ? el('button', {cls: 'plain link', text: d.session_id.slice(0, 8), attrs: {type: 'button', 'data-session': d.session_id, 'aria-label': `Show the turns of session ${d.session_id}`}})
        : el('code', {text: d.session_id.slice(0, 8), attrs: {title: d.session_id}});
    }
    const text = d.text !== undefined
      ? el('span', {cls: 'message', text: d.text_truncated ? `${d.text} … (${d.input_len} chars in all)` : d.text})
      : el('span', {cls: 'hint', text: canReadSessions && d.input_len > 0 ? '…' : 'admin only'});
    return el('tr', {attrs: {'data-request': d.request_id, 'data-decision': d.decision || 'failed'}},
      cell(table, 0, time(d.time)),
      cell(table, 1, badge(d.decision || 'failed'), 'decision'),
      cell(table, 2, d.error ? `${d.reason || '—'} (${d.error})` : (d.reason || '—'), 'reason'),
      cell(table, 3, d.agent || '—', 'agent'),
      cell(table, 4, confidence(d.confidence), 'num confidence'),
      cell(table, 5, input, 'input'),
      cell(table, 6, session, 'session'),
      cell(table, 7, text, 'text'));
  });
  fill(table, rows, 'No message was routed since the server started.');
  const n = decisions.length;
  $('decisions-count').textContent = `${n}${n === shown ? '+' : ''} decision${n === 1 ? '' : 's'}`;
}

// showSession lists the turns of session id.
async function showSession(id) {
  const table = $('session-turns-table');
  $('session-id').value = id;
  await guard('session-error', async () => {
    let s;
    try {
      s = await getJSON(`/v1/sessions/${encodeURIComponent(id)}`);
    } catch (err) {
      if (err instanceof ApiError && (err.status === 404 || err.status === 400)) {
        table.tBodies[0].replaceChildren();
        $('session-summary').textContent = '';
        throw new ApiError(err.status, err.code, err.status === 404 ? 'No such session (or it expired).' : err.message);
      }
      throw err;
    }
    $('session-summary').textContent = `Session ${s.session_id}: ${s.status}, user ${s.user_id || '—'}, agent ${s.active_agent || '—'}, ${s.turn_history.length} turn${s.turn_history.length === 1 ? '' : 's'}`;
    const rows = s.turn_history.map((t) => el('tr', {attrs: {'data-role': t.role}},
      cell(table, 0, time(t.timestamp)),
      cell(table, 1, badge(t.role), 'role'),
      cell(table, 2, t.agent || '—', 'agent'),
      cell(table, 3, el('span', {cls: 'message', text: t.content}), 'text')));
    fill(table, rows, 'The session has no turn.');
  });
}

// init wires the page's controls. It runs as the module is evaluated,
// before app.js (which imports this module) has defined its helpers: it
// uses none of them.
function init() {
  const byId = (id) => document.getElementById(id);
  byId('decisions-table').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-session]');
    if (b) {
      showSession(b.dataset.session);
      byId('session-turns-title').focus();
    }
  });
  byId('session-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = byId('session-id').value.trim();
    if (id) {
      showSession(id);
    }
  });
}

init();
