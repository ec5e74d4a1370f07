// Shared helpers of the interop scripts: the agentmesh binary, a tiny HTTP
// agent implementing the POST /task contract of http agents
// (docs/AGENTS.md#the-http-protocol), child-process bookkeeping (children
// are killed even when a script fails), a transcript, and the MCP flow that
// mcp-stdio.mjs and mcp-http.mjs both run with the official TypeScript MCP
// SDK client.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

import { McpError } from '@modelcontextprotocol/sdk/types.js';

// ---------------------------------------------------------------- transcript

let scriptName = 'interop';

export function setScript(name) {
  scriptName = name;
}

export function log(...args) {
  console.log(`[${scriptName}]`, ...args);
}

// step runs one named check and logs it; a failure names the step.
export async function step(name, fn) {
  try {
    const v = await fn();
    log(`ok   ${name}`);
    return v;
  } catch (err) {
    log(`FAIL ${name}`);
    throw err;
  }
}

// ---------------------------------------------------------------- the binary

// binaryPath is the agentmesh binary: the first argument, else
// $AGENTMESH_BIN.
export function binaryPath() {
  const p = process.argv[2] || process.env.AGENTMESH_BIN;
  if (!p) {
    fail('usage: node <script> /path/to/agentmesh (or set AGENTMESH_BIN); interop/run.sh builds it');
  }
  const abs = path.resolve(p);
  if (!existsSync(abs)) fail(`agentmesh binary not found: ${abs}`);
  return abs;
}

// ---------------------------------------------------------------- cleanup

const children = new Set(); // pids of child processes to kill on exit
const cleanups = [];

// onCleanup registers fn to run when the script ends, however it ends.
export function onCleanup(fn) {
  cleanups.push(fn);
}

// trackPid makes sure the process with this pid is killed on exit;
// untrackPid forgets it (it exited).
export function trackPid(pid) {
  if (pid) children.add(pid);
}

export function untrackPid(pid) {
  children.delete(pid);
}

function killChildren() {
  for (const pid of children) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  children.clear();
}

// 'exit' handlers must be synchronous: killing by pid is.
process.on('exit', killChildren);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killChildren();
    process.exit(130);
  });
}

// runCleanups runs the cleanups, newest first, each for 5 s at most, then
// kills what is left.
async function runCleanups() {
  while (cleanups.length) {
    const fn = cleanups.pop();
    let t;
    try {
      await Promise.race([fn(), new Promise((r) => (t = setTimeout(r, 5000)))]);
    } catch {
      // best effort
    } finally {
      clearTimeout(t);
    }
  }
  killChildren();
}

export function fail(msg) {
  console.error(`[${scriptName}] FAILED: ${msg}`);
  killChildren();
  process.exit(1);
}

// main runs the script body, cleans up, and exits non-zero with a clear
// message on any failure (a deadline included).
export async function main(name, fn, { timeoutMs = 45000 } = {}) {
  setScript(name);
  const started = Date.now();
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const err = new Error(`timed out after ${timeoutMs} ms (the step in progress did not finish)`);
      err.stack = err.message;
      reject(err);
    }, timeoutMs);
  });
  let code = 0;
  try {
    await Promise.race([fn(), deadline]);
    log(`PASS in ${Date.now() - started} ms`);
  } catch (err) {
    code = 1;
    console.error(`[${name}] FAILED: ${describe(err)}`);
    for (const dump of failureDumps) dump();
  } finally {
    clearTimeout(timer);
    await runCleanups();
  }
  process.exit(code);
}

function describe(err) {
  if (err instanceof assert.AssertionError) {
    const where = (err.stack ?? '').split('\n').find((l) => /interop\/[\w-]+\.mjs/.test(l));
    return `${err.message.trimEnd()}${where ? `\n  ${where.trim()}` : ''}`;
  }
  if (err instanceof Error) return err.stack || err.message;
  return String(err);
}

const failureDumps = [];

// onFailure registers fn to print diagnostics (a server's log) when the
// script fails.
export function onFailure(fn) {
  failureDumps.push(fn);
}

// ---------------------------------------------------------------- the agent

