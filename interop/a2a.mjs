// A2A 1.0 with the official A2A JS SDK (@a2a-js/sdk): starts `agentmesh
// serve --store memory`, registers the node agent through the HTTP API,
// resolves the mesh's Agent Card from /.well-known/agent-card.json with
// ClientFactory, and sends messages over the card's JSON-RPC interface
// with a bearer token (createAuthenticatingFetchWithRetry): a delegation
// to the node agent (skill mesh.delegate), a discovery (metadata skill:
// mesh.discover), streaming's fallback, a polling client, CancelTask,
// ListTasks, refused and failed delegations, malformed messages, and a
// call without a token (401).
//
//	node a2a.mjs /path/to/agentmesh   (or AGENTMESH_BIN=...)

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

import { CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

import { binaryPath, log, main, startAgent, startServe, step } from './lib.mjs';

const TOKEN = 'interop-a2a-token-0123456789';
const AGENT = 'echo-agent-a2a';

// request builds a SendMessageRequest (proto JSON in, SDK object out)
// with one text part and the given message metadata.
function request(text, metadata, extra = {}) {
  return SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], metadata, ...extra },
  });
}

function state(task) {
  return taskStateToJSON(task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
}

function statusText(task) {
  return (task.status?.message?.parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');
}

// factory returns a ClientFactory whose JSON-RPC transport sends
// Authorization: Bearer <token> on every call (none if token is undefined).
function factory(token, clientConfig = {}) {
  const fetchImpl =
    token === undefined
      ? fetch
      : createAuthenticatingFetchWithRetry(fetch, {
          headers: async () => ({ Authorization: `Bearer ${token}` }),
          shouldRetryWithHeaders: async () => undefined,
        });
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      clientConfig,
      cardResolver: new DefaultAgentCardResolver(), // the card is public: no token
    }),
  );
}

