// The Charts page (#/charts): the delegations that ended in each minute of
// the last hour, by status, and their p50 and p99 latencies (GET
// /v1/stats/delegations), drawn as inline SVG built here (no library, no
// external service). Each chart has a text alternative (its <title> and
// <desc>) and the numbers are in a table below. The page reloads a moment
// after a delegation ends (the delegation.finished events) and every 30 s
// while it is shown, so that the minutes move on.
import {getJSON} from './api.js';
import {$, cell, el, fill, guard} from './app.js';

const svgNS = 'http://www.w3.org/2000/svg';

// statuses are the final statuses, in the order bars stack them (bottom
// first).
const statuses = ['completed', 'failed', 'timeout', 'canceled'];

// The charts' coordinate system (the SVG scales to its box).
const W = 720;
const H = 220;
const M = {left: 48, right: 12, top: 12, bottom: 26};

let visible = false;
let timer = 0;
let eventTimer = 0;
let minutes = [];

// showCharts shows the page and loads it.
export function showCharts() {
  visible = true;
  document.title = 'Charts · agentmesh';
  clearInterval(timer);
  timer = setInterval(() => {
    if (visible) {
      load();
    }
  }, 30000);
  return load();
}

// hideCharts is called when another page is shown.
export function hideCharts() {
  visible = false;
  clearInterval(timer);
}

// chartsEvent takes an event of the stream: an ended delegation reloads
// the charts a moment later (several in a burst, once).
export function chartsEvent(ev) {
  if (!visible || (ev.type !== 'delegation.finished' && ev.type !== 'reset')) {
    return;
  }
  clearTimeout(eventTimer);
  eventTimer = setTimeout(load, 1000);
}

async function load() {
  await guard('charts-error', async () => {
    const stats = await getJSON('/v1/stats/delegations');
    minutes = stats.minutes || [];
    render();
  });
}

function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    e.setAttribute(k, String(v));
  }
  e.append(...children);
  return e;
}

function hhmm(iso) {
  return new Date(iso).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'});
}

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (v <= 0) {
    return 1;
  }
  const p = 10 ** Math.floor(Math.log10(v));
  for (const f of [1, 2, 5, 10]) {
    if (f * p >= v) {
      return f * p;
    }
  }
  return 10 * p;
}

// frame draws the axes of a chart whose values go up to top: horizontal
// grid lines with their labels, and a time label every 10 minutes.
function frame(chart, top, unit) {
  const plotH = H - M.top - M.bottom;
  const g = svg('g', {class: 'axes', 'aria-hidden': 'true'});
  for (const f of [0, 0.5, 1]) {
    const y = M.top + plotH * (1 - f);
    g.append(svg('line', {x1: M.left, x2: W - M.right, y1: y, y2: y, class: f === 0 ? 'axis' : 'grid'}));
    const label = svg('text', {x: M.left - 6, y: y + 4, 'text-anchor': 'end'});
    label.textContent = `${Math.round(top * f * 10) / 10}${unit}`;
    g.append(label);
  }
  const step = (W - M.left - M.right) / minutes.length;
  minutes.forEach((m, i) => {
    const last = i === minutes.length - 1;
    if ((i % 10 === 0 && i < minutes.length - 5) || last) {
      const t = last
        ? svg('text', {x: W - M.right, y: H - 8, 'text-anchor': 'end'})
        : svg('text', {x: M.left + step * (i + 0.5), y: H - 8, 'text-anchor': 'middle'});
      t.textContent = hhmm(m.start);
      g.append(t);
    }
  });
  chart.append(g);
  return {step, plotH};
}

// figure is an SVG chart with its accessible name and description.
function figure(id, title, desc) {
  const chart = svg('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': `${id}-t ${id}-d`, class: 'chart', id, preserveAspectRatio: 'xMidYMid meet'});
  const t = svg('title', {id: `${id}-t`});
  t.textContent = title;
  const d = svg('desc', {id: `${id}-d`});
  d.textContent = desc;
  chart.append(t, d);
  return chart;
}

