package registry

import "context"

// Op says what a [Write] did or tried to do.
type Op string

// The operations reported to Options.OnWrite.
const (
	// OpRegister: a registration (Register), or a file agent added or
	// replaced by ReplaceFileAgents.
	OpRegister Op = "register"
	// OpDelete: an unregistration (Delete), or a file agent removed by
	// ReplaceFileAgents.
	OpDelete Op = "delete"
	// OpExpire: an agent removed after its TTL, by this registry's sweep
	// or by the store (seen through its watch).
	OpExpire Op = "expire"
)

// Write is one change, or refused change, of the registry's agents, as
// Options.OnWrite receives it: whatever caused it (an API call, an MCP
// tool, a reload of the agent directory, a TTL), the registry reports it
// the same way, so one hook can audit them all.
type Write struct {
	Op Op
	// Agent is the record written, or as sent when the write was refused,
	// or as it was when removed; its token is redacted. For a refused
	// Delete only Name is set.
	Agent Agent
	// Created is true for a registration that added a new name.
	Created bool
	// File is true for the writes of ReplaceFileAgents (the agent
	// directory). They are reported when they commit; a refused file set
	// writes nothing and is reported by whoever reloaded it.
	File bool
	// Err is why the write was refused or failed; nil when it committed.
	Err error
}

// wrote reports w to Options.OnWrite, if set. ctx is the context of the
// call that caused it (context.Background for sweeps and watched
// changes), so that the hook can tell who made it.
func (r *Registry) wrote(ctx context.Context, w Write) {
	if r.onWrite != nil {
		w.Agent = w.Agent.Redacted()
		r.onWrite(ctx, w)
	}
}
