package routing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/internal/tracing"
)

// tracerName is the instrumentation scope of the router's spans.
const tracerName = "github.com/agentmesh/agentmesh/routing"

// Span names: a routed request's span, and its steps under it.
const (
	spanRoute    = "routing.route"
	spanClassify = "routing.classify"
	spanGate     = "routing.gate"
	spanDispatch = "routing.dispatch"
)

// Attributes are computed only when a span records, so a router with
// tracing off pays for no-op spans and nothing else. No span carries the
// input's text: its length only.

// endRoute ends the span of Handle, which answered resp or err.
func endRoute(span trace.Span, t *turn, resp *Response, err error) {
	if span.IsRecording() {
		if t != nil {
			span.SetAttributes(tracing.RequestID.String(t.id), tracing.TaskLength.Int(len(t.req.Input)))
		}
		if err != nil {
			tracing.Fail(span, routeErrorCode(err))
		} else {
			span.SetAttributes(
				tracing.Decision.String(string(resp.Decision)),
				tracing.Reason.String(string(resp.Reason)),
				tracing.Confidence.Float64(resp.Confidence),
			)
			if resp.AgentID != "" {
				span.SetAttributes(tracing.AgentName.String(resp.AgentID))
			}
			if resp.DelegationID != "" {
				span.SetAttributes(tracing.DelegationID.String(resp.DelegationID))
			}
		}
	}
	span.End()
}

// routeErrorCode is the code of an error of Handle, as the HTTP API
// reports it.
func routeErrorCode(err error) string {
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return "invalid_argument"
	case errors.Is(err, ErrNoDefaultAgent):
		return "no_default_agent"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "internal"
}

// startClassify starts the span of classifying text.
func (r *Router) startClassify(ctx context.Context, text string) (context.Context, trace.Span) {
	ctx, span := r.tracer.Start(ctx, spanClassify)
	if span.IsRecording() {
		span.SetAttributes(tracing.TaskLength.Int(len(text)))
	}
	return ctx, span
}

// endClassify ends the span of a classification that returned cls and err.
func endClassify(span trace.Span, cls *Classification, err error) {
	if span.IsRecording() {
		if err != nil {
			tracing.Fail(span, "classifier_error")
		} else {
			span.SetAttributes(
				tracing.ClassifiedAgent.String(cls.AgentID),
				tracing.Confidence.Float64(cls.Confidence),
				tracing.Ambiguous.Bool(cls.Ambiguous),
				tracing.Language.String(cls.DetectedLanguage),
			)
		}
	}
	span.End()
}

// gate runs [Gate] under its span.
func (r *Router) gate(ctx context.Context, in GateInput) (Decision, error) {
	_, span := r.tracer.Start(ctx, spanGate)
	dec, err := Gate(in)
	if span.IsRecording() {
		span.SetAttributes(
			tracing.ClassifiedAgent.String(in.Classification.AgentID),
			tracing.Clarification.Bool(in.Clarification),
			tracing.Decision.String(string(dec.Action)),
			tracing.Reason.String(string(dec.Reason)),
			tracing.AgentName.String(dec.Agent),
		)
		if err != nil {
			tracing.Fail(span, routeErrorCode(err))
		}
	}
	span.End()
	return dec, err
}

// startDispatch starts the span of dispatching t.
func (r *Router) startDispatch(ctx context.Context, t *turn) (context.Context, trace.Span) {
	ctx, span := r.tracer.Start(ctx, spanDispatch)
	if span.IsRecording() {
		span.SetAttributes(
			tracing.AgentName.String(t.dec.Agent),
			tracing.Decision.String(string(t.dec.Action)),
			tracing.Reason.String(string(t.dec.Reason)),
		)
	}
	return ctx, span
}

// endDispatch ends the span of a dispatch that answered resp or err; target
// is the agent first tried.
func endDispatch(span trace.Span, target string, resp *Response, err error) {
	if span.IsRecording() {
		if err != nil {
			tracing.Fail(span, routeErrorCode(err))
		} else {
			span.SetAttributes(
				tracing.AgentName.String(resp.AgentID),
				tracing.Fallback.Bool(resp.AgentID != target),
				tracing.DelegationID.String(resp.DelegationID),
			)
		}
	}
	span.End()
}
