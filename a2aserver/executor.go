package a2aserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Names of the artifacts of completed tasks.
const (
	ArtifactResult = "result" // the agent's result, of a delegation
	ArtifactAgents = "agents" // the ranked agents, of a discovery
)

// ReplyContextKey is the key, in the delegation context of a reply to an
// input-required task, of the id of the delegation that asked.
const ReplyContextKey = "inReplyTo"

// executor is the [a2asrv.AgentExecutor] of the mesh: it runs the skill a
// message asks for with the library and turns the outcome into task
// events.
type executor struct {
	search discovery.Searcher
	del    Delegations
	log    *slog.Logger
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

// originKey is the context key of the HTTP request's context, which the
// call interceptor sets for a blocking SendMessage: the execution runs on
// a context the SDK detached from the request, and a delegation should
// end when its caller goes away, as POST /v1/delegate's does.
type originKey struct{}

// Execute implements [a2asrv.AgentExecutor]: a new task (or the task a
// reply continues) goes working, then ends completed, input-required,
// failed or canceled.
func (x *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		// The interceptor checked the message; this only fails for a
		// request that did not go through it, before a task exists.
		in, err := parseIntent(ec.Message, ec.Metadata)
		if err != nil {
			yield(nil, err)
			return
		}
		if origin, ok := ctx.Value(originKey{}).(context.Context); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(origin, cancel)()
		}
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		for _, e := range x.run(ctx, ec, in) {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// run runs the skill and returns the events that end the task. A panic
// (a bug) fails the task with code internal.
func (x *executor) run(ctx context.Context, ec *a2asrv.ExecutorContext, in intent) (events []a2a.Event) {
	defer func() {
		if p := recover(); p != nil {
			x.log.Error("a2aserver: skill panicked", "skill", in.skill, "panic", fmt.Sprint(p))
			events = []a2a.Event{failedEvent(ec, apierr.CodeInternal, msgInternal, nil)}
		}
	}()
	if in.skill == a2acard.SkillDiscover {
		return x.discover(ctx, ec, in)
	}
	return x.delegate(ctx, ec, in)
}

// Cancel implements [a2asrv.AgentExecutor]. When the task is running here,
// the SDK delivers the canceled status to its execution, which cancels the
// execution's context and so the delegation.
func (x *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// discover answers the discovery skill: the ranked agents as a data part
// {"results": [...]} with the fields of GET /v1/discover, after a one-line
// summary.
func (x *executor) discover(ctx context.Context, ec *a2asrv.ExecutorContext, in intent) []a2a.Event {
	if err := ctx.Err(); err != nil {
		return []a2a.Event{x.refused(ec, err, nil)}
	}
	results, err := x.search.Search(in.text, &discovery.Query{Limit: in.limit})
	if err != nil {
		return []a2a.Event{x.refused(ec, err, nil)}
	}
	for i := range results {
		results[i].Agent = results[i].Agent.Redacted()
	}
	if results == nil {
		results = []discovery.Result{}
	}
	data, err := json.Marshal(map[string]any{"results": results})
	if err != nil {
		return []a2a.Event{x.refused(ec, err, nil)}
	}
	art := a2a.NewArtifactEvent(ec, a2a.NewTextPart(summary(results)), a2a.NewDataPart(json.RawMessage(data)))
	art.Artifact.Name = ArtifactAgents
	return []a2a.Event{art, a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)}
}

// summary is the one-line text of a discovery.
func summary(results []discovery.Result) string {
	if len(results) == 0 {
		return "No registered agent matches the query: try other words."
	}
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = fmt.Sprintf("%s (%.2f)", r.Agent.Name, r.Score)
	}
	noun := "agents match"
	if len(results) == 1 {
		noun = "agent matches"
	}
	return fmt.Sprintf("%d %s, best first: %s.", len(results), noun, strings.Join(names, ", "))
}

// delegate answers the delegation skill, as POST /v1/delegate does: to the
// named target, else to the best discovery match for the query (the text
// unless metadata gives one). A reply to an input-required task goes to
// the agent that asked.
func (x *executor) delegate(ctx context.Context, ec *a2asrv.ExecutorContext, in intent) []a2a.Event {
	req := delegation.Request{
		Target:      in.target,
		Query:       in.query,
		Task:        in.text,
		Context:     in.context,
		SourceAgent: in.source,
		Timeout:     in.timeout,
	}
	switch {
	case in.reply:
		prev := taskMeta(ec.StoredTask)
		req.Target, _ = prev[MetaTargetAgent].(string)
		if req.Target == "" {
			return []a2a.Event{failedEvent(ec, apierr.CodeInvalidArgument, "this task asked no question and cannot be continued: send a new message without a taskId", nil)}
		}
		if id, _ := prev[MetaDelegationID].(string); id != "" {
			req.Context = maps.Clone(req.Context)
			if req.Context == nil {
				req.Context = map[string]any{}
			}
			if _, set := req.Context[ReplyContextKey]; !set {
				req.Context[ReplyContextKey] = id
			}
		}
	case req.Target == "" && req.Query == "":
		req.Query = in.text
	}
	rec, err := x.del.Delegate(ctx, req)
	if err != nil {
		return []a2a.Event{x.refused(ec, err, &req)}
	}
	return outcome(ec, rec)
}

func taskMeta(t *a2a.Task) map[string]any {
	if t == nil {
		return nil
	}
	return t.Metadata
}

// outcome maps a delegation record to the events that end the task.
func outcome(ec *a2asrv.ExecutorContext, rec delegation.Record) []a2a.Event {
	meta := map[string]any{MetaDelegationID: rec.ID, MetaTargetAgent: rec.TargetAgent}
	switch {
	case rec.Status == delegation.StatusCompleted && rec.NeedsInput:
		question := resultText(rec.Result)
		if strings.TrimSpace(question) == "" {
			question = "The agent needs more input."
		}
		msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(question))
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, msg)
		ev.Metadata = meta
		return []a2a.Event{ev}
	case rec.Status == delegation.StatusCompleted:
		var events []a2a.Event
		if p := resultPart(rec.Result); p != nil {
			art := a2a.NewArtifactEvent(ec, p)
			art.Artifact.Name = ArtifactResult
			art.Artifact.Metadata = maps.Clone(meta)
			events = append(events, art)
		}
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)
		ev.Metadata = meta
		return append(events, ev)
	}
	code, msg := rec.Failure()
	text := fmt.Sprintf("delegation %s to %q %s: %s", rec.ID, rec.TargetAgent, rec.Status, msg)
	if rec.Status == delegation.StatusCanceled {
		ev := failedEvent(ec, code, text, meta)
		ev.Status.State = a2a.TaskStateCanceled
		return []a2a.Event{ev}
	}
	return []a2a.Event{failedEvent(ec, code, text, meta)}
}

