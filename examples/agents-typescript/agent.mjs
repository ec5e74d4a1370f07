// @ts-check
// A complete agentmesh agent for Node.js (20 or later), with no
// dependencies and no build step: plain JavaScript whose types
// (types.d.ts) tsc checks (`npm run typecheck`).
//
// It registers with a mesh, keeps its TTL alive with heartbeats, answers
// each task with the task upper-cased and its word count, refuses calls
// without its token, answers in the reply or (AGENT_ASYNC=1) with 202 and
// a callback, and unregisters on SIGINT or SIGTERM. examples/agents-go
// and examples/agents-python are the same agent; docs/AGENTS.md is the
// contract.
//
//   MESH_URL=http://localhost:8766 MESH_TOKEN=... AGENT_TOKEN=... node agent.mjs
//
// Environment: MESH_URL (default http://localhost:8766), MESH_TOKEN (the
// mesh token it registers with), AGENT_NAME (shout-typescript),
// AGENT_ADDR (localhost:9203; port 0 picks one), AGENT_ENDPOINT (the URL
// the mesh calls; default http://<AGENT_ADDR>/task), AGENT_TOKEN (the
// bearer token the mesh must send; empty accepts any call), AGENT_TTL
// (seconds, 15), AGENT_ASYNC=1.

import { createHash, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

/** @typedef {import("./types.js").Task} Task */
/** @typedef {import("./types.js").Reply} Reply */
/** @typedef {import("./types.js").Outcome} Outcome */
/** @typedef {import("./types.js").AgentRecord} AgentRecord */

const MAX_TASK_BODY = 8 << 20;

/**
 * The agent: what it computes from a task.
 * @param {Task} task
 * @returns {Promise<Reply>}
 */
async function shout(task) {
  const words = task.task.split(/\s+/).filter(Boolean).length;
  return { result: `${task.task.toUpperCase()} (${words} words, typescript)` };
}

const env = process.env;
const name = env.AGENT_NAME || "shout-typescript";
const addr = env.AGENT_ADDR || "localhost:9203";
const token = env.AGENT_TOKEN || "";
const ttl = Number(env.AGENT_TTL || "15");
const asynchronous = env.AGENT_ASYNC === "1";
const meshURL = (env.MESH_URL || "http://localhost:8766").replace(/\/+$/, "");
const meshToken = env.MESH_TOKEN || "";

/**
 * One call of the mesh's HTTP API, always with the one mesh token: the
 * principal that registers an agent owns it, and only it may heartbeat or
 * delete it.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<number>} the HTTP status
 */
async function meshCall(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { "Content-Type": "application/json" };
  if (meshToken) headers.Authorization = `Bearer ${meshToken}`;
  const resp = await fetch(meshURL + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await resp.text();
  if (!resp.ok && resp.status !== 404) {
    throw new Error(`${method} ${path}: HTTP ${resp.status}: ${text}`);
  }
  return resp.status;
}

/**
 * POSTs an async outcome to the task's callbackUrl (the URL is the
 * credential: no other auth). Retries after a network error, 429 or 5xx;
 * a 409 means the delegation is already final.
 * @param {string} url
 * @param {Outcome} outcome
 */
async function postCallback(url, outcome) {
  const body = JSON.stringify(outcome);
  for (let attempt = 0; attempt < 5; attempt++) {
    if (attempt > 0) {
      const wait = 250 * 2 ** (attempt - 1);
      await new Promise((r) => setTimeout(r, wait + Math.random() * (wait / 2)));
    }
    try {
      const resp = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body,
        signal: AbortSignal.timeout(30_000),
      });
      await resp.arrayBuffer();
      if (resp.status !== 429 && resp.status < 500) {
        if (!resp.ok && resp.status !== 409) console.warn(`callback refused: HTTP ${resp.status}`);
        return;
      }
    } catch (err) {
      console.warn(`callback attempt ${attempt + 1}: ${err}`);
    }
  }
  console.warn("callback failed after 5 attempts");
}

/** @param {unknown} err */
function errorText(err) {
  return (err instanceof Error ? err.message : String(err)).slice(0, 1024) || "the agent failed";
}

const tokenSum = createHash("sha256").update(token).digest();

/**
 * Whether the request carries the agent's token, compared in constant time.
 * @param {string | undefined} header the Authorization header
 */
