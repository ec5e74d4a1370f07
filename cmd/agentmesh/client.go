package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/registry"
)

func clientFlags(name, synopsis string, server *string, stderr io.Writer) *flags {
	f := newFlags(name, synopsis+"\n\nThe token is read from $MESH_TOKEN.", stderr)
	f.String(server, "server", "MESH_URL", "http://localhost:8766", "base URL of the agentmesh server")
	return f
}

// newClient returns a client of the server at --server with $MESH_TOKEN.
func newClient(server string, env func(string) string) (*client.Client, error) {
	c, err := client.New(server, &client.Options{
		Token:     env("MESH_TOKEN"),
		UserAgent: "agentmesh-cli/" + buildinfo.Version(),
	})
	if err != nil {
		return nil, usageErr{fmt.Errorf("--server %q: must be an http or https URL", server)}
	}
	return c, nil
}

// printJSON writes v to w as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printObject writes v, which encodes as a JSON object, to w as indented
// JSON with its keys sorted, as the delegate command always printed it;
// numbers keep their digits.
func printObject(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	return printJSON(w, m)
}

// runClientCommand runs one of the client sub-commands: exit code 0, 1
// for a failure (the server's code and message on stderr), 2 for a
// command-line mistake.
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
	var api *client.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return usageError(stderr, usage.err)
	case errors.As(err, &api):
		fmt.Fprintf(stderr, "agentmesh: %s: %s\n", api.ErrorCode(), withoutCode(api.Error(), api.ErrorCode()))
		return 1
	default:
		fmt.Fprintln(stderr, "agentmesh:", err)
		return 1
	}
}

// usageErr marks a command-line mistake (exit code 2).
type usageErr struct{ err error }

func (u usageErr) Error() string { return u.err.Error() }

// withoutCode returns msg without a lead that repeats code in words
// ("not found: no agent named x" for not_found), which the CLI prints
// before the message already.
func withoutCode(msg, code string) string {
	if rest, ok := strings.CutPrefix(msg, strings.ReplaceAll(code, "_", " ")+": "); ok {
		return rest
	}
	return msg
}

func usagef(format string, args ...any) error { return usageErr{fmt.Errorf(format, args...)} }

func parseClient(f *flags, args []string, env func(string) string) error {
	if err := f.parseArgs(args, env); err != nil {
		return usageErr{err}
	}
	return nil
}

// parseLabel reads a --label k=v into a filter (nil when empty).
func parseLabel(label string) (map[string]string, error) {
	if label == "" {
		return nil, nil
	}
	k, v, ok := strings.Cut(label, "=")
	if !ok || k == "" {
		return nil, fmt.Errorf("--label %q: must be key=value", label)
	}
	return map[string]string{k: v}, nil
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
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, "Usage: %s\n\nRun \"agentmesh agents SUB-COMMAND -h\" for the flags of one.\n", agentsSynopsis)
		return nil
	}
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
	c, err := newClient(server, env)
	if err != nil {
		return err
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
		labels, err := parseLabel(label)
		if err != nil {
			return err
		}
		page, err := c.List(ctx, registry.ListOptions{Limit: max(limit, 0), Labels: labels})
		if err != nil {
			return err
		}
		return printJSON(stdout, page.Agents)
	case "import":
		if f.fs.NArg() != 1 {
			return usagef("agents import needs exactly one CARD_URL")
		}
		a, _, err := c.ImportCard(ctx, f.fs.Arg(0))
		if err != nil {
			return err
		}
		return printJSON(stdout, a)
	case "get", "heartbeat", "rm":
		n, err := name()
		if err != nil {
			return err
		}
		var a registry.Agent
		switch sub {
		case "get":
			a, err = c.Agent(ctx, n)
		case "heartbeat":
			a, err = c.Heartbeat(ctx, n)
		case "rm":
			if err := c.Delete(ctx, n); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "removed %s\n", n)
			return nil
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, a)
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
		// Sent as written: the server refuses unknown or misspelt keys.
		a, _, err := c.RegisterJSON(ctx, body)
		if err != nil {
			return err
		}
		return printJSON(stdout, a)
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
	c, err := newClient(server, env)
	if err != nil {
		return err
	}
	labels, err := parseLabel(label)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	results, err := c.Search(ctx, strings.Join(f.fs.Args(), " "), &discovery.Query{
		Limit:  max(limit, 0),
		Scorer: discovery.Scorer(scorer),
		Labels: labels,
	})
	if err != nil {
		return err
	}
	return printJSON(stdout, results)
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
	c, err := newClient(server, env)
	if err != nil {
		return err
	}
	rec, err := c.Delegate(ctx, delegation.Request{
		Target:  f.fs.Arg(0),
		Task:    strings.Join(f.fs.Args()[1:], " "),
		Async:   async,
		Timeout: max(timeout, 0),
	})
	if err != nil {
		return err
	}
	// The reply of POST /v1/delegate, or with --wait the final record.
	var out any = httpserver.NewDelegateResponse(rec)
	if wait && rec.Status == delegation.StatusAccepted {
		if rec, err = c.WaitDelegation(ctx, rec.ID); err != nil {
			return err
		}
		out = rec
	}
	if err := printObject(stdout, out); err != nil {
		return err
	}
	switch rec.Status {
	case delegation.StatusFailed, delegation.StatusTimeout, delegation.StatusCanceled:
		code, msg := rec.Failure()
		return fmt.Errorf("%s: delegation %s %s: %s", code, rec.ID, rec.Status, msg)
	}
	return nil
}
