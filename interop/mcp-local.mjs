// Several MCP hosts on one machine share one mesh: the official TypeScript
// MCP SDK drives three `agentmesh` stdio processes on one store file, then
// `agentmesh serve` with two stdio processes on another, then a stdio
// process in remote mode (--server) in front of that serve. The process
// holding the store is killed with SIGKILL in each setup, and the others
// carry on.
//
//	node mcp-local.mjs /path/to/agentmesh   (or AGENTMESH_BIN=...)

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { binaryPath, callbackAnswer, callErr, callOk, log, main, onCleanup, onFailure, startAgent, startServe, step, trackPid } from './lib.mjs';

// startHost starts one stdio agentmesh as an MCP host would and returns
// its connected client, its pid and kill().
async function startHost(bin, label, { args = [], env: extra = {} } = {}) {
  const env = { ...process.env, MESH_LOG_LEVEL: 'info' };
  delete env.MESH_TOKEN;
  delete env.AGENTMESH_DB;
  Object.assign(env, extra);
  const transport = new StdioClientTransport({ command: bin, args, env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => (stderr += d));
  onFailure(() => console.error(`--- agentmesh ${label} (stdio) stderr ---\n${stderr.trimEnd()}\n---`));
  const client = new Client({ name: `agentmesh-interop-${label}`, version: '1.0.0' });
  const errors = [];
  client.onerror = (err) => errors.push(err);
  await client.connect(transport);
  trackPid(transport.pid);
  onCleanup(() => client.close());
  return {
    client,
    pid: transport.pid,
    errors,
    kill: () => process.kill(transport.pid, 'SIGKILL'),
    close: () => client.close(),
  };
}

const names = (list) => list.map((x) => (x.agent ?? x).name).sort();

async function discover(host, query) {
  return names((await callOk(host.client, 'mesh_discover', { query })).results);
}

await main(
  'mcp-local',
  async () => {
    const bin = binaryPath();
    const token = 'agent-secret-local';
    const agent = await startAgent({ token });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'aml'));
    onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    const reg = (name, caps) => ({
      name,
      description: `Agent ${name} (interop).`,
      capabilities: caps,
      endpoint: agent.url,
      auth: { type: 'bearer', token },
    });

    // ---- three stdio processes on one store
    const db = path.join(dir, 'one.db');
    const [a, b, c] = await step('start three stdio processes on one store', async () => {
      const a = await startHost(bin, 'A', { args: ['--db', db] });
      const b = await startHost(bin, 'B', { args: ['--db', db] });
      const c = await startHost(bin, 'C', { env: { AGENTMESH_DB: db } });
      return [a, b, c];
    });

    await step('register through A, discover through B and C', async () => {
      await callOk(a.client, 'mesh_register', reg('echo', ['echo', 'repeat']));
      assert.deepEqual(await discover(b, 'echo'), ['echo']);
      assert.deepEqual(await discover(c, 'repeat'), ['echo']);
    });

    await step('delegate sync from C', async () => {
      const rec = await callOk(c.client, 'mesh_delegate', { targetName: 'echo', task: 'hello from C' });
      assert.equal(rec.status, 'completed');
      assert.equal(rec.result, 'echo: hello from C');
    });

    await step('delegate async from B, the callback completes it, C reads the record', async () => {
      const rec = await callOk(b.client, 'mesh_delegate', { targetName: 'echo', task: 'async job', async: true });
      assert.equal(rec.status, 'accepted');
      const got = await callOk(c.client, 'mesh_get_delegation', { id: rec.id, waitSeconds: 10 });
      assert.equal(got.status, 'completed', JSON.stringify(got));
      assert.equal(got.result, 'async done: async job');
      assert.deepEqual(await callbackAnswer(agent, rec.id), { id: rec.id, status: 200 }, 'the callback was accepted');
    });

    await step('SIGKILL A (the holder); B and C keep working', async () => {
      a.kill();
      const t0 = Date.now();
      await callOk(b.client, 'mesh_register', reg('after-a', ['takeover']));
      log(`first registration after SIGKILL of the holder: ${Date.now() - t0} ms`);
      assert.deepEqual(await discover(b, 'takeover'), ['after-a']);
      assert.deepEqual(await discover(c, 'takeover'), ['after-a']);
      assert.deepEqual(b.errors, []);
      assert.deepEqual(c.errors, []);
    });

    await step('a fresh process sees every agent', async () => {
      await b.close();
      await c.close();
      const d = await startHost(bin, 'D', { args: ['--db', db] });
      const out = await callOk(d.client, 'mesh_list_agents', {});
      assert.deepEqual(names(out.agents), ['after-a', 'echo']);
      await d.close();
    });

    // ---- serve plus two stdio processes on one store
    const db2 = path.join(dir, 'two.db');
    const serve = await step('agentmesh serve and two stdio processes on one store', async () => {
      const s = await startServe(bin, { token: 'serve-token', extraArgs: ['--store', 'bolt', '--db', db2] });
      return s;
    });
    const hdrs = { Authorization: 'Bearer serve-token', 'Content-Type': 'application/json' };
    const [e, f] = [await startHost(bin, 'E', { args: ['--db', db2] }), await startHost(bin, 'F', { args: ['--db', db2] })];

    await step('register over HTTP, discover and delegate through the stdio processes', async () => {
      const r = await fetch(`${serve.base}/v1/agents`, { method: 'POST', headers: hdrs, body: JSON.stringify(reg('http-agent', ['ledger'])) });
      assert.equal(r.status, 201, await r.text());
      assert.deepEqual(await discover(e, 'ledger'), ['http-agent']);
      assert.deepEqual(await discover(f, 'ledger'), ['http-agent']);
      const rec = await callOk(e.client, 'mesh_delegate', { targetName: 'http-agent', task: 'through serve' });
      assert.equal(rec.result, 'echo: through serve');
      const seen = await fetch(`${serve.base}/v1/delegations/${rec.id}`, { headers: hdrs });
      assert.equal(seen.status, 200, 'serve holds the record the stdio process started');
      await callOk(f.client, 'mesh_register', reg('stdio-agent', ['journal']));
      const one = await fetch(`${serve.base}/v1/agents/stdio-agent`, { headers: hdrs });
      assert.equal(one.status, 200, 'serve sees what a stdio process registered');
    });

    // ---- remote mode in front of that serve
    await step('remote mode (--server, MESH_TOKEN): same tools, same errors', async () => {
      const r = await startHost(bin, 'R', { args: ['--server', serve.base], env: { MESH_TOKEN: 'serve-token' } });
      assert.deepEqual(await discover(r, 'journal'), ['stdio-agent']);
      const rec = await callOk(r.client, 'mesh_delegate', { targetName: 'http-agent', task: 'remote' });
      assert.equal(rec.result, 'echo: remote');
      await callErr(r.client, 'mesh_delegate', { targetName: 'nobody', task: 'x' }, 'not_found');
      await callErr(r.client, 'mesh_unregister', { name: 'nobody' }, 'not_found');
      await r.close();
    });

    await step('SIGKILL serve; a stdio process takes the store over', async () => {
      process.kill(serve.pid, 'SIGKILL');
      await callOk(e.client, 'mesh_register', reg('after-serve', ['phoenix']));
      assert.deepEqual(await discover(f, 'phoenix'), ['after-serve']);
      assert.deepEqual(await discover(f, 'ledger'), ['http-agent']);
      await e.close();
      await f.close();
    });
  },
  { timeoutMs: 90000 },
);
