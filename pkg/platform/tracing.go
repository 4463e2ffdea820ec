package platform

import (
	"context"
	"log/slog"
	"time"

	"github.com/paysuite/payments/pkg/tracing"
)

// StartTracing installs the OpenTelemetry exporter when the OTEL_*
// variables ask for it (see pkg/tracing) and returns the function that
// flushes and stops it. A failure to set it up is logged, not fatal: traces
// are an aid, payments must flow without them.
func StartTracing(ctx context.Context, service string, getenv func(string) string, log *slog.Logger) (stop func()) {
	shutdown, err := tracing.Setup(ctx, service, getenv)
	if err != nil {
		log.WarnContext(ctx, "tracing disabled", "err", err)
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.WarnContext(ctx, "flush traces", "err", err)
		}
	}
}