function countsChart(total, byStatus, busiest) {
  const desc = total === 0
    ? 'No delegation ended in the last hour.'
    : `${total} delegation${total === 1 ? '' : 's'} ended in the last hour: ${statuses.map((s) => `${byStatus[s]} ${s}`).join(', ')}. ` +
      `The busiest minute was ${hhmm(busiest.start)} with ${busiest.total}.`;
  const chart = figure('chart-counts', 'Delegations per minute by status, last hour', desc);
  const top = niceMax(Math.max(...minutes.map((m) => m.total), 1));
  const {step, plotH} = frame(chart, top, '');
  const bars = svg('g', {class: 'bars'});
  minutes.forEach((m, i) => {
    let y = M.top + plotH;
    for (const s of statuses) {
      const n = m[s] || 0;
      if (n === 0) {
        continue;
      }
      const h = (n / top) * plotH;
      y -= h;
      const r = svg('rect', {x: M.left + step * i + step * 0.1, y, width: step * 0.8, height: h, class: `bar ${s}`, 'data-minute': m.start, 'data-status': s});
      const tip = svg('title');
      tip.textContent = `${hhmm(m.start)}: ${n} ${s}`;
      r.append(tip);
      bars.append(r);
    }
  });
  chart.append(bars);
  return chart;
}

function latencyChart(busy) {
  let desc = 'No latency to show: no delegation ended in the last hour.';
  if (busy.length > 0) {
    const p50s = busy.map((m) => m.p50_ms);
    const worst = busy.reduce((a, b) => (b.p99_ms > a.p99_ms ? b : a));
    desc = `Over the ${busy.length} minute${busy.length === 1 ? '' : 's'} with delegations, the median latency ranged from ${Math.min(...p50s)} to ${Math.max(...p50s)} ms; ` +
      `the highest p99 was ${worst.p99_ms} ms, at ${hhmm(worst.start)}.`;
  }
  const chart = figure('chart-latency', 'p50 and p99 latency per minute, last hour', desc);
  const top = niceMax(Math.max(...busy.map((m) => m.p99_ms), 1));
  const {step, plotH} = frame(chart, top, ' ms');
  const x = (i) => M.left + step * (i + 0.5);
  const y = (v) => M.top + plotH * (1 - v / top);
  for (const [key, cls] of [['p99_ms', 'p99'], ['p50_ms', 'p50']]) {
    const g = svg('g', {class: `series ${cls}`});
    const pts = [];
    minutes.forEach((m, i) => {
      if (m.total === 0) {
        return;
      }
      pts.push(`${x(i).toFixed(1)},${y(m[key]).toFixed(1)}`);
      // p99 under p50, larger, so both show when they are equal.
      const dot = svg('circle', {cx: x(i), cy: y(m[key]), r: cls === 'p99' ? 5 : 3, 'data-minute': m.start});
      const tip = svg('title');
      tip.textContent = `${hhmm(m.start)}: ${cls} ${m[key]} ms`;
      dot.append(tip);
      g.append(dot);
    });
    if (pts.length > 1) {
      g.prepend(svg('polyline', {points: pts.join(' ')}));
    }
    chart.append(g);
  }
  return chart;
}

function render() {
  const byStatus = Object.fromEntries(statuses.map((s) => [s, 0]));
  let total = 0;
  let busiest = minutes[0] || {total: 0};
  for (const m of minutes) {
    for (const s of statuses) {
      byStatus[s] += m[s] || 0;
    }
    total += m.total;
    if (m.total > busiest.total) {
      busiest = m;
    }
  }
  const busy = minutes.filter((m) => m.total > 0);
  $('chart-counts-box').replaceChildren(countsChart(total, byStatus, busiest));
  $('chart-latency-box').replaceChildren(latencyChart(busy));
  $('charts-summary').textContent = `${total} delegation${total === 1 ? '' : 's'} in the last hour`;

  const table = $('charts-table');
  const rows = busy.slice().reverse().map((m) => el('tr', {attrs: {'data-minute': m.start}},
    cell(table, 0, el('time', {text: hhmm(m.start), attrs: {datetime: m.start}})),
    cell(table, 1, String(m.completed), 'num'),
    cell(table, 2, String(m.failed), 'num'),
    cell(table, 3, String(m.timeout), 'num'),
    cell(table, 4, String(m.canceled), 'num'),
    cell(table, 5, `${m.p50_ms} ms`, 'num'),
    cell(table, 6, `${m.p99_ms} ms`, 'num')));
  fill(table, rows, 'No delegation ended in the last hour.');
}