// startAgent starts an HTTP agent on 127.0.0.1 that implements the http
// agent contract (docs/AGENTS.md#the-http-protocol): POST /task with
// {delegationId, task, context}, answered with 200 {result}. It refuses a
// wrong Authorization header (401) and records what it saw (headers, body)
// in seen. Behaviour by task:
// a task containing "explode" gets 500 (a failed delegation); "slow"
// answers after 2 s; "async" gets 202 and, 100 ms later, a POST of
// {status: completed, result: "async done: <task>"} to the callbackUrl; a
// context with reply: "object" gets an object result that echoes what the
// agent saw; anything else gets the string "echo: <task>".
export async function startAgent({ token }) {
  const seen = [];
  const callbacks = []; // the mesh's answers to the async callbacks
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const reply = (status, obj) => {
        const b = typeof obj === 'string' ? obj : JSON.stringify(obj);
        res.writeHead(status, { 'Content-Type': typeof obj === 'string' ? 'text/plain' : 'application/json' });
        res.end(b);
      };
      if (req.method !== 'POST' || req.url !== '/task') return reply(404, { error: 'not found' });
      if (req.headers.authorization !== `Bearer ${token}`) return reply(401, { error: 'bad agent token' });
      let msg;
      try {
        msg = JSON.parse(body);
      } catch {
        return reply(400, { error: 'body is not JSON' });
      }
      const record = {
        delegationId: msg.delegationId,
        headerId: req.headers['x-mesh-delegation-id'],
        userAgent: req.headers['user-agent'],
        contentType: req.headers['content-type'],
        task: msg.task,
        context: msg.context,
      };
      seen.push(record);
      if (typeof msg.task !== 'string' || !msg.delegationId) return reply(400, { error: 'missing task or delegationId' });
      if (msg.task.includes('explode')) return reply(500, 'the agent exploded on purpose');
      if (msg.task.includes('slow')) {
        const t = setTimeout(() => reply(200, { result: 'too late' }), 2000);
        res.on('close', () => clearTimeout(t));
        return;
      }
      if (msg.task.includes('async')) {
        if (!msg.callbackUrl) return reply(400, { error: 'async task without callbackUrl' });
        reply(202, { accepted: true });
        setTimeout(() => {
          fetch(msg.callbackUrl, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ status: 'completed', result: `async done: ${msg.task}` }),
          })
            .then((r) => callbacks.push({ id: msg.delegationId, status: r.status }))
            .catch((err) => callbacks.push({ id: msg.delegationId, error: String(err) }));
        }, 100);
        return;
      }
      if (msg.context?.reply === 'object') {
        return reply(200, { result: { echo: msg.task, delegationId: msg.delegationId, context: msg.context } });
      }
      return reply(200, { result: `echo: ${msg.task}` });
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  onCleanup(() => {
    server.closeAllConnections();
    return new Promise((r) => server.close(() => r()));
  });
  const { port } = server.address();
  return { url: `http://127.0.0.1:${port}/task`, seen, callbacks, server };
}

// ---------------------------------------------------------------- serve

// freePort returns a TCP port that was free a moment ago on 127.0.0.1.
// callbackAnswer waits for the mesh's answer to the agent's callback of
// delegation id: the record can be final (and read) a moment before the
// agent has the HTTP response of its own callback.
export async function callbackAnswer(agent, id, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const cb = agent.callbacks.find((c) => c.id === id);
    if (cb || Date.now() > deadline) return cb;
    await new Promise((r) => setTimeout(r, 10));
  }
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// startServe runs `agentmesh serve` on a free loopback port with the
// memory store, the given token(s) and private endpoints allowed, waits
// for /health, and returns its base URL and stop(), which sends SIGTERM
// and resolves to the exit status. Its output is printed only if the
// script fails. A port taken in the meantime is retried.
export async function startServe(bin, opts = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startServeOnce(bin, opts);
    } catch (err) {
      if (attempt < 3 && /address already in use/.test(err.message)) continue;
      throw err;
    }
  }
}

