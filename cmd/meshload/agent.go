package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"
)

// echoAgent is the agent meshload delegates to when -agent is not given:
// an http-protocol agent (docs/AGENTS.md#the-http-protocol) that answers
// every task at once with 200 and {"result": "echo: <task>"}, so that a
// delegation measures the mesh and not the agent.
type echoAgent struct {
	srv *http.Server
	url string // the task endpoint: http://127.0.0.1:PORT/task
}

// startEchoAgent listens on addr (a loopback address; port 0 picks a free
// one) and serves the agent until close.
func startEchoAgent(addr string) (*echoAgent, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the echo agent: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /task", serveEcho)
	a := &echoAgent{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		url: "http://" + ln.Addr().String() + "/task",
	}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// serveEcho answers one task. The task is the only field read: the mesh's
// other fields (delegationId, context, callbackUrl) are ignored, as an
// agent must ignore fields it does not know.
func serveEcho(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Task string `json:"task"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "the body must be a JSON object with a task", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"result": "echo: " + req.Task})
}

func (a *echoAgent) close() { _ = a.srv.Close() }

// taskBody is a delegation's request body as the mesh sends it to an http
// agent, for -mode direct to send the same bytes the mesh would: the id
// and callback URL have the length of real ones.
func taskBody(task string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"delegationId": "00000000-0000-4000-8000-000000000000",
		"task":         task,
		"context":      map[string]any{"depth": 1, "chain": []string{}},
		"callbackUrl":  "http://localhost:8766/v1/delegations/00000000-0000-4000-8000-000000000000/result?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	})
}

// directOp posts the task straight to the agent's endpoint; 2xx is a
// success.
func (t *httpTarget) directOp(endpoint, task string) func(worker int) opFunc {
	return func(int) opFunc {
		client := newHTTPClient(t.concurrency, t.timeout)
		body, err := taskBody(task)
		return func(ctx context.Context, _ int) outcome {
			if err != nil {
				return outcome{key: "error: encode"}
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
			if err != nil {
				return outcome{key: "error: bad url"}
			}
			req.Header.Set("Content-Type", "application/json")
			return do(client, req, is2xx)
		}
	}
}

// delegateBody is a synchronous POST /v1/delegate to target by name.
func delegateBody(target, task string) ([]byte, error) {
	return json.Marshal(map[string]string{"targetName": target, "task": task})
}

// delegate sends one synchronous delegation and classifies the answer:
// "completed" for a completed delegation, "failed: <code>" (or the
// status) for one that ran and failed, the HTTP status when the mesh
// refused it.
func (t *httpTarget) delegate(ctx context.Context, client *http.Client, body []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/v1/delegate", bytes.NewReader(body))
	if err != nil {
		return outcome{key: "error: bad url"}
	}
	req.Header.Set("Content-Type", "application/json")
	t.authorize(req.Header)
	resp, err := client.Do(req)
	if err != nil {
		return outcome{key: "error: " + errorClass(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return outcome{key: "error: " + errorClass(err), bytes: len(data)}
	}
	if resp.StatusCode != http.StatusOK {
		return outcome{key: strconv.Itoa(resp.StatusCode), bytes: len(data)}
	}
	var rec struct {
		Success bool   `json:"success"`
		Status  string `json:"status"`
		Code    string `json:"code"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return outcome{key: "error: bad reply", bytes: len(data)}
	}
	if rec.Success {
		return outcome{key: "completed", bytes: len(data), ok: true}
	}
	why := rec.Code
	if why == "" {
		why = rec.Status
	}
	return outcome{key: "failed: " + why, bytes: len(data)}
}

// delegateOp delegates the task to target for every request.
func (t *httpTarget) delegateOp(target, task string) func(worker int) opFunc {
	return func(int) opFunc {
		client := newHTTPClient(t.concurrency, t.timeout)
		body, err := delegateBody(target, task)
		return func(ctx context.Context, _ int) outcome {
			if err != nil {
				return outcome{key: "error: encode"}
			}
			return t.delegate(ctx, client, body)
		}
	}
}