function authorized(header) {
  if (!token) return true;
  const [scheme, value] = (header || "").split(" ", 2);
  const got = createHash("sha256").update(value || "").digest();
  return scheme === "Bearer" && timingSafeEqual(got, tokenSum);
}

/** @type {Set<Promise<void>>} the async tasks in flight */
const tasks = new Set();

const server = createServer(async (req, res) => {
  /**
   * @param {number} status
   * @param {string} body
   * @param {Record<string, string>} [headers]
   */
  const reply = (status, body, headers = {}) => {
    res.writeHead(status, { "Content-Length": Buffer.byteLength(body), ...headers });
    res.end(body);
  };
  if (req.method !== "POST") return reply(405, "POST a task", { Allow: "POST" });
  if (!authorized(req.headers.authorization)) {
    return reply(401, "unauthenticated", { "WWW-Authenticate": 'Bearer realm="agent"' });
  }
  /** @type {Buffer[]} */
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_TASK_BODY) return reply(413, "the task is too large", { Connection: "close" });
    chunks.push(chunk);
  }
  /** @type {Task} */
  let task;
  try {
    task = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if (typeof task !== "object" || task === null || typeof task.task !== "string") throw new Error("not a task");
  } catch {
    return reply(400, "the body is not a task (a JSON object)");
  }
  const callbackUrl = task.callbackUrl;
  if (asynchronous && callbackUrl) {
    reply(202, "");
    const run = shout(task)
      .then(/** @returns {Outcome} */ (r) => ({ status: "completed", ...r }))
      .catch(/** @returns {Outcome} */ (err) => ({ status: "failed", error: errorText(err) }))
      .then((outcome) => postCallback(callbackUrl, outcome));
    tasks.add(run);
    run.finally(() => tasks.delete(run));
    return;
  }
  try {
    reply(200, JSON.stringify(await shout(task)), { "Content-Type": "application/json" });
  } catch (err) {
    reply(500, errorText(err)); // fails the delegation with this text
  }
});

const sep = addr.lastIndexOf(":");
const host = addr.slice(0, sep).replace(/^\[|\]$/g, "");
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(Number(addr.slice(sep + 1)), host || undefined, () => resolve(undefined));
});
const bound = /** @type {import("node:net").AddressInfo} */ (server.address());
let boundHost = bound.address === "0.0.0.0" || bound.address === "::" ? "127.0.0.1" : bound.address;
if (boundHost.includes(":")) boundHost = `[${boundHost}]`;

/** @type {AgentRecord} */
const record = {
  name,
  description: "Shouts the task back, upper-cased, with its word count.",
  capabilities: ["shout", "uppercase", "word count"],
  examples: ["shout this please", "how many words is this"],
  endpoint: env.AGENT_ENDPOINT || `http://${boundHost}:${bound.port}/task`,
  ttlSeconds: ttl,
};
if (token) record.auth = { type: "bearer", token };

try {
  await meshCall("POST", "/v1/agents", record);
} catch (err) {
  console.error(`register ${name}: ${errorText(err)}`);
  process.exit(1);
}
console.log(`registered ${name} at ${record.endpoint}`);

// Heartbeat every third of the TTL; register again when the mesh no
// longer knows the agent (404).
const agentPath = `/v1/agents/${encodeURIComponent(name)}`;
const beats =
  ttl > 0
    ? setInterval(async () => {
        try {
          if ((await meshCall("POST", `${agentPath}/heartbeat`)) === 404) {
            await meshCall("POST", "/v1/agents", record);
            console.log("registered again (the mesh had lost the agent)");
          }
        } catch (err) {
          console.warn(`heartbeat: ${errorText(err)}`);
        }
      }, Math.max((ttl * 1000) / 3, 1000))
    : undefined;

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  clearInterval(beats);
  try {
    await meshCall("DELETE", agentPath);
    console.log(`unregistered ${name}`);
  } catch (err) {
    console.warn(`unregister: ${errorText(err)}`);
  }
  // Stop taking tasks, finish those in flight, let the async ones call back.
  await new Promise((resolve) => {
    server.close(() => resolve(undefined));
    server.closeIdleConnections();
  });
  await Promise.allSettled([...tasks]);
  process.exit(0);
}
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
