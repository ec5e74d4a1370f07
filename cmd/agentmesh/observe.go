package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/webhook"
	"github.com/agentmesh/agentmesh/metrics"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

// observer feeds the metrics and the audit log of `serve`
// (docs/OPERATIONS.md#metrics, docs/OPERATIONS.md#audit-log) from
// the hooks of the library packages: breaker transitions, delegation
// records, routing decisions and registry events. Its fields are nil when
// the mode has no metrics (the stdio MCP server) or no audit log; every
// method is then a no-op, so the mesh wires the hooks unconditionally.
type observer struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	audit   *audit.Recorder
	stops   []func()

	// sessionMetrics and webhook follow session closes (sessionevents.go);
	// nil without metrics or without --session-webhook.
	sessionMetrics *metrics.SessionCloses
	webhook        *webhook.Sender

	// registryAudit is audit for the registry's write hook, which the
	// registry may call (a sweep, a watched change) while start runs.
	registryAudit atomic.Pointer[audit.Recorder]
}

// start builds the metrics (registered on reg, nil for none) and the audit
// log (over st, when enabled and st keeps one) and follows the registry.
// Call it once the registry and breakers exist, before the delegation
// client and the router are built.
func (o *observer) start(reg *prometheus.Registry, withAudit bool, st agentmesh.Store, r *registry.Registry, breakers *breaker.Set) error {
	if withAudit {
		as, ok := st.(audit.Store)
		if !ok {
			o.log.Warn("the store keeps no audit log: audit entries are not recorded")
		} else {
			rec, err := audit.NewRecorder(as, &audit.Options{Logger: o.log})
			if err != nil {
				return err
			}
			o.audit = rec
		}
	}
	if reg != nil {
		opts := &metrics.Options{Breakers: breakers, Logger: o.log}
		if c, ok := st.(session.ActiveCounter); ok {
			opts.Sessions = c
		}
		if o.audit != nil {
			opts.Audit = o.audit
		}
		m, err := metrics.New(reg, opts)
		if err != nil {
			return err
		}
		o.metrics = m
		o.stops = append(o.stops, m.Follow(r))
	}
	o.registryAudit.Store(o.audit)
	return nil
}

// close stops following the registry and writes the queued audit entries.
// Call it after the delegation client and router stopped, before the
// store closes.
func (o *observer) close() {
	for _, stop := range o.stops {
		stop()
	}
	o.stops = nil
	_ = o.audit.Close()
}

// auditLog is the audit log for httpserver.Options.Audit: nil (not a nil
// *audit.Recorder in an interface) when there is none.
func (o *observer) auditLog() httpserver.Audit {
	if o.audit == nil {
		return nil
	}
	return o.audit
}

// byCaller returns e with the actor and principal of the token that
// authenticated the request of ctx (none when none did).
func byCaller(ctx context.Context, e audit.Entry) audit.Entry {
	o := audit.OriginFrom(ctx)
	e.Actor, e.Principal = o.Actor, o.Principal
	return e
}

// breakerChanged is breaker.Options.OnStateChange: a transition goes to
// the audit log (the gauge reads the states at scrape time).
func (o *observer) breakerChanged(name string, from, to breaker.State) {
	o.audit.Record(audit.Entry{
		Action:  audit.ActionBreakerTransition,
		Target:  name,
		Outcome: audit.OutcomeSuccess,
		Details: map[string]string{"from": from.String(), "to": to.String()},
	})
}

// delegationRecorded is delegation.Options.OnRecord: every record that
// reached accepted or a final status is counted; the final status of an
// accepted one (its callback, timeout or cancel) is audited — the request
// itself is audited by [auditedDelegations] with its caller.
func (o *observer) delegationRecorded(rec delegation.Record) {
	if o.metrics != nil {
		o.metrics.ObserveRecord(rec)
	}
	if o.audit == nil || !rec.Status.Final() || rec.Deadline == nil {
		return
	}
	o.audit.Record(audit.Entry{
		Action:  audit.ActionDelegationFinish,
		Target:  rec.TargetAgent,
		Outcome: delegationOutcome(rec.Status),
		Code:    rec.Code,
		Details: map[string]string{"delegation_id": rec.ID, "status": string(rec.Status)},
	})
}

func delegationOutcome(s delegation.Status) audit.Outcome {
	if s == delegation.StatusCompleted || s == delegation.StatusAccepted {
		return audit.OutcomeSuccess
	}
	return audit.OutcomeFailure
}