await main('a2a', async () => {
  const bin = binaryPath();
  const agentToken = 'agent-secret-a2a';
  const agent = await startAgent({ token: agentToken });
  const mesh = await startServe(bin, { token: TOKEN });
  log(`agentmesh serve at ${mesh.base}, node agent at ${agent.url}`);

  await step('register the node agent (POST /v1/agents)', async () => {
    const r = await fetch(`${mesh.base}/v1/agents`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        name: AGENT,
        description: 'Echoes tasks back; used by the agentmesh interop tests.',
        capabilities: ['echo', 'interop testing'],
        endpoint: agent.url,
        auth: { type: 'bearer', token: agentToken },
      }),
    });
    assert.equal(r.status, 201, await r.clone().text());
  });

  const client = await step('resolve the Agent Card from /.well-known/agent-card.json', async () => {
    const card = await new DefaultAgentCardResolver().resolve(mesh.base);
    assert.equal(card.name, 'agentmesh');
    const skills = card.skills.map((s) => s.id).sort();
    assert.deepEqual(skills, ['mesh.delegate', 'mesh.discover']);
    const iface = card.supportedInterfaces.find((i) => i.protocolBinding === 'JSONRPC');
    assert.ok(iface, `a JSONRPC interface: ${JSON.stringify(card.supportedInterfaces)}`);
    assert.equal(iface.url, `${mesh.base}/a2a`, 'the interface URL is <public-url>/a2a');
    assert.equal(iface.protocolVersion, '1.0');
    const schemes = Object.values(card.securitySchemes ?? {});
    assert.ok(
      schemes.some((s) => s.scheme?.$case === 'httpAuthSecurityScheme' && /^bearer$/i.test(s.scheme.value.scheme)),
      `a bearer security scheme: ${JSON.stringify(card.securitySchemes)}`,
    );
    assert.equal(card.capabilities?.streaming ?? false, false, 'streaming is not offered');
    const c = await factory(TOKEN).createFromUrl(mesh.base);
    assert.equal(c.protocolVersion, '1.0');
    log(`card: ${card.name} ${card.version}, ${iface.protocolBinding} ${iface.url}, skills ${skills.join(', ')}`);
    return c;
  });

  const task = await step('SendMessage (mesh.delegate) runs the node agent and returns its text', async () => {
    const before = agent.seen.length;
    const res = await client.sendMessage(
      request('echo hello from the A2A client', { 'agentmesh/target': AGENT, customer: 'acme' }),
    );
    assert.ok(!('messageId' in res), 'the result is a Task, not a Message');
    assert.equal(state(res), 'TASK_STATE_COMPLETED', `task state; status: ${statusText(res)}`);
    const artifact = res.artifacts.find((a) => a.name === 'result');
    assert.ok(artifact, `an artifact "result": ${JSON.stringify(res.artifacts)}`);
    const text = artifact.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');
    assert.equal(text, 'echo: echo hello from the A2A client');
    assert.equal(res.metadata?.['agentmesh/targetAgent'], AGENT);
    const delegationId = res.metadata?.['agentmesh/delegationId'];
    assert.match(delegationId ?? '', /^[0-9a-f-]{36}$/);
    const seen = agent.seen[before];
    assert.equal(seen.delegationId, delegationId, 'the agent saw the same delegation id');
    assert.equal(seen.context.customer, 'acme', 'other metadata keys are the delegation context');
    assert.equal(seen.context['agentmesh/target'], undefined, 'agentmesh/ keys are not context');
    // The delegation record, through the HTTP API.
    const rec = await (await fetch(`${mesh.base}/v1/delegations/${delegationId}`, { headers: { Authorization: `Bearer ${TOKEN}` } })).json();
    assert.equal(rec.status, 'completed');
    assert.equal(rec.targetAgent, AGENT);
    return res;
  });

  await step('SendMessage picks the best match when no target is named; object results are data parts', async () => {
    const res = await client.sendMessage(request('echo interop please', { customer: 'globex', reply: 'object' }));
    assert.equal(state(res), 'TASK_STATE_COMPLETED', statusText(res));
    assert.equal(res.metadata?.['agentmesh/targetAgent'], AGENT);
    const data = res.artifacts.find((a) => a.name === 'result')?.parts.find((p) => p.content?.$case === 'data');
    assert.ok(data, `a data part: ${JSON.stringify(res.artifacts)}`);
    assert.equal(data.content.value.echo, 'echo interop please');
    assert.equal(data.content.value.context.customer, 'globex');
  });

  await step('GetTask returns the finished task', async () => {
    const got = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
    assert.equal(got.id, task.id);
    assert.equal(state(got), 'TASK_STATE_COMPLETED');
  });

  await step('sendMessageStream falls back to SendMessage (the card offers no streaming)', async () => {
    const events = [];
    for await (const ev of client.sendMessageStream(request('echo streamed', { 'agentmesh/target': AGENT }))) events.push(ev);
    assert.equal(events.length, 1);
    assert.equal(events[0].payload?.$case, 'task');
    assert.equal(state(events[0].payload.value), 'TASK_STATE_COMPLETED');
  });

  await step('polling client (returnImmediately): GetTask until completed', async () => {
    const poller = await factory(TOKEN, { polling: true }).createFromUrl(mesh.base);
    let t = await poller.sendMessage(request('echo, polled', { 'agentmesh/target': AGENT }));
    assert.ok(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_COMPLETED'].includes(state(t)), state(t));
    for (const deadline = Date.now() + 5000; state(t) !== 'TASK_STATE_COMPLETED'; ) {
      assert.ok(Date.now() < deadline, `task still ${state(t)} after 5 s`);
      await new Promise((r) => setTimeout(r, 50));
      t = await poller.getTask(GetTaskRequest.fromJSON({ id: t.id }));
    }
    const text = t.artifacts.find((a) => a.name === 'result')?.parts.map((p) => p.content?.value).join('');
    assert.equal(text, 'echo: echo, polled');
  });

  await step('CancelTask cancels a running task and its delegation', async () => {
    const poller = await factory(TOKEN, { polling: true }).createFromUrl(mesh.base);
    const t = await poller.sendMessage(request('be slow', { 'agentmesh/target': AGENT }));
    // Wait until the delegation runs (the agent got the task).
    for (const deadline = Date.now() + 5000; !agent.seen.some((s) => s.task === 'be slow'); ) {
      assert.ok(Date.now() < deadline, 'the slow task never reached the agent');
      await new Promise((r) => setTimeout(r, 20));
    }
    const canceled = await client.cancelTask(CancelTaskRequest.fromJSON({ id: t.id }));
    assert.equal(state(canceled), 'TASK_STATE_CANCELED');
    const got = await client.getTask(GetTaskRequest.fromJSON({ id: t.id }));
    assert.equal(state(got), 'TASK_STATE_CANCELED');
    const id = agent.seen.find((s) => s.task === 'be slow').delegationId;
    const h = { Authorization: `Bearer ${TOKEN}` };
    const rec = await (await fetch(`${mesh.base}/v1/delegations/${id}?wait=5s`, { headers: h })).json();
    assert.equal(rec.status, 'canceled', `the delegation record: ${JSON.stringify(rec)}`);
  });

  await step('ListTasks lists the caller\'s tasks; unknown ids are TaskNotFoundError', async () => {
    const list = await client.listTasks(ListTasksRequest.fromJSON({}));
    assert.ok(list.tasks.some((t) => t.id === task.id), `ListTasks has ${task.id}: ${list.tasks.map((t) => t.id)}`);
    await assert.rejects(client.getTask(GetTaskRequest.fromJSON({ id: 'no-such-task' })), (err) => err.name === 'TaskNotFoundError' || assert.fail(`got ${err.name}: ${err.message}`));
  });

  await step('SendMessage with metadata skill: mesh.discover returns the ranked agents', async () => {
    const res = await client.sendMessage(request('echo interop', { skill: 'mesh.discover', 'agentmesh/limit': 5 }));
    assert.equal(state(res), 'TASK_STATE_COMPLETED', statusText(res));
    const artifact = res.artifacts.find((a) => a.name === 'agents');
    assert.ok(artifact, `an artifact "agents": ${JSON.stringify(res.artifacts)}`);
    const summary = artifact.parts.find((p) => p.content?.$case === 'text');
    assert.ok(summary?.content.value, 'a one-line text summary');
    const data = artifact.parts.find((p) => p.content?.$case === 'data')?.content.value;
    assert.ok(Array.isArray(data?.results), `a data part {results}: ${JSON.stringify(artifact.parts)}`);
    const first = data.results[0];
    assert.equal(first.agent.name, AGENT);
    assert.ok(first.score > 0 && first.score <= 1);
    assert.ok(first.matchedTerms.includes('echo'));
    assert.equal(first.agent.auth?.token, undefined, 'no agent token in discovery results');
    log(`discover summary: ${summary.content.value}`);
  });

  await step('a delegation to an unknown agent ends failed with not_found', async () => {
    const res = await client.sendMessage(request('do it', { 'agentmesh/target': 'no-such-agent' }));
    assert.equal(state(res), 'TASK_STATE_FAILED');
    assert.match(statusText(res), /^not_found: /);
    assert.equal(res.metadata?.['agentmesh/code'], 'not_found');
  });

  await step('a delegation the agent fails ends failed with agent_error', async () => {
    const res = await client.sendMessage(request('please explode', { 'agentmesh/target': AGENT }));
    assert.equal(state(res), 'TASK_STATE_FAILED');
    assert.match(statusText(res), /^agent_error: /);
    assert.equal(res.metadata?.['agentmesh/code'], 'agent_error');
  });

  await step('a malformed message is a JSON-RPC invalid params error (invalid_argument)', async () => {
    await assert.rejects(client.sendMessage(request('x', { 'agentmesh/tagret': AGENT })), (err) => {
      assert.equal(err.name, 'RequestMalformedError', `error class: ${err}`);
      assert.equal(err.envelopeCode, -32602, 'JSON-RPC invalid params');
      assert.match(err.message, /^invalid_argument: .*agentmesh\/tagret/, 'the message names the bad key');
      assert.ok([err.data].flat().some((d) => d?.code === 'invalid_argument'), `error data carries {code}: ${JSON.stringify(err.data)}`);
      return true;
    });
  });

  await step('a data part is refused (the card accepts text/plain)', async () => {
    const req = SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ data: { a: 1 } }] } });
    await assert.rejects(client.sendMessage(req), (err) => err.name === 'RequestMalformedError' && /^invalid_argument: /.test(err.message));
  });

  await step('without a token, SendMessage fails with HTTP 401', async () => {
    const anon = await factory(undefined).createFromUrl(mesh.base);
    await assert.rejects(anon.sendMessage(request('echo', { 'agentmesh/target': AGENT })), (err) => {
      assert.match(err.message, /Status: 401/, `error: ${err}`);
      return true;
    });
  });
});
