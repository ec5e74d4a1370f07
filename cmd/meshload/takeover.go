package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/synthagents"
)

// runTakeover measures how long the processes sharing one store take to
// replace a holder killed with SIGKILL: it starts -cmd twice (the first
// holds the store, the second is its front-end), then, -repeat times,
// kills the holder and times a mesh_register through the front-end, which
// needs the new holder: the front-end itself, once it has taken the store
// over. A new front-end is started for the next round.
func runTakeover(ctx context.Context, cfg *config, gen *synthagents.Generator, stderr io.Writer) (int, error) {
	argv := strings.Fields(cfg.cmd)
	holder, err := startMCP(ctx, argv, stderr)
	if err != nil {
		return 1, err
	}
	defer func() { holder.close() }()
	var times []time.Duration
	for round := range cfg.repeat {
		front, err := startMCP(ctx, argv, stderr)
		if err != nil {
			return 1, err
		}
		// The front-end answers once it has joined the holder.
		if o := front.callTool(ctx, "mesh_register", gen.Agent(cfg.prefix, 2*round, 0)); !o.ok {
			front.close()
			return 1, fmt.Errorf("round %d: registration through the front-end failed: %s", round, o.key)
		}
		_ = holder.cmd.Process.Kill()
		killed := time.Now()
		_, _ = holder.cmd.Process.Wait()
		o := front.callTool(ctx, "mesh_register", gen.Agent(cfg.prefix, 2*round+1, 0))
		took := time.Since(killed)
		if !o.ok {
			front.close()
			return 1, fmt.Errorf("round %d: the first registration after the kill failed: %s", round, o.key)
		}
		times = append(times, took)
		fmt.Fprintf(stderr, "meshload: round %d: first acknowledged write %.1f ms after SIGKILL of the holder\n", round+1, ms(took))
		holder = front
	}
	slices.Sort(times)
	fmt.Printf("takeover after SIGKILL (%d rounds): min %.1f ms, median %.1f ms, max %.1f ms\n",
		len(times), ms(times[0]), ms(times[len(times)/2]), ms(times[len(times)-1]))
	return 0, interrupted(ctx)
}
