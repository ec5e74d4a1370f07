// Command agentmesh is the agentmesh binary: the MCP server (stdio), the
// HTTP control plane (serve), client commands against a running server, and
// the evaluation tools. Run `agentmesh help` for the sub-commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `agentmesh — agent discovery, delegation and routing

Usage:
  agentmesh [flags]                 MCP server on stdio (store: --db / AGENTMESH_DB)
  agentmesh serve [flags]           HTTP control plane + MCP at /mcp + /health + /metrics
  agentmesh agents list|get|register|rm|heartbeat|import ...
                                    client commands against --server (MESH_URL) with MESH_TOKEN
  agentmesh discover QUERY          client command: rank agents for a query
  agentmesh delegate AGENT TASK [--async] [--wait]
                                    client command: delegate a task
  agentmesh eval discovery ...      measure discovery quality on a corpus and queries
  agentmesh eval routing ...        measure the routing classifier and gate on labelled utterances
  agentmesh validate DIR            check a YAML agent directory without a server
  agentmesh admin rekey [flags]     seal every agent credential in the store with the
                                    first key of --secret-key-file (server stopped for --db)
  agentmesh version [--json]        print the version, commit, Go version and platform
  agentmesh help                    show this help

Run "agentmesh COMMAND -h" for the flags of a command; every flag can also
be set through the environment variable shown next to it.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code: 0 on
// success, 1 on a failure, 2 on a usage error.
func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-' && !isHelp(args[0]) && args[0] != "--version" {
		return runStdio(ctx, args, env, stdin, stdout, stderr)
	}
	switch cmd := args[0]; cmd {
	case "serve":
		return runServe(ctx, args[1:], env, stderr)
	case "agents", "discover", "delegate":
		return runClientCommand(ctx, cmd, args[1:], env, stdout, stderr)
	case "eval":
		return runEval(args[1:], stdout, stderr)
	case "validate":
		return runValidate(args[1:], env, stdout, stderr)
	case "admin":
		return runAdmin(ctx, args[1:], env, stdout, stderr)
	case "version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		printFlags(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "agentmesh: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }

// printFlags lists the flags of the stdio MCP server (the bare command)
// and of serve, with their environment variables, for the top-level help.
func printFlags(w io.Writer) {
	var mc stdioConfig
	f := stdioFlags(&mc, w)
	fmt.Fprint(w, "\nFlags of the MCP server on stdio (agentmesh [flags]):\n")
	f.fs.PrintDefaults()
	var sc serveConfig
	f = serveFlags(&sc, w)
	fmt.Fprint(w, "\nFlags of agentmesh serve (its token comes from $MESH_TOKEN and/or --tokens-file):\n")
	f.fs.PrintDefaults()
}
