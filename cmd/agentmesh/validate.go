package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

const validateSynopsis = `agentmesh validate [flags] DIR

Checks a YAML agent directory (docs/AGENTS.md#three-ways-to-register)
without a server, with the rules
serve --agents applies: every file is read, its ${VAR} references expanded
from the environment, its agent validated, and the directory's invariants
checked. Prints each problem as "file:line: message" and exits 1, or prints
"N agents OK" and exits 0. Flags go before DIR.`

// runValidate runs `agentmesh validate`.
func runValidate(args []string, env func(string) string, stdout, stderr io.Writer) int {
	var allowPrivate, requireDefault bool
	var allowHosts string
	f := newFlags("validate", validateSynopsis, stderr)
	f.Bool(&allowPrivate, "allow-private-endpoints", "MESH_ALLOW_PRIVATE_ENDPOINTS", false, "allow agent endpoints on loopback and private networks (as serve)")
	f.String(&allowHosts, "allow-endpoint-hosts", "MESH_ALLOW_ENDPOINT_HOSTS", "", "host names, *.suffix wildcards or CIDRs allowed even when private, comma-separated (as serve)")
	f.Bool(&requireDefault, "require-default", "", true, "require exactly one agent with is_default: true, as serve --agents does")
	if err := f.parse(args, env); err != nil {
		return usageError(stderr, err)
	}
	if f.fs.NArg() != 1 {
		return usageError(stderr, fmt.Errorf("validate takes one directory, got %d arguments (flags go before DIR)", f.fs.NArg()))
	}
	dir := f.fs.Arg(0)
	policy, err := netguard.NewPolicy(netguard.Options{AllowPrivate: allowPrivate, AllowHosts: splitList(allowHosts), Hint: privateHint})
	if err != nil {
		return usageError(stderr, fmt.Errorf("--allow-endpoint-hosts: %w", err))
	}
	agents, err := registry.LoadDir(dir, &registry.DirOptions{
		Policy:         policy,
		LookupEnv:      lookupEnv(env),
		RequireDefault: requireDefault,
	})
	var de *registry.DirError
	switch {
	case errors.As(err, &de):
		for _, p := range de.Problems {
			fmt.Fprintln(stdout, p)
		}
		fmt.Fprintf(stderr, "agentmesh validate: %s: %s\n", dir, plural(len(de.Problems), "problem"))
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "agentmesh validate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s OK\n", plural(len(agents), "agent"))
	return 0
}

// lookupEnv adapts the command's environment to the lookup of
// registry.DirOptions. The command sees the environment through a getter,
// so a variable set to "" counts as unset: ${NAME} then fails and
// ${NAME:-default} uses the default.
func lookupEnv(env func(string) string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v := env(name)
		return v, v != ""
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
