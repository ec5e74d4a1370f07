// Package tracing is what the library packages share for OpenTelemetry
// tracing (docs/OPERATIONS.md#tracing): resolving the tracer and the
// propagator an Options struct names (nil means the global ones), injecting
// the trace context into outgoing requests, marking a span failed, and the
// attribute keys of agentmesh spans.
//
// It depends on the OpenTelemetry API only, never on the SDK. Until a host
// installs a provider and a propagator (cmd/agentmesh does when
// OTEL_EXPORTER_OTLP_ENDPOINT is set), the globals are the API's no-ops:
// spans are not recorded, nothing is extracted from incoming requests and
// nothing is injected into outgoing ones.
//
// Spans carry names, ids, lengths and codes, never task or input text, an
// agent's reply or a token (docs/OPERATIONS.md#tracing): code that ends a
// span calls [Fail] with a code, not an error's text, which may quote any of
// those.
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
)

// Attribute keys of agentmesh spans, besides the OpenTelemetry semantic
// conventions' http.*, url.* and error.type.
const (
	// RequestID is the request id of an HTTP request (X-Request-Id) or of
	// a routed request.
	RequestID = attribute.Key("agentmesh.request.id")
	// AgentName is the agent a delegation or a dispatch went to.
	AgentName = attribute.Key("agentmesh.agent.name")
	// AgentProtocol is the agent's protocol: http, mcp, a2a, inprocess.
	AgentProtocol = attribute.Key("agentmesh.agent.protocol")
	// DelegationID is the id of a delegation record.
	DelegationID = attribute.Key("agentmesh.delegation.id")
	// DelegationStatus is a delegation's status when its span ended:
	// completed, accepted, failed, timeout, canceled.
	DelegationStatus = attribute.Key("agentmesh.delegation.status")
	// DelegationCode is the error code (docs/API.md#errors) of a failed
	// delegation or attempt.
	DelegationCode = attribute.Key("agentmesh.delegation.code")
	// Attempt is the number of an attempt (1 for the first) or, on a
	// delegation span, how many were made.
	Attempt = attribute.Key("agentmesh.delegation.attempt")
	// Retryable says whether a failed attempt could be retried.
	Retryable = attribute.Key("agentmesh.delegation.retryable")
	// Async is set on the span of an async delegation.
	Async = attribute.Key("agentmesh.delegation.async")
	// Depth is the delegation depth sent to the agent.
	Depth = attribute.Key("agentmesh.delegation.depth")
	// TaskLength is the length in bytes of a task or a routed input (its
	// text is never recorded).
	TaskLength = attribute.Key("agentmesh.task.length")
	// Decision is a routing decision: route, clarify or fallback.
	Decision = attribute.Key("agentmesh.routing.decision")
	// Reason is the code of a routing decision (confidence, session, …).
	Reason = attribute.Key("agentmesh.routing.reason")
	// ClassifiedAgent is the agent the classifier chose.
	ClassifiedAgent = attribute.Key("agentmesh.routing.classified_agent")
	// Confidence is the classifier's confidence in ClassifiedAgent.
	Confidence = attribute.Key("agentmesh.routing.confidence")
	// Ambiguous says whether the message fits more than one agent.
	Ambiguous = attribute.Key("agentmesh.routing.ambiguous")
	// Language is the detected language of a routed message.
	Language = attribute.Key("agentmesh.routing.language")
	// Clarification says whether the gate could ask a clarification.
	Clarification = attribute.Key("agentmesh.routing.clarification")
	// Fallback says whether a dispatch fell back to the default agent.
	Fallback = attribute.Key("agentmesh.routing.fallback")
	// HTTPStatus is the semantic conventions' http.response.status_code:
	// the status of an HTTP response, or of an agent's reply.
	HTTPStatus = attribute.Key("http.response.status_code")
	// ErrorType is the semantic conventions' error.type: an error code
	// (docs/API.md#errors), or an HTTP status code for HTTP server spans.
	ErrorType = attribute.Key("error.type")
)

// Tracer returns the tracer of the package pkg (its import path, the
// instrumentation scope) from tp. A nil tp means the global provider
// ([otel.GetTracerProvider]), which forwards to whatever provider the host
// installs, even later, and is a no-op until then.
func Tracer(tp trace.TracerProvider, pkg string) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(pkg, trace.WithInstrumentationVersion(buildinfo.Version()))
}

// Propagator returns p, or the global propagator
// ([otel.GetTextMapPropagator]) when p is nil: a no-op until the host
// installs one (it neither injects nor extracts anything).
func Propagator(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p == nil {
		return otel.GetTextMapPropagator()
	}
	return p
}

// Inject writes the trace context of ctx into h with p — with
// propagation.TraceContext, the W3C traceparent and tracestate headers.
// When ctx carries no valid span context (tracing is off and the request
// did not come with one) it writes nothing and does not call p at all.
func Inject(ctx context.Context, p propagation.TextMapPropagator, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	p.Inject(ctx, propagation.HeaderCarrier(h))
}

// InjectCopy is Inject for a RoundTripper, which must not modify its
// request: it returns h itself when there is nothing to inject, else a
// copy of h with the trace context of ctx.
func InjectCopy(ctx context.Context, p propagation.TextMapPropagator, h http.Header) http.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	h = h.Clone()
	if h == nil {
		h = make(http.Header)
	}
	p.Inject(ctx, propagation.HeaderCarrier(h))
	return h
}

// Fail marks span failed with code: its error.type attribute and an Error
// status described by code. Pass a code, never an error's text.
func Fail(span trace.Span, code string) {
	span.SetAttributes(ErrorType.String(code))
	span.SetStatus(codes.Error, code)
}
