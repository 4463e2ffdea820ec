package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// Closer applies captures and cancellations of reservations;
// *ledger.Service is one.
type Closer interface {
	CloseReservations(ctx context.Context, cs []ledger.Command) ([]ledger.Result, error)
	CloseReservation(ctx context.Context, c ledger.Command) (ledger.Result, error)
}

// Commands turns CapturaSolicitada and CancelamentoSolicitado records into
// the closing of reservations (CONTRACTS.md section 9).
type Commands struct {
	closer  Closer
	topics  events.Topics
	log     *slog.Logger
	metrics *Metrics
}

// NewCommands returns the handler over closer, reading the command topics
// of topics. metrics may be nil.
func NewCommands(closer Closer, topics events.Topics, log *slog.Logger, metrics *Metrics) *Commands {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Commands{closer: closer, topics: topics, log: log, metrics: metrics}
}

// Decode reads a command record by the topic it was read from (never by a
// header): CapturaSolicitada from CaptureRequested, CancelamentoSolicitado
// from CancelRequested. Errors wrap events.ErrMalformed: the record is
// poison and goes to the DLT at once.
func (c *Commands) Decode(m broker.Record) (ledger.Command, error) {
	where := fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)
	switch m.Topic {
	case c.topics.CaptureRequested:
		var e events.CaptureRequested
		if err := events.Decode(m.Value, &e); err != nil {
			return ledger.Command{}, fmt.Errorf("decode %s at %s: %w", events.TypeCaptureRequested, where, err)
		}
		return ledger.Command{Kind: ledger.Capture, TransferID: e.TransferID, EventID: e.EventID, Source: e.SourceAccount,
			AmountCents: e.AmountCents, ClientID: e.ClientID}, nil
	case c.topics.CancelRequested:
		var e events.CancelRequested
		if err := events.Decode(m.Value, &e); err != nil {
			return ledger.Command{}, fmt.Errorf("decode %s at %s: %w", events.TypeCancelRequested, where, err)
		}
		return ledger.Command{Kind: ledger.Cancel, TransferID: e.TransferID, EventID: e.EventID, Source: e.SourceAccount,
			ClientID: e.ClientID}, nil
	}
	return ledger.Command{}, fmt.Errorf("record at %s: %w: not a command topic", where, events.ErrMalformed)
}

// Handle applies the commands fetched together, in offset order, in one
// transaction (a consumer.Handler). A record that cannot be decoded stops
// the batch there, as in Settlement.Handle. When the batch's transaction
// fails on a command the ledger refuses (ErrNotReserved,
// ErrCaptureAmount, ErrForeignCommand), the commands are applied again
// one by one, each in its own transaction, so that the refused one
// alone is named in a BatchFailure and the others are applied. The
// refused one is disposed of by the loop's policy: ErrCaptureAmount and
// ErrForeignCommand as consumer.Permanent errors (the DLT at once),
// ErrNotReserved retried in place first (BlockingRetries: 5 retries over
// 15.5 s), since the ledger may be behind its own reservation. A capture, cancellation or
// expiry that finds the reservation closed is AlreadyClosed: a success
// that changed nothing.
func (c *Commands) Handle(ctx context.Context, ms []broker.Record) error {
	cs, poison := consumer.DecodeUntil(ms, func(i int, m broker.Record) (ledger.Command, error) {
		cmd, err := c.Decode(m)
		cmd.Traceparent = consumer.Traceparent(ms, i)
		return cmd, err
	})
	if len(cs) > 0 {
		start := time.Now()
		rs, err := c.closer.CloseReservations(ctx, cs)
		if err != nil {
			if !refused(err) || len(cs) == 1 {
				return classify(err)
			}
			return c.oneByOne(ctx, ms, cs, poison)
		}
		took := time.Since(start)
		for i, r := range rs {
			c.observe(ctx, r, ms[i], took)
		}
	}
	return consumer.StoppedAt(len(cs), poison)
}

// oneByOne applies cs, the decoded prefix of ms, each in its own
// transaction, and stops at the first that fails.
func (c *Commands) oneByOne(ctx context.Context, ms []broker.Record, cs []ledger.Command, poison error) error {
	for i, cmd := range cs {
		start := time.Now()
		r, err := c.closer.CloseReservation(ctx, cmd)
		if err != nil {
			return consumer.StoppedAt(i, classify(err))
		}
		c.observe(ctx, r, ms[i], time.Since(start))
	}
	return consumer.StoppedAt(len(cs), poison)
}

// refused reports whether err is the ledger's refusal of a command: a
// forged or impossible one, or one the ledger has no reservation for yet.
func refused(err error) bool {
	return errors.Is(err, ledger.ErrNotReserved) || permanent(err)
}

// permanent reports the refusals no retry can change: the command
// contradicts the reservation.
func permanent(err error) bool {
	return errors.Is(err, ledger.ErrCaptureAmount) || errors.Is(err, ledger.ErrForeignCommand)
}

// classify marks the permanent refusals Permanent; any other error (the
// database, ErrNotReserved) is retried by the loop's policy.
func classify(err error) error {
	if permanent(err) {
		return consumer.Permanent(err)
	}
	return err
}

func (c *Commands) observe(ctx context.Context, r ledger.Result, m broker.Record, took time.Duration) {
	c.metrics.Closings.WithLabelValues(string(r.Outcome)).Inc()
	attrs := []any{"transfer_id", r.TransferID, "evento_id", m.Header(events.HeaderEventID), "topic", m.Topic,
		"partition", m.Partition, "offset", m.Offset, "outcome", string(r.Outcome), "duration_ms", took.Milliseconds()}
	if r.Outcome == ledger.AlreadyClosed {
		c.log.InfoContext(ctx, "reservation already closed; command changed nothing", attrs...)
		return
	}
	if r.Reason != "" {
		attrs = append(attrs, "motivo", r.Reason)
	}
	c.log.InfoContext(ctx, "reservation closed", attrs...)
}
