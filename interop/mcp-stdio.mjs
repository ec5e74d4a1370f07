// MCP over stdio with the official TypeScript MCP SDK: spawns
// `agentmesh --store memory` with StdioClientTransport and runs the MCP
// flow (lib.mjs mcpFlow, docs/MCP.md#tools) against a node:http agent.
//
//	node mcp-stdio.mjs /path/to/agentmesh   (or AGENTMESH_BIN=...)

import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { CORE_TOOLS, ROUTING_TOOLS, binaryPath, call, callErr, callOk, checkTools, log, main, mcpFlow, onCleanup, onFailure, startAgent, step, textOf, trackPid } from './lib.mjs';

await main('mcp-stdio', async () => {
  const bin = binaryPath();
  const agentToken = 'agent-secret-stdio';
  const agent = await startAgent({ token: agentToken });
  log(`node agent at ${agent.url}`);

  const env = { ...process.env, MESH_LOG_LEVEL: 'warn' };
  delete env.AGENTMESH_DB;
  const transport = new StdioClientTransport({
    command: bin,
    args: ['--store', 'memory'],
    env,
    stderr: 'pipe', // the server logs on stderr (stdout is protocol only, docs/MCP.md#host-configuration): shown on failure
  });
  let serverLog = '';
  transport.stderr?.on('data', (d) => (serverLog += d));
  onFailure(() => console.error(`--- agentmesh (stdio) stderr ---\n${serverLog.trimEnd()}\n---`));
  const client = new Client({ name: 'agentmesh-interop-stdio', version: '1.0.0' });
  const errors = []; // transport and protocol errors, e.g. a non-JSON line on stdout
  client.onerror = (err) => errors.push(err);
  onCleanup(() => client.close());

  await step('initialize over stdio', async () => {
    let negotiated;
    transport.setProtocolVersion = (v) => (negotiated = v); // the Client reports the negotiated version here
    try {
      await client.connect(transport);
    } finally {
      trackPid(transport.pid); // killed on exit if close() could not
    }
    const info = client.getServerVersion();
    assert.equal(info?.name, 'agentmesh');
    assert.ok(client.getServerCapabilities()?.tools, 'the server declares the tools capability');
    assert.ok((client.getInstructions() ?? '').includes('mesh_discover'), 'server instructions mention the tools');
    await client.ping();
    assert.ok(negotiated, 'initialize negotiated a protocol version');
    log(`server ${info.name} ${info.version}, MCP protocol ${negotiated}`);
  });

  const tools = await step('tools/list: documented names, input/output schemas, annotations', () =>
    checkTools(client, [...CORE_TOOLS, ...ROUTING_TOOLS]),
  );

  await mcpFlow(client, { tools, agent, agentToken, suffix: 'stdio' });

  await step('mesh_route and handle_message route to the agent (docs/API.md#routing; output schemas validated)', async () => {
    await callErr(client, 'mesh_route', { input: 'what is the budget of engineering' }, 'no_default_agent');
    await callOk(client, 'mesh_register', {
      name: 'budget-agent',
      description: 'Answers budget questions for finance teams.',
      capabilities: ['budget', 'cost center'],
      examples: ['what is the budget of engineering', 'cost center of the sales team'],
      endpoint: agent.url,
      auth: { type: 'bearer', token: agentToken },
    });
    // The lexical classifier retrains in the background (debounced) after
    // a registry change: poll until it routes.
    let out;
    for (const deadline = Date.now() + 5000; ; ) {
      const res = await call(client, 'mesh_route', { input: 'what is the budget of engineering', user_id: 'interop-user' });
      if (!res.isError) {
        out = res.structuredContent;
        break;
      }
      assert.match(textOf(res), /^no_default_agent: /);
      if (Date.now() > deadline) assert.fail('mesh_route did not route to budget-agent within 5 s of its registration');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(out.decision, 'route');
    assert.equal(out.agent_id, 'budget-agent');
    assert.equal(out.response, 'echo: what is the budget of engineering');
    assert.ok(out.session_id, 'a session for the identified user');
    const next = await callOk(client, 'mesh_route', { input: 'and for sales?', user_id: 'interop-user' });
    assert.equal(next.agent_id, 'budget-agent', 'the session keeps the user on the agent');
    assert.equal(next.session_id, out.session_id);
    assert.equal(next.reason, 'session');
    const hm = await callOk(client, 'handle_message', { raw_input: 'cost center of the sales team', employee_id: 'interop-employee' });
    assert.deepEqual(hm, { content: 'echo: cost center of the sales team', workflow_complete: false });
    await callErr(client, 'mesh_route', { input: '' }, 'invalid_argument');
    await callOk(client, 'mesh_unregister', { name: 'budget-agent' });
  });

  await step('stdout carried nothing but protocol (no client-side errors)', () => {
    assert.deepEqual(errors.map(String), []);
  });
});