// refused is the failed status of a skill the library refused before
// doing anything (no match, unknown target, depth, cycle, a bad query), or
// that could not run. Errors no package claims are logged, and shown only
// as code internal.
func (x *executor) refused(ec *a2asrv.ExecutorContext, err error, req *delegation.Request) *a2a.TaskStatusUpdateEvent {
	code, msg := classify(err)
	switch {
	case code == apierr.CodeInternal:
		x.log.Error("a2aserver: skill failed", "err", err)
	case errors.Is(err, delegation.ErrNotFound) && req != nil && req.Target != "":
		msg = fmt.Sprintf("no agent named %q (use the %s skill to find one)", req.Target, a2acard.SkillDiscover)
	case errors.Is(err, delegation.ErrNoMatch):
		msg = fmt.Sprintf("no registered agent matches the task (use the %s skill to see the agents, or name one with metadata %s)", a2acard.SkillDiscover, MetaTarget)
	}
	return failedEvent(ec, code, msg, nil)
}

// classify returns the code and safe message err describes itself with
// ([apierr.Describe]); an error that describes nothing is internal, and
// shown only as code internal.
func classify(err error) (code, msg string) {
	code, msg, ok := apierr.Describe(err)
	if !ok || code == apierr.CodeInternal {
		return apierr.CodeInternal, msgInternal
	}
	return code, msg
}

// msgInternal is the message of an internal error, whose text is logged.
const msgInternal = "internal error (logged by the server)"

// failedEvent is a failed status whose message text is "<code>: <msg>",
// with the code in the message's metadata and, merged with meta, in the
// task's.
func failedEvent(ec *a2asrv.ExecutorContext, code, msg string, meta map[string]any) *a2a.TaskStatusUpdateEvent {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(code+": "+msg))
	m.Metadata = map[string]any{MetaCode: code}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, m)
	ev.Metadata = maps.Clone(meta)
	if ev.Metadata == nil {
		ev.Metadata = map[string]any{}
	}
	ev.Metadata[MetaCode] = code
	return ev
}

// resultPart is the artifact part of a delegation result: a text part for
// a JSON string, a data part for any other JSON value, nil for none.
//
// Data parts hold the JSON itself (a json.RawMessage), not decoded
// values: the SDK copies events through encoding/gob, which turns empty
// arrays into nulls, so a decoded value would not reach the client as the
// agent sent it.
func resultPart(raw json.RawMessage) *a2a.Part {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return nil
	}
	if s, ok := v.(string); ok {
		return a2a.NewTextPart(s)
	}
	return a2a.NewDataPart(slices.Clone(raw))
}

// resultText is a result as text: a JSON string's value, else the JSON.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
