// Package consume is the ledger's Kafka side: the settlement handlers run by
// the suite's consumer loop on the analisada topic (one record, or a batch
// of one partition's records in one transaction), and the monitor of its
// dead-letter topic.
package consume

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// Settler settles transfers; *ledger.Service is one.
type Settler interface {
	Settle(ctx context.Context, t ledger.Transfer) (ledger.Result, error)
	SettleBatch(ctx context.Context, ts []ledger.Transfer) ([]ledger.Result, error)
}

// Settlement turns TransferenciaAnalisada records into settlements.
type Settlement struct {
	settler Settler
	log     *slog.Logger
	metrics *Metrics
}

// NewSettlement returns the handlers over settler. metrics may be nil.
func NewSettlement(settler Settler, log *slog.Logger, metrics *Metrics) *Settlement {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Settlement{settler: settler, log: log, metrics: metrics}
}

// Decode reads a TransferenciaAnalisada record. Errors wrap
// events.ErrMalformed: the record is poison and goes to the DLT at once.
func Decode(m broker.Record) (ledger.Transfer, error) {
	var e events.Analysed
	if err := events.Decode(m.Value, &e); err != nil {
		return ledger.Transfer{}, fmt.Errorf("decode %s at %s/%d/%d: %w", events.TypeAnalysed, m.Topic, m.Partition, m.Offset, err)
	}
	return ledger.Transfer{
		ID:          e.TransferID,
		EventID:     e.EventID,
		Source:      e.SourceAccount,
		Dest:        e.DestAccount,
		AmountCents: e.AmountCents,
		Currency:    e.Currency,
		ClientID:    e.ClientID,
		// Verified by the ledger's rules before anything else.
		Authorization: e.Authorization,
		// The binding to the request, passed on to the result event.
		RequestEventID: e.RequestEventID,
	}, nil
}

// Handle settles one record in its own transaction (consumer.Handler).
// ctx carries the record's trace context (the consumer loop's span), which
// the outbox gives the result event.
func (s *Settlement) Handle(ctx context.Context, m broker.Record) error {
	t, err := Decode(m)
	if err != nil {
		return err
	}
	start := time.Now()
	r, err := s.settler.Settle(ctx, t)
	if err != nil {
		return err
	}
	s.metrics.BatchSize.Observe(1)
	s.observe(ctx, r, m, time.Since(start))
	return nil
}

// HandleBatch settles records of one partition, in offset order, in one
// transaction (consumer.BatchHandler): all or nothing. Any error, a poison
// record included, makes the consumer loop handle each record again with
// Handle, where a poison record goes to the DLT and a failing transfer is
// retried alone.
func (s *Settlement) HandleBatch(ctx context.Context, ms []broker.Record) error {
	ts := make([]ledger.Transfer, len(ms))
	for i, m := range ms {
		t, err := Decode(m)
		if err != nil {
			return err
		}
		// The batch's ctx carries no record's trace: each record's goes
		// with it (ledger.Transfer.Traceparent).
		t.Traceparent = m.Header(events.HeaderTraceparent)
		ts[i] = t
	}
	start := time.Now()
	rs, err := s.settler.SettleBatch(ctx, ts)
	if err != nil {
		return err
	}
	s.metrics.BatchSize.Observe(float64(len(ts)))
	took := time.Since(start)
	for i, r := range rs {
		s.observe(ctx, r, ms[i], took)
	}
	return nil
}

func (s *Settlement) observe(ctx context.Context, r ledger.Result, m broker.Record, took time.Duration) {
	s.metrics.Settlements.WithLabelValues(string(r.Outcome), r.Reason).Inc()
	attrs := []any{"transfer_id", r.TransferID, "evento_id", m.Header(events.HeaderEventID),
		"partition", m.Partition, "offset", m.Offset, "duration_ms", took.Milliseconds()}
	switch r.Outcome {
	case ledger.Settled:
		s.log.InfoContext(ctx, "transfer settled", attrs...)
	case ledger.Rejected:
		s.log.InfoContext(ctx, "transfer rejected", append(attrs, "motivo", r.Reason)...)
	default:
		s.log.InfoContext(ctx, "transfer already processed; duplicate delivery ignored", attrs...)
	}
}
