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

// Refunder decides refunds, in order, in one transaction; *ledger.Service
// is one.
type Refunder interface {
	Refund(ctx context.Context, fs []ledger.Refund) ([]ledger.RefundResult, error)
}

// Refunds turns EstornoSolicitado records into refunds (CONTRACTS.md
// section 10).
type Refunds struct {
	refunder Refunder
	log      *slog.Logger
	metrics  *Metrics
}

// NewRefunds returns the handler over refunder. metrics may be nil.
func NewRefunds(refunder Refunder, log *slog.Logger, metrics *Metrics) *Refunds {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Refunds{refunder: refunder, log: log, metrics: metrics}
}

// DecodeRefund reads an EstornoSolicitado record. Errors wrap
// events.ErrMalformed: the record is poison and goes to the DLT at once.
func DecodeRefund(m broker.Record) (ledger.Refund, error) {
	var e events.RefundRequested
	if err := events.Decode(m.Value, &e); err != nil {
		return ledger.Refund{}, fmt.Errorf("decode %s at %s/%d/%d: %w", events.TypeRefundRequested, m.Topic, m.Partition, m.Offset, err)
	}
	return ledger.Refund{ID: e.RefundID, TransferID: e.TransferID, EventID: e.EventID, Source: e.SourceAccount,
		Dest: e.DestAccount, AmountCents: e.AmountCents, Currency: e.Currency, ClientID: e.ClientID, Operator: e.Operator,
		// Verified by the ledger's rules before anything else.
		Authorization: e.Authorization}, nil
}

// Handle decides the refunds fetched together, in offset order, in one
// transaction (a consumer.Handler), as Settlement.Handle settles
// transfers: a record that cannot be decoded stops the batch there, the
// refunds before it are decided and Handle returns a
// consumer.BatchFailure naming it. Every refund the ledger does not post
// is a rejection, a result like a settlement; so no refusal of one refund
// fails the others, and any error (the database) decides nothing and is
// retried by the loop's policy.
func (r *Refunds) Handle(ctx context.Context, ms []broker.Record) error {
	fs, poison := consumer.DecodeUntil(ms, func(i int, m broker.Record) (ledger.Refund, error) {
		f, err := DecodeRefund(m)
		f.Traceparent = consumer.Traceparent(ms, i)
		return f, err
	})
	if len(fs) > 0 {
		start := time.Now()
		rs, err := r.refunder.Refund(ctx, fs)
		if err != nil {
			return err
		}
		took := time.Since(start)
		for i, res := range rs {
			r.observe(ctx, res, ms[i], took)
		}
	}
	return consumer.StoppedAt(len(fs), poison)
}

func (r *Refunds) observe(ctx context.Context, res ledger.RefundResult, m broker.Record, took time.Duration) {
	result := string(res.Outcome)
	if res.Replayed {
		result = refundReplayed
	}
	r.metrics.Refunds.WithLabelValues(result, res.Reason).Inc()
	attrs := []any{"refund_id", res.RefundID, "transfer_id", res.TransferID, "outcome", string(res.Outcome),
		"duration_ms", took.Milliseconds()}
	if res.Reason != "" {
		attrs = append(attrs, "reason", res.Reason)
	}
	switch {
	case res.Replayed:
		r.log.InfoContext(ctx, "refund already decided; duplicate delivery ignored", attrs...)
	case res.Outcome == ledger.RefundSettled:
		r.log.InfoContext(ctx, "refund settled", attrs...)
	default:
		r.log.InfoContext(ctx, "refund rejected", attrs...)
	}
}
