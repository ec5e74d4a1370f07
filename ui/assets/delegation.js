// The delegation page (#/delegations/{id}): GET /v1/delegations/{id} —
// its status, timing, attempts, error (code and message), the chain it is
// part of (the calling agent, the target, the depth), its task and
// result — reloaded when the event stream says it finished.
import {getJSON} from './api.js';
import {$, badge, el, guard, time} from './app.js';
import {agentLink} from './agent.js';

let current = '';
let loading = null;
let again = false;

// delegationHref is the page of the delegation id.
export function delegationHref(id) {
  return `#/delegations/${encodeURIComponent(id)}`;
}

// fact appends a term and its description to a <dl>; key names the
// description (data-fact), for tests and styles.
function fact(dl, term, value, key) {
  const dd = el('dd', {attrs: {'data-fact': key}});
  if (value instanceof Node) {
    dd.append(value);
  } else {
    dd.textContent = value === undefined || value === null || value === '' ? '—' : String(value);
  }
  dl.append(el('dt', {text: term}), dd);
}

// clock is an absolute time, with its age on a second line.
function clock(iso) {
  if (!iso) {
    return el('span', {text: '—'});
  }
  const d = new Date(iso);
  return el('span', {},
    el('time', {text: d.toLocaleString(), attrs: {datetime: iso}}),
    el('span', {cls: 'until'}, time(iso)));
}

// ms is a duration in milliseconds, readable.
function ms(n) {
  if (n < 1000) {
    return `${n} ms`;
  }
  if (n < 60000) {
    return `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
  }
  return `${Math.floor(n / 60000)} min ${Math.round((n % 60000) / 1000)} s`;
}

// showDelegation shows the page of the delegation id and loads it.
export function showDelegation(id) {
  if (id !== current) {
    current = id;
    $('delegation-title').textContent = `Delegation ${id.slice(0, 8)}`;
    for (const part of ['delegation-summary', 'delegation-timing', 'delegation-outcome', 'delegation-chain']) {
      $(part).replaceChildren();
    }
    $('delegation-task').textContent = '';
    $('delegation-result').textContent = '';
    $('delegation-result-part').hidden = true;
  }
  document.title = `${id.slice(0, 8)} · Delegations · agentmesh`;
  return loadDelegation();
}

function loadDelegation() {
  if (loading) {
    again = true;
    return loading;
  }
  loading = guard('delegation-error', async () => {
    const id = current;
    const d = await getJSON(`/v1/delegations/${encodeURIComponent(id)}`);
    if (id === current) {
      render(d);
    }
  }).finally(() => {
    loading = null;
    if (again) {
      again = false;
      loadDelegation();
    }
  });
  return loading;
}

function render(d) {
  const section = $('delegation');
  section.dataset.status = d.status;
  const summary = $('delegation-summary');
  summary.replaceChildren();
  fact(summary, 'Id', el('code', {text: d.id}), 'id');
  fact(summary, 'Status', badge(d.status), 'status');
  fact(summary, 'Target', agentLink(d.targetAgent), 'target');
  fact(summary, 'Mode', d.async ? 'async (the agent reports back)' : 'sync', 'mode');

  const timing = $('delegation-timing');
  timing.replaceChildren();
  fact(timing, 'Created', clock(d.createdAt), 'created');
  fact(timing, 'Last update', clock(d.updatedAt), 'updated');
  fact(timing, 'Finished', d.finishedAt ? clock(d.finishedAt) : (d.status === 'running' || d.status === 'pending' || d.status === 'accepted' ? 'not yet' : '—'), 'finished');
  fact(timing, 'Duration', ms(d.latencyMs), 'duration');
  if (d.deadline) {
    fact(timing, 'Deadline', clock(d.deadline), 'deadline');
  }

  const outcome = $('delegation-outcome');
  outcome.replaceChildren();
  fact(outcome, 'Attempts', String(d.attempts), 'attempts');
  fact(outcome, 'Error code', d.code ? el('code', {text: d.code}) : '—', 'code');
  fact(outcome, 'Error', d.error || '—', 'error');
  if (d.needsInput) {
    fact(outcome, 'Needs input', 'yes: the result is the agent’s question', 'needs-input');
  }
  if (d.owner) {
    fact(outcome, 'Replica', el('code', {text: d.owner}), 'owner');
  }

  // The chain: who asked, who was asked, how deep in a chain of
  // delegations this one is (1 is a direct call).
  const chain = $('delegation-chain');
  chain.replaceChildren();
  if (d.sourceAgent) {
    chain.append(el('li', {attrs: {'data-role': 'source'}}, agentLink(d.sourceAgent), el('span', {cls: 'until', text: 'caller'})));
  } else {
    chain.append(el('li', {attrs: {'data-role': 'source'}}, el('span', {text: 'an API client'}), el('span', {cls: 'until', text: 'caller'})));
  }
  chain.append(el('li', {attrs: {'data-role': 'target'}}, agentLink(d.targetAgent), el('span', {cls: 'until', text: 'target'})));
  $('delegation-depth').textContent = `Depth ${d.depth}: ${d.depth <= 1 ? 'called directly' : `${d.depth - 1} delegation${d.depth === 2 ? '' : 's'} above this one`}.`;

  $('delegation-task').textContent = d.task;
  const result = d.result !== undefined ? d.result : (d.response ? d.response : undefined);
  $('delegation-result-part').hidden = result === undefined;
  if (result !== undefined) {
    $('delegation-result').textContent = typeof result === 'string' ? result : JSON.stringify(result, null, 2);
  }
}

// delegationEvent reloads the page shown when its delegation finished.
export function delegationEvent(ev) {
  if ($('delegation').hidden || !current) {
    return;
  }
  if (ev.type === 'reset' || (ev.type === 'delegation.finished' && ev.data && ev.data.id === current)) {
    loadDelegation();
  }
}
