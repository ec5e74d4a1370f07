package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
)

// tracingFlushTimeout bounds the export of the last spans at exit.
const tracingFlushTimeout = 5 * time.Second

// setupTracing turns OpenTelemetry tracing on (docs/OPERATIONS.md#tracing) when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set:
// it installs, as the process's global tracer provider and propagator, an
// SDK provider that batches spans to an OTLP/HTTP exporter and the W3C
// TraceContext propagator. The library packages use the globals (their
// Options leave TracerProvider and Propagator nil), so nothing else is
// wired. The exporter and the SDK read the other standard variables
// themselves (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _PROTOCOL is
// http/protobuf only, OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES).
//
// It returns the function to call at exit, which exports the spans still
// buffered (for at most 5 s) and stops the provider. With neither variable
// set, or with OTEL_SDK_DISABLED=true, it installs nothing: the globals
// stay the API's no-ops and the returned function does nothing.
func setupTracing(ctx context.Context, env func(string) string, log *slog.Logger) (stop func(), err error) {
	noop := func() {}
	if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" ||
		env("OTEL_SDK_DISABLED") == "true" {
		return noop, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// service.name=agentmesh and its version, which OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES may override.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName("agentmesh"), semconv.ServiceVersion(buildinfo.Version())),
		resource.WithFromEnv(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return noop, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	// Export failures are reported here (by default the SDK prints them
	// with the standard logger).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", "err", err)
	}))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	log.Info("tracing on: exporting spans over OTLP/HTTP")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: flushing spans at exit failed", "err", err)
		}
	}, nil
}
