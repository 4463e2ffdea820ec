// Package consume is the ledger's Kafka side: the settlement handler run by
// the suite's consumer loop on the analisada topic (the records of one
// partition fetched together, settled in one transaction), the handler of
// the commands on holds (captures and cancellations), and the monitor of
// its dead-letter topics.
package consume

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// Settler settles transfers, in order, in one transaction; *ledger.Service
// is one.
type Settler interface {
	Settle(ctx context.Context, ts []ledger.Transfer) ([]ledger.Result, error)
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
		// A hold reserves instead of posting; its expiry as the record
		// names it (the signature covers both), DefaultHoldTTL when none.
		Hold:      e.Capture == events.CaptureManual,
		ExpiresAt: e.ExpiresAt,
	}, nil
}

// Handle settles the records fetched together, in offset order, in one
// transaction (a consumer.Handler). It decodes them first: a record that
// cannot be decoded stops the batch there, the records before it are
// settled, and Handle returns a consumer.BatchFailure naming it with its
// decoding error, for the loop to commit the settled ones, send it to the
// DLT and hand the rest to Handle again. Any other error settles nothing,
// and the loop disposes of the first record by its policy.
func (s *Settlement) Handle(ctx context.Context, ms []broker.Record) error {
	ts, poison := consumer.DecodeUntil(ms, func(i int, m broker.Record) (ledger.Transfer, error) {
		t, err := Decode(m)
		t.Traceparent = consumer.Traceparent(ms, i)
		return t, err
	})
	if len(ts) > 0 {
		start := time.Now()
		rs, err := s.settler.Settle(ctx, ts)
		if err != nil {
			return err
		}
		s.metrics.BatchSize.Observe(float64(len(ts)))
		took := time.Since(start)
		for i, r := range rs {
			s.observe(ctx, r, ms[i], took)
		}
	}
	return consumer.StoppedAt(len(ts), poison)
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
	case ledger.Reserved:
		s.log.InfoContext(ctx, "hold reserved", attrs...)
	default:
		s.log.InfoContext(ctx, "transfer already processed; duplicate delivery ignored", attrs...)
	}
}
