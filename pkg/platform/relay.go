package platform

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/outbox"
)

// Relay is the outbox relay a service runs: *outbox.Relay (polling) or
// *outbox.LogicalRelay (OUTBOX_RELAY=logical). Either reads its backlog
// the same way (admission control).
type Relay interface {
	Run(ctx context.Context) error
	outbox.BacklogReader
}

// newRelay builds the relay OUTBOX_RELAY chooses. In polling mode it also
// watches for a logical relay's slot left behind (a service switched back):
// nobody reads it, and it holds WAL until it is dropped.
func newRelay(b *Base, cfg Config, log *slog.Logger, reg prometheus.Registerer) Relay {
	metrics := outbox.NewMetrics(reg)
	logical := outbox.NewLogicalMetrics(reg)
	if cfg.RelayMode == RelayLogical {
		return outbox.NewLogicalRelay(b.Outbox, b.Producer, cfg.Logical, cfg.Relay, log, metrics, logical)
	}
	return &pollingRelay{Relay: outbox.NewRelay(b.Outbox, b.Producer, cfg.Relay, log, metrics), b: b, cfg: cfg, log: log, gauge: logical}
}

// pollingRelay is the polling relay plus the check for a slot left behind.
type pollingRelay struct {
	*outbox.Relay
	b     *Base
	cfg   Config
	log   *slog.Logger
	gauge *outbox.LogicalMetrics
}

func (p *pollingRelay) Run(ctx context.Context) error {
	if slot, found, err := outbox.LeftBehindSlot(ctx, p.b.DB, p.cfg.Logical); err == nil && found {
		p.gauge.LeftBehind.Set(1)
		p.log.ErrorContext(ctx, "a logical relay slot of this database is left behind: nobody reads it while the polling relay runs, and it holds WAL for good; "+
			"drop it (SELECT pg_drop_replication_slot('"+slot+"')) or run OUTBOX_RELAY=logical", "slot", slot)
	}
	return p.Relay.Run(ctx)
}
