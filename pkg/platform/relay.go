package platform

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
)

// Relay is the outbox relay a service runs: *outbox.Relay (polling) or
// *outbox.LogicalRelay (OUTBOX_RELAY=logical). Admission control reads the
// backlog from the outbox table itself, the same for every instance
// (services/transfers/internal/admission), not from a relay.
type Relay interface {
	Run(ctx context.Context) error
}

// NewRelay builds the relay OUTBOX_RELAY chooses, publishing ob's events
// (ob is the outbox of db) with producer; its metrics go to reg. It is
// built even when OUTBOX_RELAY_ENABLED=false; Serve then does not run it. In polling mode it also watches for a logical relay's
// slot left behind (a service switched back): nobody reads it, and it
// holds WAL until it is dropped.
func NewRelay(cfg Config, db *postgres.DB, ob *outbox.Outbox, producer *broker.Producer, log *slog.Logger, reg prometheus.Registerer) (Relay, error) {
	if err := cfg.Relay.Validate(); err != nil {
		return nil, err
	}
	metrics := outbox.NewMetrics(reg)
	logical := outbox.NewLogicalMetrics(reg)
	if cfg.RelayMode == RelayLogical {
		return outbox.NewLogicalRelay(ob, producer, cfg.Logical, cfg.Relay, log, metrics, logical), nil
	}
	return &pollingRelay{Relay: outbox.NewRelay(ob, producer, cfg.Relay, log, metrics), db: db, cfg: cfg, log: log, gauge: logical}, nil
}

// pollingRelay is the polling relay plus the check for a slot left behind.
type pollingRelay struct {
	*outbox.Relay
	db    *postgres.DB
	cfg   Config
	log   *slog.Logger
	gauge *outbox.LogicalMetrics
}

func (p *pollingRelay) Run(ctx context.Context) error {
	if slot, found, err := outbox.LeftBehindSlot(ctx, p.db, p.cfg.Logical); err == nil && found {
		p.gauge.LeftBehind.Set(1)
		p.log.ErrorContext(ctx, "a logical relay slot of this database is left behind: nobody reads it while the polling relay runs, and it holds WAL for good; "+
			"drop it (SELECT pg_drop_replication_slot('"+slot+"')) or run OUTBOX_RELAY=logical", "slot", slot)
	}
	return p.Relay.Run(ctx)
}
