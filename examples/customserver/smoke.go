package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
)

// echoAgent is an agent speaking the http protocol: the mesh POSTs it a
// JSON body whose "task" is the text to do (docs/AGENTS.md#the-request),
// and it answers {"result": "echo: <task>"} (docs/AGENTS.md#the-reply).
func echoAgent(w http.ResponseWriter, r *http.Request) {
	var task struct {
		Task string `json:"task"`
	}
	if err := json.NewDecoder(r.Body).Decode(&task); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"result": "echo: " + task.Task})
}

// smokeRound uses the server at base as a client would: it starts the echo
// agent on another loopback port of this process, registers it, discovers
// it and delegates a task to it. It fails unless each step gives the
// expected answer.
func smokeRound(ctx context.Context, base, token string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	agent := &http.Server{Handler: http.HandlerFunc(echoAgent), ReadHeaderTimeout: 10 * time.Second}
	go agent.Serve(ln)
	defer agent.Shutdown(context.Background())

	call := func(method, path string, body any, want int, out any) error {
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				return err
			}
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: got %s, want %d: %s", method, path, resp.Status, want, data)
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		return nil
	}

	var registered map[string]any
	if err := call("POST", "/v1/agents", map[string]any{
		"name":         "echo",
		"description":  "Echoes a task back.",
		"capabilities": []string{"echo"},
		"endpoint":     "http://" + ln.Addr().String() + "/task",
	}, http.StatusCreated, &registered); err != nil {
		return err
	}
	var found []discovery.Result
	if err := call("GET", "/v1/discover?query="+url.QueryEscape("echo this"), nil, http.StatusOK, &found); err != nil {
		return err
	}
	if len(found) != 1 || found[0].Agent.Name != "echo" {
		return fmt.Errorf("discover \"echo this\": want the echo agent, got %d results", len(found))
	}
	var done httpserver.DelegateResponse
	if err := call("POST", "/v1/delegate", map[string]any{"targetName": "echo", "task": "hello"}, http.StatusOK, &done); err != nil {
		return err
	}
	if done.Status != "completed" || string(done.Result) != `"echo: hello"` {
		return fmt.Errorf("delegate to echo: want completed with \"echo: hello\", got %s %s (%s %s)", done.Status, done.Result, done.Code, done.Error)
	}
	log.Printf("smoke: registered echo, discovered it (score %.2f), delegated \"hello\": %s %s", found[0].Score, done.Status, done.Result)
	return nil
}
