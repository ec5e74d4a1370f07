package httpserver

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/internal/tracing"
)

// tracerName is the instrumentation scope of the server's spans.
const tracerName = "github.com/agentmesh/agentmesh/httpserver"

// Attribute keys of the OpenTelemetry semantic conventions for HTTP
// server spans.
const (
	attrMethod   = attribute.Key("http.request.method")
	attrRoute    = attribute.Key("http.route")
	attrURLPath  = attribute.Key("url.path")
	attrScheme   = attribute.Key("url.scheme")
	attrProtocol = attribute.Key("network.protocol.version")
)

// serverSpan are the start options of a request's span, built once.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// startSpan continues the trace of r's headers (with the TraceContext
// propagator, the W3C traceparent) and starts the server span of the
// request, named by its method until endSpan knows the route. The span
// is attached to the returned request's context, unless it is a no-op
// with no trace to continue: then r itself is returned, so tracing that
// is off costs one no-op span and no copy of the request.
func (s *Server) startSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx := s.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.tracer.Start(ctx, spanName(r.Method), serverSpan...)
	if !span.IsRecording() {
		if !span.SpanContext().IsValid() {
			return r, span
		}
		return r.WithContext(ctx), span
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// The path, never the query: a callback URL carries its secret there.
	span.SetAttributes(
		attrMethod.String(spanMethod(r.Method)),
		attrURLPath.String(r.URL.Path),
		attrScheme.String(scheme),
		attrProtocol.String(strconv.Itoa(r.ProtoMajor)+"."+strconv.Itoa(r.ProtoMinor)),
	)
	return r.WithContext(ctx), span
}

// endSpan ends the server span of rec's request: named "METHOD route" once
// a route matched, with its status; a 5xx marks it failed.
func endSpan(rec *recorder, route string, status int) {
	span := rec.span
	if span == nil {
		return
	}
	if span.IsRecording() {
		if route != routeUnmatched && route != routePreflight {
			path := route
			if i := strings.IndexByte(route, ' '); i >= 0 {
				path = route[i+1:] // "POST /v1/request": the pattern's path
			}
			span.SetName(spanName(rec.r.Method) + " " + path)
			span.SetAttributes(attrRoute.String(path))
		}
		span.SetAttributes(
			tracing.RequestID.String(rec.id),
			tracing.HTTPStatus.Int(status),
		)
		if status >= 500 {
			code := strconv.Itoa(status)
			span.SetAttributes(tracing.ErrorType.String(code))
			span.SetStatus(codes.Error, code)
		}
	}
	span.End()
}

// spanMethod is the method as the semantic conventions name it: one of
// the standard methods, else _OTHER (the method is client input).
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch,
		http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// spanName is the name of a request's span before its route is known:
// its method, or HTTP for a method that is not a standard one.
func spanName(m string) string {
	if m = spanMethod(m); m == "_OTHER" {
		return "HTTP"
	}
	return m
}
