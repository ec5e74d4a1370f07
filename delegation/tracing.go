package delegation

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/internal/tracing"
)

// tracerName is the instrumentation scope of the client's spans.
const tracerName = "github.com/agentmesh/agentmesh/delegation"

// Span names.
const (
	spanDelegate = "delegation.delegate"
	spanAttempt  = "delegation.attempt"
)

// startDelegate starts the span of one Delegate call. Attributes are only
// computed when the span records: with tracing off a delegation pays for
// one no-op span and nothing else.
func (c *Client) startDelegate(ctx context.Context, req *Request) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(ctx, spanDelegate)
	if span.IsRecording() {
		span.SetAttributes(
			tracing.TaskLength.Int(len(req.Task)),
			tracing.Async.Bool(req.Async),
		)
		if req.Target != "" {
			span.SetAttributes(tracing.AgentName.String(req.Target))
		}
	}
	return ctx, span
}

// endDelegate ends the span of a Delegate call that returned rec and err.
func endDelegate(span trace.Span, rec *Record, err error) {
	if span.IsRecording() {
		switch {
		case err != nil:
			code := Code(err)
			if code == "" {
				code = contextCode(err)
			}
			tracing.Fail(span, code)
		default:
			span.SetAttributes(
				tracing.AgentName.String(rec.TargetAgent),
				tracing.DelegationID.String(rec.ID),
				tracing.DelegationStatus.String(string(rec.Status)),
				tracing.Attempt.Int(rec.Attempts),
				tracing.Depth.Int(rec.Depth),
			)
			if rec.Code != "" {
				span.SetAttributes(tracing.DelegationCode.String(rec.Code))
			}
			if rec.Status != StatusCompleted && rec.Status != StatusAccepted {
				tracing.Fail(span, rec.Code)
			}
		}
	}
	span.End()
}

// clientSpan are the start options of an attempt's span, built once.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// startAttempt starts the client span of one attempt to reach the agent.
func (c *Client) startAttempt(ctx context.Context, p *plan, id string, attempt int) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(ctx, spanAttempt, clientSpan...)
	if span.IsRecording() {
		span.SetAttributes(
			tracing.AgentName.String(p.agent.Name),
			tracing.AgentProtocol.String(string(protocolOf(&p.agent))),
			tracing.DelegationID.String(id),
			tracing.Attempt.Int(attempt),
		)
	}
	return ctx, span
}

// endAttempt ends the span of an attempt that got reply and err. Only the
// failure's code, HTTP status and retryability are recorded: its message
// may quote the agent's reply.
func endAttempt(span trace.Span, reply Reply, err error) {
	if span.IsRecording() {
		var te *TransportError
		switch {
		case errors.As(err, &te):
			if te.Status != 0 {
				span.SetAttributes(tracing.HTTPStatus.Int(te.Status))
			}
			code := te.Code
			if code == "" {
				code = CodeAgentError
			}
			span.SetAttributes(tracing.DelegationCode.String(code), tracing.Retryable.Bool(te.Retryable))
			tracing.Fail(span, code)
		case err != nil:
			span.SetAttributes(tracing.DelegationCode.String(CodeAgentError))
			tracing.Fail(span, CodeAgentError)
		case reply.Accepted:
			span.SetAttributes(tracing.DelegationStatus.String(string(StatusAccepted)))
		default:
			span.SetAttributes(tracing.DelegationStatus.String(string(StatusCompleted)))
		}
	}
	span.End()
}

// contextCode is the code of a Delegate call refused because its context
// was done.
func contextCode(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	}
	return "internal"
}
