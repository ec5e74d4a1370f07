package audit

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
)

// Origin is who made a request and through what, carried in the request's
// context so that whatever the request changes is audited with it,
// whichever package makes the change.
type Origin struct {
	// Actor is the name of the caller's token ([Entry.Actor]).
	Actor string
	// Principal is the principal the token acts for ([Entry.Principal]).
	Principal string
	// RequestID is the request's id, recorded as the request_id detail.
	RequestID string
	// Via names the front-end or path when it is not the HTTP API itself:
	// "mcp", "import" (an A2A card import), "file" (the agent directory).
	Via string
}

type originKey struct{}

// WithOrigin returns ctx carrying o.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginFrom returns the [Origin] ctx carries, or the zero Origin.
func OriginFrom(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}

// WithVia returns ctx with the Via of its [Origin] set to via, keeping the
// actor, principal and request id.
func WithVia(ctx context.Context, via string) context.Context {
	o := OriginFrom(ctx)
	o.Via = via
	return WithOrigin(ctx, o)
}

// RegistryEntry is the audit entry of a change of the registry (or of a
// refused one), as [registry.Options.OnWrite] reports it: the actor, request
// id and path come from ctx's [Origin]. A refused write is denied with its
// code; a write that failed inside the mesh (a store error) is a failure
// with code internal.
func RegistryEntry(ctx context.Context, w registry.Write) Entry {
	o := OriginFrom(ctx)
	e := Entry{Actor: o.Actor, Principal: o.Principal, Target: truncate(w.Agent.Name, 128), Outcome: OutcomeSuccess, Details: map[string]string{}}
	switch w.Op {
	case registry.OpRegister:
		e.Action = ActionAgentRegister
	case registry.OpDelete:
		e.Action = ActionAgentUnregister
	case registry.OpExpire:
		e.Action = ActionAgentExpire
		e.Details["ttl_seconds"] = strconv.Itoa(w.Agent.TTLSeconds)
	}
	via := o.Via
	if w.File {
		via = "file"
	}
	if via != "" {
		e.Details["via"] = via
	}
	if o.RequestID != "" {
		e.Details["request_id"] = o.RequestID
	}
	switch code := registryCode(w.Err); {
	case w.Err == nil:
		if w.Op == registry.OpRegister {
			e.Details["created"] = strconv.FormatBool(w.Created)
		}
	case code == "" || code == apierr.CodeInternal || code == apierr.CodeUnavailable:
		e.Outcome, e.Code = OutcomeFailure, code
		if code == "" {
			e.Code = apierr.CodeInternal
		}
	default:
		e.Outcome, e.Code = OutcomeDenied, code
		if errors.Is(w.Err, registry.ErrEndpointNotAllowed) {
			e.Details["endpoint_host"] = EndpointHost(w.Agent.Endpoint)
		}
	}
	return e
}

// registryCode is the code of a registry error: the registry's own, or
// the code the error describes itself with.
func registryCode(err error) string {
	if code := registry.Code(err); code != "" {
		return code
	}
	if errors.Is(err, registry.ErrClosed) {
		return apierr.CodeUnavailable
	}
	return apierr.Code(err)
}

// RegistryWrote records the [RegistryEntry] of w: it is a
// [registry.Options.OnWrite].
func (r *Recorder) RegistryWrote(ctx context.Context, w registry.Write) {
	r.Record(RegistryEntry(ctx, w))
}

// EndpointHost returns the host of an endpoint URL, for audit details
// (never the path or query, which may carry secrets): the form every
// entry records an endpoint in.
func EndpointHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return truncate(u.Host, 256)
}

// truncate cuts s to n bytes (on a character boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
