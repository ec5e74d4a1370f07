#!/usr/bin/env python3
"""A complete agentmesh agent in Python, standard library only.

It registers with a mesh, keeps its TTL alive with heartbeats, answers each
task with the task upper-cased and its word count, refuses calls without
its token, answers in the reply or (AGENT_ASYNC=1) with 202 and a callback,
and unregisters on SIGINT or SIGTERM. examples/agents-go and
examples/agents-typescript are the same agent; docs/AGENTS.md is the
contract.

    MESH_URL=http://localhost:8766 MESH_TOKEN=... AGENT_TOKEN=... python3 agent.py

Environment: MESH_URL (default http://localhost:8766), MESH_TOKEN (the mesh
token it registers with), AGENT_NAME (shout-python), AGENT_ADDR
(localhost:9202; port 0 picks one), AGENT_ENDPOINT (the URL the mesh calls;
default http://<AGENT_ADDR>/task), AGENT_TOKEN (the bearer token the mesh
must send; empty accepts any call), AGENT_TTL (seconds, 15), AGENT_ASYNC=1.
"""

import hmac
import json
import logging
import os
import random
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_TASK_BODY = 8 << 20

log = logging.getLogger("agent")


def shout(task):
    """The agent: what it computes from a task (the POST /task body)."""
    text = task.get("task", "")
    return {"result": f"{text.upper()} ({len(text.split())} words, python)"}


class Mesh:
    """The few calls of the mesh's HTTP API an agent makes, with one token:
    the principal that registers an agent owns it, and only it may
    heartbeat or delete it."""

    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")

    def register(self, record):
        return self.call("POST", "/v1/agents", record)

    def heartbeat(self, name):
        return self.call("POST", f"/v1/agents/{urllib.parse.quote(name, safe='')}/heartbeat")

    def delete(self, name):
        return self.call("DELETE", f"/v1/agents/{urllib.parse.quote(name, safe='')}")


def post_callback(url, outcome):
    """POSTs an async outcome to the task's callbackUrl (the URL is the
    credential: no other auth). Retries after a network error, 429 or 5xx;
    a 409 means the delegation is already final."""
    data = json.dumps(outcome).encode()
    for attempt in range(5):
        if attempt:
            wait = 0.25 * 2 ** (attempt - 1)
            time.sleep(wait + random.uniform(0, wait / 2))
        req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30):
                return
        except urllib.error.HTTPError as e:
            if e.code != 429 and e.code < 500:
                if e.code != 409:
                    log.warning("callback refused: HTTP %d", e.code)
                return
        except OSError as e:
            log.warning("callback attempt %d: %s", attempt + 1, e)
    log.warning("callback failed after 5 attempts")


class Agent(ThreadingHTTPServer):
    # server_close waits for the requests in flight.
    daemon_threads = False

    def __init__(self, addr, token, asynchronous):
        super().__init__(addr, TaskHandler)
        self.token = token
        self.asynchronous = asynchronous
        self.tasks = []  # the threads of async tasks
        self.tasks_lock = threading.Lock()

    def start_task(self, task, callback):
        t = threading.Thread(target=TaskHandler.run_async, args=(task, callback))
        with self.tasks_lock:
            self.tasks = [x for x in self.tasks if x.is_alive()] + [t]
        t.start()

    def wait_tasks(self, timeout):
        """Waits up to timeout seconds for the async tasks to call back."""
        deadline = time.monotonic() + timeout
        with self.tasks_lock:
            tasks = list(self.tasks)
        for t in tasks:
            t.join(max(0, deadline - time.monotonic()))


