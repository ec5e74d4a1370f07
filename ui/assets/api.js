// The dashboard's access to the agentmesh HTTP API: the token (kept in
// this tab's sessionStorage only), authenticated requests, and the event
// stream of GET /v1/events read through fetch, since the browser's own
// SSE client cannot send an Authorization header.

const tokenKey = 'agentmesh.token';

export function token() {
  return sessionStorage.getItem(tokenKey) || '';
}

export function setToken(t) {
  if (t) {
    sessionStorage.setItem(tokenKey, t);
  } else {
    sessionStorage.removeItem(tokenKey);
  }
}

// ApiError is an answer of the API other than 2xx: its status, and the
// code and message of its JSON error body.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

async function failure(res) {
  let code = '';
  let msg = res.statusText || `HTTP ${res.status}`;
  try {
    const body = await res.json();
    code = body.code || '';
    msg = body.error || msg;
  } catch {
    // not JSON: keep the status text
  }
  return new ApiError(res.status, code, msg);
}

// relative keeps the path and query of a URL the API returned (a Link
// header is absolute, with the server's public URL, which may not be the
// origin this page came from).
function relative(u) {
  const url = new URL(u, location.href);
  return url.pathname + url.search;
}

// request sends an authenticated request and returns the response; a
// status other than 2xx (and than those in accept) is thrown as an ApiError.
export async function request(path, {tok = token(), accept = [], signal} = {}) {
  const res = await fetch(relative(path), {
    headers: {Authorization: `Bearer ${tok}`, Accept: 'application/json'},
    cache: 'no-store',
    credentials: 'omit',
    signal,
  });
  if (!res.ok && !accept.includes(res.status)) {
    throw await failure(res);
  }
  return res;
}

// getJSON returns the decoded body of GET path.
export async function getJSON(path, opts) {
  const res = await request(path, opts);
  return res.json();
}

// nextLink is the URL of a Link header's rel="next", or ''.
function nextLink(res) {
  const link = res.headers.get('Link') || '';
  const m = /<([^>]+)>\s*;\s*rel="next"/.exec(link);
  return m ? m[1] : '';
}

// getAll follows the Link headers of a list, up to max items.
export async function getAll(path, max = 10000) {
  const items = [];
  let next = path;
  while (next && items.length < max) {
    const res = await request(next);
    const page = await res.json();
    items.push(...page);
    next = page.length > 0 ? nextLink(res) : '';
  }
  return items;
}

// follow reads GET /v1/events until stop() is called, calling onEvent with
// {id, type, data} for each event and onState with true or false as the
// stream opens or drops. It reconnects with Last-Event-ID after a drop,
// waiting longer each time (1 s, 2 s, … 15 s). A 401 calls onDenied and
// stops.
export function follow({onEvent, onState, onDenied}) {
  let stopped = false;
  let ctrl = null;
  let last = '';
  let wait = 1000;

  const dispatch = (ev) => {
    if (ev.id) {
      last = ev.id;
    }
    if (!ev.type) {
      return;
    }
    let data = {};
    try {
      data = ev.data ? JSON.parse(ev.data) : {};
    } catch {
      // keep {}
    }
    onEvent({id: ev.id, type: ev.type, data});
  };

  const readStream = async (res) => {
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = {};
    for (;;) {
      const {value, done} = await reader.read();
      if (done) {
        return;
      }
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line === '') {
          dispatch(ev);
          ev = {};
          continue;
        }
        if (line.startsWith(':')) {
          continue; // a heartbeat
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v.startsWith(' ')) {
          v = v.slice(1);
        }
        if (field === 'id') {
          ev.id = v;
        } else if (field === 'event') {
          ev.type = v;
        } else if (field === 'data') {
          ev.data = ev.data === undefined ? v : `${ev.data}\n${v}`;
        }
      }
    }
  };

  const run = async () => {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const headers = {Authorization: `Bearer ${token()}`, Accept: 'text/event-stream'};
        if (last) {
          headers['Last-Event-ID'] = last;
        }
        const res = await fetch('/v1/events', {headers, cache: 'no-store', credentials: 'omit', signal: ctrl.signal});
        if (res.status === 401) {
          stopped = true;
          onState(false);
          onDenied();
          return;
        }
        if (res.ok) {
          wait = 1000;
          onState(true);
          await readStream(res);
        }
      } catch {
        // a dropped connection or stop(): reconnect unless stopped
      }
      if (stopped) {
        return;
      }
      onState(false);
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 15000);
    }
  };
  run();
  return () => {
    stopped = true;
    if (ctrl) {
      ctrl.abort();
    }
  };
}
