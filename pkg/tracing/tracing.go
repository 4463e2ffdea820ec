// Package tracing sets up OpenTelemetry for a service and carries the W3C
// trace context across the suite's boundaries: from an HTTP request into an
// outbox row (its traceparent header), from the outbox row into the Kafka
// record, and from a consumed record into the consumer's work, so that one
// trace shows a transfer from POST to notification.
//
// Exporting is off by default. It is on when the standard variables ask for
// it: OTEL_TRACES_EXPORTER=otlp, or OTEL_EXPORTER_OTLP_ENDPOINT /
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set (the OTLP/HTTP exporter reads the
// other OTEL_EXPORTER_OTLP_* variables itself). With exporting off, the
// context still propagates: an incoming traceparent is passed on unchanged.
package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names the suite's tracer.
const InstrumentationName = "github.com/paysuite/payments"

var propagator = propagation.TraceContext{}

func init() {
	otel.SetTextMapPropagator(propagator)
}

// Setup installs a tracer provider exporting over OTLP/HTTP when getenv asks
// for it (see the package doc) and returns its shutdown; otherwise it leaves
// the no-op provider and returns a no-op shutdown.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if getenv("OTEL_TRACES_EXPORTER") != "otlp" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" &&
		getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return noop, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("otlp exporter: %w", err)
	}
	name := getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = service
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Propagator is the suite's propagator: W3C Trace Context.
func Propagator() propagation.TextMapPropagator { return propagator }

// Tracer returns the suite's tracer from the global provider.
func Tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(InstrumentationName) }

// Traceparent returns the W3C traceparent of ctx's span, or "".
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent returns ctx carrying the remote span context of
// traceparent (unchanged ctx when it is empty or invalid).
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// TraceID returns the trace id of ctx's span, or "" (for logs).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
