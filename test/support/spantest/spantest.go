// Package spantest records the spans a test makes: it installs an
// in-memory, always-sampling tracer provider as the global one (the suite's
// tracing and otelhttp read the global provider) until the test ends. A
// test that uses it must not run beside other tests of its process that
// trace: it is not parallel, or its package holds it alone.
package spantest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Record installs the recording provider until tb ends, then puts the
// previous one back, and returns the recorder of the spans.
func Record(tb testing.TB) *tracetest.SpanRecorder {
	tb.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	tb.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}