// delegated audits one Delegate call with the token that made it.
func (o *observer) delegated(ctx context.Context, req delegation.Request, rec delegation.Record, err error) {
	if o.audit == nil {
		return
	}
	e := byCaller(ctx, audit.Entry{Action: audit.ActionDelegation, Details: map[string]string{}})
	if req.SourceAgent != "" {
		e.Details["source_agent"] = req.SourceAgent
	}
	if err != nil {
		e.Target = req.Target
		e.Outcome, e.Code = audit.OutcomeDenied, delegation.Code(err)
		if req.Target == "" {
			e.Details["by"] = "query"
		}
		switch {
		case e.Code == "":
			e.Outcome, e.Code = audit.OutcomeFailure, "internal"
		case errors.Is(err, delegation.ErrClosed):
			e.Outcome = audit.OutcomeFailure
		}
		o.audit.Record(e)
		return
	}
	e.Target, e.Outcome, e.Code = rec.TargetAgent, delegationOutcome(rec.Status), rec.Code
	e.Details["delegation_id"] = rec.ID
	e.Details["status"] = string(rec.Status)
	e.Details["attempts"] = strconv.Itoa(rec.Attempts)
	e.Details["latency_ms"] = strconv.FormatInt(rec.LatencyMs, 10)
	if rec.Async {
		e.Details["async"] = "true"
	}
	o.audit.Record(e)
}

// routed is routing.RouterOptions.OnDecision.
func (o *observer) routed(ctx context.Context, resp routing.Response, err error) {
	if o.metrics != nil {
		o.metrics.ObserveDecision(ctx, resp, err)
	}
	if o.audit == nil {
		return
	}
	e := byCaller(ctx, audit.Entry{
		Action:  audit.ActionRoutingDecision,
		Target:  resp.AgentID,
		Outcome: audit.OutcomeSuccess,
		Code:    string(resp.Reason),
		Details: map[string]string{
			"decision":   string(resp.Decision),
			"request_id": resp.RequestID,
			"confidence": strconv.FormatFloat(resp.Confidence, 'f', 3, 64),
		},
	})
	if resp.Decision == routing.ActionClarify {
		e.Target = resp.SuggestedAgent
	}
	for k, v := range map[string]string{"session_id": resp.SessionID, "delegation_id": resp.DelegationID} {
		if v != "" {
			e.Details[k] = v
		}
	}
	if err != nil {
		// The code the front-ends answer with (unavailable,
		// no_default_agent, canceled, timeout), internal for the rest.
		e.Outcome, e.Code = audit.OutcomeFailure, apierr.Code(err)
		if e.Code == "" {
			e.Code = apierr.CodeInternal
		}
	}
	o.audit.Record(e)
}

// registryWrote is registry.Options.OnWrite: every change of the registry
// (and every refused one), whatever made it — the HTTP API, MCP, A2A card
// imports, the agent directory, a TTL — is audited here, with the caller
// the request's context carries.
func (o *observer) registryWrote(ctx context.Context, w registry.Write) {
	if rec := o.registryAudit.Load(); rec != nil {
		rec.RegistryWrote(ctx, w)
	}
}

// reloaded audits a reload that did not come through the HTTP API (which
// audits its own): SIGHUP ("signal"), a change of the agent directory
// ("file").
func (o *observer) reloaded(via string, err error) {
	e := audit.Entry{Action: audit.ActionReload, Outcome: audit.OutcomeSuccess, Details: map[string]string{"via": via}}
	if err != nil {
		e.Outcome, e.Code = audit.OutcomeFailure, httpserver.CodeReloadFailed
		msg := err.Error()
		if len(msg) > 512 {
			msg = msg[:512]
		}
		e.Details["error"] = msg
	}
	o.audit.Record(e)
}

// toolRefused audits an MCP tool call or A2A operation refused for a
// missing scope.
func (o *observer) toolRefused(ctx context.Context, what string, scope httpserver.Scope) {
	o.audit.Record(byCaller(ctx, audit.Entry{
		Action:  audit.ActionAuthFailure,
		Outcome: audit.OutcomeDenied,
		Code:    httpserver.CodePermissionDenied,
		Details: map[string]string{"route": what, "reason": fmt.Sprintf("missing scope %s", scope)},
	}))
}

// auditedDelegations is the delegation client as the front-ends and the
// router see it: every Delegate call is audited with the caller's token.
type auditedDelegations struct {
	*delegation.Client
	obs *observer
}

func (d auditedDelegations) Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error) {
	rec, err := d.Client.Delegate(ctx, req)
	d.obs.delegated(ctx, req, rec, err)
	return rec, err
}

// searcher is the discovery engine as the front-ends see it: timed into
// agentmesh_discover_duration_seconds when there are metrics.
func (m *mesh) searcher() discovery.Searcher {
	if m.obs.metrics == nil {
		return m.Engine()
	}
	return m.obs.metrics.Searcher(m.Engine())
}

// delegator is the delegation client as the front-ends and the router
// see it.
func (m *mesh) delegator() auditedDelegations {
	return auditedDelegations{Client: m.Delegation(), obs: m.obs}
}
