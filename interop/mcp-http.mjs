// MCP over Streamable HTTP with the official TypeScript MCP SDK: starts
// `agentmesh serve --store memory` on a free loopback port with MESH_TOKEN
// and a tokens file, connects StreamableHTTPClientTransport with an
// Authorization header, and runs the tool flow (lib.mjs mcpFlow); then
// checks authentication (no token / wrong token: 401) and scopes (a read
// token gets permission_denied for mesh_register).
//
//	node mcp-http.mjs /path/to/agentmesh   (or AGENTMESH_BIN=...)

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { CORE_TOOLS, ROUTING_TOOLS, binaryPath, callErr, callOk, checkTools, log, main, mcpFlow, onCleanup, startAgent, startServe, step } from './lib.mjs';

const TOKEN = 'interop-mesh-token-0123456789';
const READ_TOKEN = 'interop-read-token-0123456789';

// connect returns an initialized client for url with the given bearer
// token (none if undefined), and the protocol errors the client saw.
async function connect(url, token, name) {
  const headers = token === undefined ? {} : { Authorization: `Bearer ${token}` };
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name, version: '1.0.0' });
  const errors = [];
  client.onerror = (err) => errors.push(err);
  onCleanup(() => client.close());
  await client.connect(transport);
  return { client, transport, errors };
}

await main('mcp-http', async () => {
  const bin = binaryPath();
  const dir = mkdtempSync(path.join(tmpdir(), 'agentmesh-interop-'));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const tokensFile = path.join(dir, 'tokens.yaml');
  writeFileSync(tokensFile, `- name: reader\n  token: ${READ_TOKEN}\n  scopes: [read]\n`, { mode: 0o600 });

  const agentToken = 'agent-secret-http';
  const agent = await startAgent({ token: agentToken });
  const mesh = await startServe(bin, { token: TOKEN, tokensFile });
  const url = `${mesh.base}/mcp`;
  log(`agentmesh serve at ${mesh.base}, node agent at ${agent.url}`);

  const { client, errors } = await step('initialize over Streamable HTTP with Authorization: Bearer', async () => {
    const c = await connect(url, TOKEN, 'agentmesh-interop-http');
    assert.equal(c.client.getServerVersion()?.name, 'agentmesh');
    assert.ok(c.client.getServerCapabilities()?.tools);
    assert.equal(c.transport.sessionId, undefined, 'stateless mode: no Mcp-Session-Id');
    await c.client.ping();
    log(`server ${c.client.getServerVersion().name} ${c.client.getServerVersion().version}, MCP protocol ${c.transport.protocolVersion}`);
    return c;
  });

  // serve routes by default, whatever registered the agents: the routing
  // tools are listed without --agents.
  const tools = await step('tools/list: names, input/output schemas, annotations', () =>
    checkTools(client, [...CORE_TOOLS, ...ROUTING_TOOLS]),
  );

  await mcpFlow(client, { tools, agent, agentToken, suffix: 'http', asyncCallbacks: true });

  await step('mesh_route routes among agents declared with mesh_register, a default agent among them', async () => {
    const auth = { type: 'bearer', token: agentToken };
    await callOk(client, 'mesh_register', {
      name: 'http-general', description: 'Answers anything else.', capabilities: ['general'], isDefault: true,
      examples: ['hello there', 'tell me a joke', 'what can you do'], endpoint: agent.url, auth,
    });
    await callOk(client, 'mesh_register', {
      name: 'http-weather', description: 'Gives weather forecasts.', capabilities: ['weather', 'forecast'],
      examples: ['will it rain tomorrow in Paris', 'weather forecast for Berlin', 'how hot is it today'], endpoint: agent.url, auth,
    });
    // The first request after the registrations is routed with them.
    const out = await callOk(client, 'mesh_route', { input: 'will it rain tomorrow in Lyon' });
    assert.equal(out.decision, 'route', JSON.stringify(out));
    assert.equal(out.agent_id, 'http-weather', JSON.stringify(out));
    const other = await callOk(client, 'mesh_route', { input: 'tell me a joke about cats' });
    assert.notEqual(other.reason, 'no_default_agent', JSON.stringify(other));
    assert.equal(other.agent_id, 'http-general', JSON.stringify(other));
  });

  await step('no client-side protocol errors on the connection', () => {
    assert.deepEqual(errors.map(String), []);
  });

  await step('without a token, connecting fails with 401', async () => {
    await assert.rejects(connect(url, undefined, 'no-token'), (err) => {
      assert.ok(err instanceof StreamableHTTPError, `want StreamableHTTPError, got ${err}`);
      assert.equal(err.code, 401);
      return true;
    });
    await assert.rejects(connect(url, 'wrong-token', 'wrong-token'), (err) => err instanceof StreamableHTTPError && err.code === 401);
    const raw = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    assert.equal(raw.status, 401);
    assert.match(raw.headers.get('www-authenticate') ?? '', /^Bearer/, 'WWW-Authenticate: Bearer');
    assert.equal((await raw.json()).code, 'unauthenticated', 'the documented error body');
  });

  await step('a read-only token reads, and gets permission_denied for mesh_register', async () => {
    const { client: reader } = await connect(url, READ_TOKEN, 'reader');
    const { tools: listed } = await reader.listTools();
    assert.ok(listed.length >= CORE_TOOLS.length);
    const out = await callOk(reader, 'mesh_discover', { query: 'anything at all' });
    assert.ok(Array.isArray(out.results));
    await callErr(reader, 'mesh_register', {
      name: 'not-allowed', description: 'x', capabilities: ['x'], endpoint: agent.url,
    }, 'permission_denied');
    await callErr(reader, 'mesh_delegate', { targetName: 'whatever', task: 'x' }, 'permission_denied');
    await reader.close();
  });

  await client.close();

  await step('SIGTERM: serve shuts down cleanly (exit 0)', async () => {
    assert.deepEqual(await mesh.stop(), { code: 0, signal: null });
  });
});
