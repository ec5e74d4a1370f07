package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/registry"
)

// apiClient talks to a running `agentmesh serve` (SPEC 6).
type apiClient struct {
	base   string
	token  string
	http   *http.Client
	stdout io.Writer
}

// apiError is an error response of the server: {error, code}.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"error"`
	Code    string `json:"code"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (HTTP %d, code %s)", e.Message, e.Status, e.Code)
}

func clientFlags(name, synopsis string, server *string, stderr io.Writer) *flags {
	f := newFlags(name, synopsis+"\n\nThe token is read from $MESH_TOKEN.", stderr)
	f.String(server, "server", "MESH_URL", "http://localhost:8766", "base URL of the agentmesh server")
	return f
}

func newAPIClient(server string, env func(string) string, stdout io.Writer) (*apiClient, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: must be an http or https URL", server)
	}
	return &apiClient{
		base:   strings.TrimRight(server, "/"),
		token:  env("MESH_TOKEN"),
		http:   &http.Client{Timeout: 0}, // each call has its own context deadline
		stdout: stdout,
	}, nil
}

// do sends one request and decodes a 2xx JSON reply into out (nil to
// discard). A non-2xx reply is an *apiError.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", "agentmesh-cli/"+buildinfo.Version())
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message, e.Code = strings.TrimSpace(string(data)), "unknown"
		}
		return e
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

// print writes v as indented JSON.
func (c *apiClient) print(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runClientCommand runs one of the client sub-commands.
func runClientCommand(ctx context.Context, cmd string, args []string, env func(string) string, stdout, stderr io.Writer) int {
	var err error
	switch cmd {
	case "agents":
		err = runAgents(ctx, args, env, stdout, stderr)
	case "discover":
		err = runDiscover(ctx, args, env, stdout, stderr)
	case "delegate":
		err = runDelegate(ctx, args, env, stdout, stderr)
	}
	var usage usageErr
	var api *apiError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return usageError(stderr, usage.err)
	case errors.As(err, &api):
		fmt.Fprintf(stderr, "agentmesh: %s: %s\n", api.Code, api.Message)
		return 1
	default:
		fmt.Fprintln(stderr, "agentmesh:", err)
		return 1
	}
}

// usageErr marks a command-line mistake (exit code 2).
type usageErr struct{ err error }

func (u usageErr) Error() string { return u.err.Error() }

func usagef(format string, args ...any) error { return usageErr{fmt.Errorf(format, args...)} }

func parseClient(f *flags, args []string, env func(string) string) error {
	if err := f.parseArgs(args, env); err != nil {
		return usageErr{err}
	}
	return nil
}

const agentsSynopsis = `agentmesh agents list [--label k=v] [--limit N]
       agentmesh agents get NAME
       agentmesh agents register [-f FILE]     (agent JSON from FILE or stdin)
       agentmesh agents rm NAME
       agentmesh agents heartbeat NAME
       agentmesh agents import CARD_URL        (register an A2A agent from its Agent Card)`

func runAgents(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("agents needs a sub-command: list, get, register, rm, heartbeat or import")
	}
	sub, args := args[0], args[1:]
	var server, label, file string
	var limit int
	f := clientFlags("agents "+sub, agentsSynopsis, &server, stderr)
	switch sub {
	case "list":
		f.String(&label, "label", "", "", "only agents with this label (k=v)")
		f.Int(&limit, "limit", "", 0, "page size (default: the server's)")
	case "register":
		f.String(&file, "f", "", "-", `agent JSON file ("-" for stdin)`)
	case "get", "rm", "heartbeat", "import":
	default:
		return usagef("unknown agents sub-command %q", sub)
	}
	if err := parseClient(f, args, env); err != nil {
		return err
	}
	c, err := newAPIClient(server, env, stdout)
	if err != nil {
		return usageErr{err}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	name := func() (string, error) {
		if f.fs.NArg() != 1 {
			return "", usagef("agents %s needs exactly one agent NAME", sub)
		}
		return f.fs.Arg(0), nil
	}
	switch sub {
	case "list":
		q := url.Values{}
		if label != "" {
			q.Set("label", label)
		}
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		var agents []registry.Agent
		path := "/v1/agents"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		if err := c.do(ctx, http.MethodGet, path, nil, &agents); err != nil {
			return err
		}
		return c.print(agents)
	case "import":
		if f.fs.NArg() != 1 {
			return usagef("agents import needs exactly one CARD_URL")
		}
		var out registry.Agent
		if err := c.do(ctx, http.MethodPost, "/v1/agents/import", map[string]string{"cardUrl": f.fs.Arg(0)}, &out); err != nil {
			return err
		}
		return c.print(out)
	case "get", "heartbeat", "rm":
		n, err := name()
		if err != nil {
			return err
		}
		path := "/v1/agents/" + url.PathEscape(n)
		var out registry.Agent
		switch sub {
		case "get":
			err = c.do(ctx, http.MethodGet, path, nil, &out)
		case "heartbeat":
			err = c.do(ctx, http.MethodPost, path+"/heartbeat", nil, &out)
		case "rm":
			if err := c.do(ctx, http.MethodDelete, path, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "removed %s\n", n)
			return nil
		}
		if err != nil {
			return err
		}
		return c.print(out)
	default: // register
		var data []byte
		if file == "-" {
			data, err = io.ReadAll(io.LimitReader(os.Stdin, 2<<20))
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			return err
		}
		var body json.RawMessage
		if err := json.Unmarshal(data, &body); err != nil {
			return usagef("agent JSON: %v", err)
		}
		var out registry.Agent
		if err := c.do(ctx, http.MethodPost, "/v1/agents", body, &out); err != nil {
			return err
		}
		return c.print(out)
	}
}

const discoverSynopsis = `agentmesh discover [--limit N] [--scorer bm25|overlap] [--label k=v] QUERY...`

func runDiscover(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	var server, scorer, label string
	var limit int
	f := clientFlags("discover", discoverSynopsis, &server, stderr)
	f.Int(&limit, "limit", "", 0, "maximum results (default 10, max 100)")
	f.String(&scorer, "scorer", "", "", "bm25 (default) or overlap")
	f.String(&label, "label", "", "", "only agents with this label (k=v)")
	if err := parseClient(f, args, env); err != nil {
		return err
	}
	if f.fs.NArg() == 0 {
		return usagef("discover needs a QUERY")
	}
	c, err := newAPIClient(server, env, stdout)
	if err != nil {
		return usageErr{err}
	}
	q := url.Values{"query": {strings.Join(f.fs.Args(), " ")}}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if scorer != "" {
		q.Set("scorer", scorer)
	}
	if label != "" {
		q.Set("label", label)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var results []json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/v1/discover?"+q.Encode(), nil, &results); err != nil {
		return err
	}
	return c.print(results)
}

const delegateSynopsis = `agentmesh delegate [--async] [--wait] [--timeout D] AGENT TASK...`

func runDelegate(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	var server string
	var async, wait bool
	var timeout time.Duration
	f := clientFlags("delegate", delegateSynopsis, &server, stderr)
	f.Bool(&async, "async", "", false, "ask the agent to work asynchronously and call back")
	f.Bool(&wait, "wait", "", false, "with --async: wait until the delegation is final")
	f.Duration(&timeout, "timeout", "", 0, "delegation deadline (default: the server's, 120 s)")
	if err := parseClient(f, args, env); err != nil {
		return err
	}
	if f.fs.NArg() < 2 {
		return usagef("delegate needs an AGENT and a TASK")
	}
	c, err := newAPIClient(server, env, stdout)
	if err != nil {
		return usageErr{err}
	}
	body := map[string]any{
		"targetName": f.fs.Arg(0),
		"task":       strings.Join(f.fs.Args()[1:], " "),
		"async":      async,
	}
	if timeout > 0 {
		body["timeoutMs"] = timeout.Milliseconds()
	}
	var rec map[string]any
	if err := c.do(ctx, http.MethodPost, "/v1/delegate", body, &rec); err != nil {
		return err
	}
	for wait && rec["status"] == "accepted" {
		id, _ := rec["id"].(string)
		if err := c.do(ctx, http.MethodGet, "/v1/delegations/"+url.PathEscape(id)+"?wait=60s", nil, &rec); err != nil {
			return err
		}
	}
	if err := c.print(rec); err != nil {
		return err
	}
	if rec["status"] == "failed" || rec["status"] == "timeout" || rec["status"] == "canceled" {
		code, _ := rec["code"].(string)
		if code == "" {
			code, _ = rec["status"].(string)
		}
		return fmt.Errorf("%s: delegation %v %v: %v", code, rec["id"], rec["status"], rec["error"])
	}
	return nil
}