class TaskHandler(BaseHTTPRequestHandler):
    server: Agent

    def do_POST(self):
        token = self.server.token
        if token and not hmac.compare_digest(
            self.headers.get("Authorization", "").encode(), ("Bearer " + token).encode()
        ):
            return self.reply(401, "unauthenticated", {"WWW-Authenticate": 'Bearer realm="agent"'})
        try:
            length = int(self.headers.get("Content-Length", "0"))
            if length > MAX_TASK_BODY:
                return self.reply(413, "the task is too large")
            task = json.loads(self.rfile.read(length))
            if not isinstance(task, dict):
                raise ValueError("not an object")
        except ValueError:
            return self.reply(400, "the body is not a task (a JSON object)")
        callback = task.get("callbackUrl")
        if self.server.asynchronous and callback:
            self.reply(202, "")
            self.server.start_task(task, callback)
            return
        try:
            body = json.dumps(shout(task)).encode()
        except Exception as e:  # the handler failed: 500 fails the delegation with this text
            return self.reply(500, str(e)[:1024] or "the agent failed")
        self.reply(200, body, {"Content-Type": "application/json"})

    @staticmethod
    def run_async(task, callback):
        try:
            outcome = {"status": "completed", **shout(task)}
        except Exception as e:
            outcome = {"status": "failed", "error": str(e)[:1024] or "the agent failed"}
        post_callback(callback, outcome)

    def reply(self, status, body, headers=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        log.debug(fmt, *args)


def heartbeat(mesh, record, every, stop):
    """Heartbeats every third of the TTL until stop is set; registers the
    agent again when the mesh no longer knows it."""
    while not stop.wait(every):
        try:
            mesh.heartbeat(record["name"])
        except urllib.error.HTTPError as e:
            if e.code != 404:
                log.warning("heartbeat: HTTP %d", e.code)
                continue
            try:
                mesh.register(record)
                log.info("registered again (the mesh had lost the agent)")
            except OSError as e:
                log.warning("register again: %s", e)
        except OSError as e:
            log.warning("heartbeat: %s", e)


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    env = os.environ.get
    name = env("AGENT_NAME") or "shout-python"
    host, _, port = (env("AGENT_ADDR") or "localhost:9202").rpartition(":")
    token = env("AGENT_TOKEN", "")
    ttl = int(env("AGENT_TTL") or "15")
    mesh = Mesh(env("MESH_URL") or "http://localhost:8766", env("MESH_TOKEN", ""))

    server = Agent((host.strip("[]") or "0.0.0.0", int(port)), token, env("AGENT_ASYNC") == "1")
    bound_host, bound_port = server.server_address[:2]
    if bound_host in ("0.0.0.0", "::"):
        bound_host = "127.0.0.1"
    if ":" in bound_host:
        bound_host = f"[{bound_host}]"
    record = {
        "name": name,
        "description": "Shouts the task back, upper-cased, with its word count.",
        "capabilities": ["shout", "uppercase", "word count"],
        "examples": ["shout this please", "how many words is this"],
        "endpoint": env("AGENT_ENDPOINT") or f"http://{bound_host}:{bound_port}/task",
        "ttlSeconds": ttl,
    }
    if token:
        record["auth"] = {"type": "bearer", "token": token}

    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        mesh.register(record)
    except urllib.error.HTTPError as e:
        sys.exit(f"register {name}: HTTP {e.code}: {e.read().decode(errors='replace')}")
    except OSError as e:
        sys.exit(f"register {name}: {e}")
    log.info("registered %s at %s", name, record["endpoint"])

    stop = threading.Event()
    beats = threading.Thread(target=heartbeat, args=(mesh, record, max(ttl / 3, 1), stop), daemon=True)
    if ttl > 0:
        beats.start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass

    # Shut down: no more heartbeats, unregister, stop serving, let the
    # async tasks in flight call back.
    if beats.is_alive():
        beats.join()
    try:
        mesh.delete(name)
        log.info("unregistered %s", name)
    except urllib.error.HTTPError as e:
        if e.code != 404:
            log.warning("unregister: HTTP %d", e.code)
    except OSError as e:
        log.warning("unregister: %s", e)
    server.shutdown()
    server.server_close()
    server.wait_tasks(30)


if __name__ == "__main__":
    main()