async function startServeOnce(bin, { token, tokensFile, extraArgs = [] }) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const args = [
    'serve',
    '--store', 'memory',
    '--addr', `127.0.0.1:${port}`,
    '--public-url', base,
    '--allow-private-endpoints',
    '--log-level', 'warn',
    ...(tokensFile ? ['--tokens-file', tokensFile] : []),
    ...extraArgs,
  ];
  const env = { ...process.env, MESH_TOKEN: token ?? '' };
  delete env.AGENTMESH_DB;
  const child = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  trackPid(child.pid);
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  let exited = null;
  const exit = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      exited = { code, signal };
      untrackPid(child.pid);
      resolve(exited);
    });
  });
  const stop = async (timeoutMs = 10000) => {
    if (!exited) child.kill('SIGTERM');
    let t;
    const res = await Promise.race([exit, new Promise((r) => (t = setTimeout(() => r(null), timeoutMs)))]);
    clearTimeout(t);
    if (!res) child.kill('SIGKILL');
    return res; // null: it did not stop in time
  };
  onCleanup(() => stop(5000));
  const deadline = Date.now() + 15000;
  for (;;) {
    if (exited) throw new Error(`agentmesh serve exited early (${JSON.stringify(exited)}):\n${output}`);
    try {
      const r = await fetch(`${base}/health`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop(1000);
      throw new Error(`agentmesh serve did not answer /health at ${base} within 15 s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  onFailure(() => {
    console.error(`--- agentmesh ${args.join(' ')} (output) ---\n${output.trimEnd()}\n---`);
  });
  return { base, port, pid: child.pid, stop, output: () => output };
}

// ---------------------------------------------------------------- MCP checks

// CORE_TOOLS are the tools every agentmesh MCP server has (docs/MCP.md#tools).
export const CORE_TOOLS = [
  'mesh_register',
  'mesh_discover',
  'mesh_unregister',
  'mesh_delegate',
  'mesh_get_delegation',
  'mesh_list_agents',
];
// ROUTING_TOOLS are the routing tools (docs/MCP.md#tools), served when
// routing is on (stdio always; serve with --agents).
export const ROUTING_TOOLS = ['mesh_route', 'handle_message'];

// The MCP defaults of the annotation hints (a missing hint means these).
const HINT_DEFAULTS = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };

// The annotations each tool declares (docs/MCP.md#tools), as hint values.
const TOOL_ANNOTATIONS = {
  mesh_register: { readOnlyHint: false, idempotentHint: true, destructiveHint: false },
  mesh_discover: { readOnlyHint: true },
  mesh_unregister: { destructiveHint: true, idempotentHint: true },
  mesh_delegate: { openWorldHint: true, idempotentHint: false },
  mesh_get_delegation: { readOnlyHint: true },
  mesh_list_agents: { readOnlyHint: true },
  mesh_route: { openWorldHint: true },
  handle_message: { openWorldHint: true },
};

function hint(tool, name) {
  return tool.annotations?.[name] ?? HINT_DEFAULTS[name];
}

// checkTools lists the tools and checks names, schemas and annotations
// against the documented tools (docs/MCP.md#tools). It returns the tools by
// name.
export async function checkTools(client, expectedNames) {
  // getToolOutputValidator is the (TypeScript-private) method callTool
  // validates with, in the pinned SDK version.
  assert.equal(typeof client.getToolOutputValidator, 'function', 'SDK internals changed: update checkTools');
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(Object.keys(byName).sort(), [...expectedNames].sort(), 'tools/list: tool names (docs/MCP.md#tools)');
  for (const t of tools) {
    assert.ok(t.description && t.description.length > 40, `${t.name}: has a description`);
    assert.equal(t.inputSchema?.type, 'object', `${t.name}: inputSchema is an object schema`);
    assert.equal(t.outputSchema?.type, 'object', `${t.name}: outputSchema is an object schema (docs/MCP.md#tools: every tool has an output schema)`);
    for (const [h, want] of Object.entries(TOOL_ANNOTATIONS[t.name] ?? {})) {
      assert.equal(hint(t, h), want, `${t.name}: annotation ${h} should be ${want} (docs/MCP.md#tools), tool has ${JSON.stringify(t.annotations)}`);
    }
    // Read-only tools must not claim to be destructive (the MCP meaning of
    // the hints), and every tool's output is validated by the client.
    if (hint(t, 'readOnlyHint')) assert.equal(t.annotations?.destructiveHint, false, `${t.name}: read-only, so destructiveHint false`);
    assert.equal(typeof client.getToolOutputValidator(t.name), 'function', `${t.name}: the SDK compiled a validator for its outputSchema`);
  }
  return byName;
}

// textOf returns the text of a tool result's text content blocks.
export function textOf(res) {
  return (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// call runs tools/call and checks what every result of this server has:
// a successful result carries structured content (the SDK has already
// validated it against the outputSchema, or callTool would have thrown)
// and the same object as JSON text.
export async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (!res.isError) {
    assert.ok(res.structuredContent && typeof res.structuredContent === 'object', `${name}: result has structuredContent`);
    assert.deepEqual(JSON.parse(textOf(res)), res.structuredContent, `${name}: text content is the structured content as JSON`);
  }
  return res;
}

// callOk is call that insists on success.
export async function callOk(client, name, args) {
  const res = await call(client, name, args);
  assert.ok(!res.isError, `${name}(${JSON.stringify(args)}) should succeed, got isError: ${textOf(res)}`);
  return res.structuredContent;
}

// callErr is call that insists on an isError result whose text starts
// with the error code (docs/MCP.md#errors).
export async function callErr(client, name, args, code) {
  const res = await call(client, name, args);
  assert.equal(res.isError, true, `${name}(${JSON.stringify(args)}) should be an isError result, got ${JSON.stringify(res.structuredContent ?? textOf(res))}`);
  const text = textOf(res);
  assert.ok(text.startsWith(`${code}: `), `${name}: isError text should start with "${code}: ", got: ${text}`);
  return res;
}

// proveOutputValidation shows that a structured result that broke the
// outputSchema would surface as an error of callTool: the validator the
// SDK compiled from the server's schema rejects a corrupted copy of a
// real result, and callTool itself throws when it validates the real
// result against a schema the result cannot meet.
export async function proveOutputValidation(client, tools, args) {
  // cacheToolMetadata and getToolOutputValidator are the (TypeScript-private)
  // methods callTool relies on, in the pinned SDK version.
  assert.equal(typeof client.cacheToolMetadata, 'function', 'SDK internals changed: update proveOutputValidation');
  const validate = client.getToolOutputValidator('mesh_discover');
  const good = await callOk(client, 'mesh_discover', args);
  assert.equal(validate(good).valid, true, 'the SDK validator accepts the real mesh_discover result');
  const corrupted = structuredClone(good);
  corrupted.results[0].score = 'high';
  assert.equal(validate(corrupted).valid, false, 'the SDK validator rejects a result whose score is a string');
  const leaked = structuredClone(good);
  leaked.results[0].agent.auth = { type: 'bearer', token: 'leak' };
  assert.equal(validate(leaked).valid, false, 'the SDK validator rejects a result carrying auth.token (write-only)');

  // Through callTool: cache a stricter copy of the tool's schema, so the
  // real result cannot validate, and expect the SDK to throw.
  const strict = structuredClone(tools.mesh_discover);
  strict.outputSchema.required = [...(strict.outputSchema.required ?? []), 'mustNotExist'];
  client.cacheToolMetadata([strict]);
  try {
    await assert.rejects(
      client.callTool({ name: 'mesh_discover', arguments: args }),
      (err) => err instanceof McpError && /does not match the tool's output schema/.test(err.message),
      'callTool must throw when structured content does not match the outputSchema',
    );
  } finally {
    client.cacheToolMetadata(Object.values(tools));
  }
}

// mcpFlow is the MCP server flow (docs/MCP.md#tools) both transports run:
// register an agent whose endpoint is the node agent, discover, delegate,
// read the record, list, failed and timed-out delegations, the error cases,
// unregister. With asyncCallbacks (serve, which receives the agent's
// callback) it runs an async delegation too.
export async function mcpFlow(client, { tools, agent, agentToken, suffix, asyncCallbacks = false }) {
  const name = `echo-agent-${suffix}`;
  // The record mesh_register gets, twice: once to create, once to replace.
  const record = {
    name,
    description: 'Echoes tasks back; used by the agentmesh interop tests.',
    capabilities: ['echo', 'interop testing'],
    examples: ['echo this sentence'],
    endpoint: agent.url,
    labels: { suite: 'interop' },
    auth: { type: 'bearer', token: agentToken },
  };

  const reg = await step('mesh_register creates the agent (token write-only)', async () => {
    const out = await callOk(client, 'mesh_register', record);
    assert.equal(out.created, true);
    assert.equal(out.agent.name, name);
    assert.equal(out.agent.endpoint, agent.url);
    assert.equal(out.agent.protocol, 'http');
    assert.equal(out.agent.auth?.type, 'bearer');
    assert.equal(out.agent.auth?.token, undefined, 'auth.token is never returned');
    const again = await callOk(client, 'mesh_register', record);
    assert.equal(again.created, false, 're-registering the same name replaces it (upsert)');
    assert.equal(again.agent.registeredAt, out.agent.registeredAt, 'registeredAt survives re-registration');
    return out;
  });

  await step('mesh_discover ranks the agent (structuredContent validated by the SDK)', async () => {
    const out = await callOk(client, 'mesh_discover', { query: 'echo interop', limit: 5 });
    assert.ok(Array.isArray(out.results), 'results is an array');
    assert.equal(out.results[0]?.agent.name, name);
    const r = out.results[0];
    assert.ok(r.score > 0 && r.score <= 1, `score in (0, 1], got ${r.score}`);
    assert.ok(r.coverage > 0 && r.coverage <= 1, `coverage in (0, 1], got ${r.coverage}`);
    assert.ok(r.matchedTerms.includes('echo'), `matchedTerms has echo: ${r.matchedTerms}`);
    assert.ok(r.matchedCapabilities.includes('echo'), `matchedCapabilities has echo: ${r.matchedCapabilities}`);
    assert.ok(Array.isArray(r.matchedResources));
    assert.equal(r.agent.auth?.token, undefined);
    const none = await callOk(client, 'mesh_discover', { query: 'zzzunmatchable' });
    assert.deepEqual(none.results, [], 'no match is an empty list, not an error');
  });

  await step('the SDK validates structured content against outputSchema (a mismatch would throw)', () =>
    proveOutputValidation(client, tools, { query: 'echo' }),
  );

  const del = await step('mesh_delegate gets the node agent\'s result', async () => {
    const before = agent.seen.length;
    const out = await callOk(client, 'mesh_delegate', {
      targetName: name,
      task: 'echo the quarterly budget',
      context: { customer: 'acme', reply: 'object' },
    });
    assert.equal(out.status, 'completed');
    assert.equal(out.success, true);
    assert.equal(out.targetAgent, name);
    assert.match(out.id, /^[0-9a-f-]{36}$/, 'the delegation id is a UUID');
    assert.equal(out.result.echo, 'echo the quarterly budget');
    assert.equal(out.result.delegationId, out.id);
    assert.equal(out.result.context.customer, 'acme', 'the context reached the agent');
    assert.equal(out.result.context.depth, 1, 'context.depth counts the hop');
    const seen = agent.seen[before];
    assert.equal(seen.headerId, out.id, 'X-Mesh-Delegation-Id header (docs/AGENTS.md#the-request)');
    assert.match(seen.userAgent ?? '', /^agentmesh\//, 'User-Agent agentmesh/<version>');
    assert.match(seen.contentType ?? '', /^application\/json/);
    // context as a JSON string, and the mesh picking the agent by query
    const byQuery = await callOk(client, 'mesh_delegate', {
      query: 'echo interop',
      task: 'echo by query',
      context: '{"customer": "globex"}',
    });
    assert.equal(byQuery.targetAgent, name);
    assert.equal(byQuery.result, 'echo: echo by query', 'a string result stays a string');
    assert.equal(agent.seen.at(-1).context.customer, 'globex', 'a context given as a JSON string reached the agent');
    return out;
  });

  await step('mesh_get_delegation reads the record', async () => {
    const rec = await callOk(client, 'mesh_get_delegation', { id: del.id });
    assert.equal(rec.id, del.id);
    assert.equal(rec.status, 'completed');
    assert.equal(rec.targetAgent, name);
    assert.equal(rec.task, 'echo the quarterly budget');
    assert.deepEqual(rec.result, del.result);
    const waited = await callOk(client, 'mesh_get_delegation', { id: del.id, waitSeconds: 1 });
    assert.equal(waited.status, 'completed', 'waitSeconds on a final record answers at once');
  });

  await step('mesh_list_agents lists it (with a label filter)', async () => {
    const out = await callOk(client, 'mesh_list_agents', { label: 'suite=interop' });
    const mine = out.agents.find((a) => a.name === name);
    assert.ok(mine, `${name} is listed: ${out.agents.map((a) => a.name)}`);
    assert.deepEqual(mine.labels, { suite: 'interop' });
    assert.equal(mine.auth?.token, undefined);
    const other = await callOk(client, 'mesh_list_agents', { label: 'suite=none' });
    assert.deepEqual(other.agents, []);
  });

  await step('a delegation the agent fails is isError agent_error, with the record as structured content', async () => {
    const res = await callErr(client, 'mesh_delegate', { targetName: name, task: 'please explode' }, 'agent_error');
    // The SDK validated this structured content too (callTool validates it
    // whenever it is present).
    assert.equal(res.structuredContent?.status, 'failed');
    assert.equal(res.structuredContent?.success, false);
    assert.equal(res.structuredContent?.code, 'agent_error');
    assert.match(res.structuredContent?.error ?? '', /500/);
    const rec = await callOk(client, 'mesh_get_delegation', { id: res.structuredContent.id });
    assert.equal(rec.status, 'failed', 'mesh_get_delegation reports a failed delegation in a successful result');
  });

  await step('a delegation past its timeoutMs is isError timeout, with the record', async () => {
    const res = await callErr(client, 'mesh_delegate', { targetName: name, task: 'be slow', timeoutMs: 300 }, 'timeout');
    assert.equal(res.structuredContent?.status, 'timeout');
    assert.equal(res.structuredContent?.code, 'timeout');
  });

  if (asyncCallbacks) {
    await step('an async delegation is accepted, the agent calls back, mesh_get_delegation waits for it', async () => {
      const acc = await callOk(client, 'mesh_delegate', { targetName: name, task: 'do this async', async: true });
      assert.equal(acc.status, 'accepted');
      assert.equal(acc.success, true);
      const rec = await callOk(client, 'mesh_get_delegation', { id: acc.id, waitSeconds: 10 });
      assert.equal(rec.status, 'completed', `record: ${JSON.stringify(rec)}; callbacks: ${JSON.stringify(agent.callbacks)}`);
      assert.equal(rec.result, 'async done: do this async');
      assert.equal(rec.async, true);
      assert.deepEqual(await callbackAnswer(agent, acc.id), { id: acc.id, status: 200 }, 'the callback was accepted');
    });
  }

  await step('bad arguments are isError results with error codes', async () => {
    await callErr(client, 'mesh_discover', { query: '!!!' }, 'invalid_argument');
    await callErr(client, 'mesh_discover', { query: 'echo', limit: 1000 }, 'invalid_argument');
    await callErr(client, 'mesh_discover', { query: 'echo', bogus: true }, 'invalid_argument');
    await callErr(client, 'mesh_delegate', { targetName: name }, 'invalid_argument'); // no task
    await callErr(client, 'mesh_delegate', { task: 'x' }, 'invalid_argument'); // neither target nor query
    await callErr(client, 'mesh_delegate', { targetName: name, task: 'x', context: 'not json' }, 'invalid_argument');
    await callErr(client, 'mesh_delegate', { targetName: name, task: 'x', context: 5 }, 'invalid_argument');
    await callErr(client, 'mesh_delegate', { targetName: name, task: 'x', context: { depth: 9 } }, 'depth_exceeded');
    await callErr(client, 'mesh_delegate', { targetName: name, task: 'x', context: { chain: [name] } }, 'delegation_cycle');
    await callErr(client, 'mesh_delegate', { targetName: 'no-such-agent', task: 'x' }, 'not_found');
    await callErr(client, 'mesh_delegate', { query: 'zzzunmatchable', task: 'x' }, 'no_match');
    await callErr(client, 'mesh_get_delegation', { id: '00000000-0000-4000-8000-000000000000' }, 'not_found');
    await callErr(client, 'mesh_list_agents', { label: 'nolabel' }, 'invalid_argument');
    await callErr(client, 'mesh_register', {
      name: 'metadata-grabber', description: 'x', capabilities: ['x'], endpoint: 'http://169.254.169.254/latest',
    }, 'endpoint_not_allowed');
    await callErr(client, 'mesh_register', {
      name: 'bad name!', description: 'x', capabilities: ['x'], endpoint: agent.url,
    }, 'invalid_argument');
    await callErr(client, 'mesh_register', {
      name: 'inproc', description: 'x', capabilities: ['x'], endpoint: agent.url, protocol: 'inprocess',
    }, 'invalid_argument');
  });

  await step('an unknown tool is a protocol error (not an isError result)', async () => {
    await assert.rejects(client.callTool({ name: 'mesh_no_such_tool', arguments: {} }), (err) => err instanceof McpError);
  });

  await step('mesh_unregister removes it; again is not_found', async () => {
    const out = await callOk(client, 'mesh_unregister', { name });
    assert.deepEqual(out, { name, unregistered: true });
    await callErr(client, 'mesh_unregister', { name }, 'not_found');
    await callErr(client, 'mesh_delegate', { targetName: name, task: 'x' }, 'not_found');
    const list = await callOk(client, 'mesh_list_agents', {});
    assert.ok(!list.agents.some((a) => a.name === name), 'no longer listed');
  });

  return reg;
}