// post sends one JSON request with the token and returns its status.
func (t *httpTarget) post(ctx context.Context, path string, v any) (int, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	t.authorize(req.Header)
	resp, err := newHTTPClient(1, t.timeout).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if !is2xx(resp.StatusCode) {
		return resp.StatusCode, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return resp.StatusCode, nil
}

// registerTarget registers the agent at endpoint under name and waits
// until the mesh delegates to it: a registration reaches the delegation
// client a moment after POST /v1/agents answers (docs/AGENTS.md).
func (t *httpTarget) registerTarget(ctx context.Context, name, endpoint, task string) error {
	agent := map[string]any{
		"name":         name,
		"description":  "meshload's echo agent: answers every task at once with the task echoed.",
		"capabilities": []string{"meshload-echo"},
		"endpoint":     endpoint,
	}
	if _, err := t.post(ctx, "/v1/agents", agent); err != nil {
		return fmt.Errorf("registering the agent %s: %w", name, err)
	}
	body, err := delegateBody(name, task)
	if err != nil {
		return err
	}
	client := newHTTPClient(1, t.timeout)
	var last outcome
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if last = t.delegate(ctx, client, body); last.ok {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("delegating to the agent " + name + " fails: " + last.key + " (serve needs --allow-private-endpoints for a loopback agent)")
}

// compare sets mesh.VsDirect from the direct run at the same concurrency.
func compare(mesh, direct *Report) {
	c := &Comparison{
		DirectP50Ms:             direct.Latency.P50,
		DirectRequestsPerSecond: direct.RequestsPerSecond,
		AddedP50Ms:              ms(time.Duration((mesh.Latency.P50 - direct.Latency.P50) * 1e6)),
	}
	if direct.Latency.P50 > 0 {
		c.AddedP50Ratio = round2(c.AddedP50Ms / direct.Latency.P50)
	}
	if direct.RequestsPerSecond > 0 {
		c.ThroughputRatio = round2(mesh.RequestsPerSecond / direct.RequestsPerSecond)
	}
	mesh.VsDirect = c
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// startAgent returns the endpoint delegations go to: -agent, or that of
// an echo agent it starts (stop closes it).
func startAgent(cfg *config) (endpoint string, stop func(), err error) {
	if cfg.agent != "" {
		return cfg.agent, func() {}, nil
	}
	a, err := startEchoAgent(cfg.agentAddr)
	if err != nil {
		return "", nil, err
	}
	return a.url, a.close, nil
}

// startTarget is startAgent, and registers the echo agent it starts with
// the server of t as -target (an agent given with -agent is registered
// already).
func startTarget(ctx context.Context, cfg *config, t *httpTarget) (endpoint string, stop func(), err error) {
	if endpoint, stop, err = startAgent(cfg); err != nil {
		return "", nil, err
	}
	if cfg.agent == "" {
		if err := t.registerTarget(ctx, cfg.target, endpoint, cfg.task); err != nil {
			stop()
			return "", nil, err
		}
	}
	return endpoint, stop, nil
}

// runDelegate runs -mode direct, delegate and floor: at each -c level a
// direct run and, for delegate, a run through the mesh right after it
// (for floor, through a bare reverse proxy), compared with it.
func runDelegate(ctx context.Context, cfg *config, serverCPU func() time.Duration, emit func(*Report), stderr io.Writer) (int, error) {
	t, err := newHTTPTarget(cfg)
	if err != nil {
		return 2, err
	}
	var (
		endpoint string
		stop     func()
	)
	if cfg.mode == "delegate" {
		endpoint, stop, err = startTarget(ctx, cfg, t)
	} else { // direct and floor have no server to register with
		endpoint, stop, err = startAgent(cfg)
	}
	if err != nil {
		return 1, err
	}
	defer stop()
	var via string // -mode floor: endpoint through the proxy
	if cfg.mode == "floor" {
		var proxy *proxyProcess
		if via, proxy, err = floorProxy(ctx, endpoint, stderr); err != nil {
			return 1, err
		}
		defer proxy.close()
	}
	return 0, levels(ctx, cfg, func(c int) {
		ct := *t
		ct.concurrency = c
		p := plan{concurrency: c, count: cfg.n, duration: cfg.duration, warmup: cfg.warmup}
		direct := runLoad(ctx, p, ct.directOp(endpoint, cfg.task))
		direct.Mode, direct.Target = "direct", "POST "+endpoint
		emit(direct)
		var r *Report
		switch cfg.mode {
		case "delegate":
			settle(ctx, cfg, serverCPU, stderr)
			p.serverCPU = serverCPU
			r = runLoad(ctx, p, ct.delegateOp(cfg.target, cfg.task))
			r.Target = fmt.Sprintf("POST %s/v1/delegate (sync, to %s at %s)", t.base, cfg.target, endpoint)
		case "floor":
			r = runLoad(ctx, p, ct.directOp(via, cfg.task))
			r.Target = fmt.Sprintf("POST %s (a bare reverse proxy to %s)", via, endpoint)
		default:
			return
		}
		r.Mode = cfg.mode
		compare(r, direct)
		emit(r)
	})
}
