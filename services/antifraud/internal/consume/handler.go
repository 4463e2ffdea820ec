// Package consume turns TransferenciaSolicitada records into antifraud
// decisions: the handler the consumer loop runs for the antifraude group.
package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
)

// Analyser decides requested transfers in one transaction
// (analysis.Service).
type Analyser interface {
	AnalyseBatch(ctx context.Context, reqs []analysis.Request) ([]analysis.Result, error)
}

// NewHandler returns the handler of the requested topic: the records
// fetched together decided in one transaction (analysis.Service.AnalyseBatch).
// A record that cannot be decoded, misses a required field or carries
// another event type stops the batch there: the records before it are
// decided, and the handler returns a consumer.BatchFailure naming it with
// its permanent error, so that the consumer loop commits them, sends it to
// the DLT at once and hands the rest to the handler again. Any other
// failure leaves nothing decided and is returned as is, for the loop to
// retry.
func NewHandler(a Analyser, log *slog.Logger) consumer.Handler {
	return func(ctx context.Context, ms []broker.Record) error {
		reqs, stop := consumer.DecodeUntil(ms, func(i int, m broker.Record) (analysis.Request, error) {
			req, err := decode(m)
			return analysis.Request{Transfer: req, Traceparent: consumer.Traceparent(ms, i)}, err
		})
		if len(reqs) > 0 {
			rs, err := a.AnalyseBatch(ctx, reqs)
			if errors.Is(err, analysis.ErrDuplicate) {
				// A concurrent instance decided one of these transfers
				// under another source account's lock: its decision is
				// committed by now, and a second run returns it as a
				// duplicate (as analysis.Service.Analyse does for one).
				rs, err = a.AnalyseBatch(ctx, reqs)
			}
			if err != nil {
				return err
			}
			for i, r := range rs {
				logResult(ctx, log, reqs[i].Transfer, r)
			}
		}
		return consumer.StoppedAt(len(reqs), stop)
	}
}

func decode(m broker.Record) (events.Requested, error) {
	if t := m.Header(events.HeaderEventType); t != "" && t != events.TypeRequested {
		return events.Requested{}, consumer.Permanent(fmt.Errorf("unexpected event type %q on %s", t, m.Topic))
	}
	var req events.Requested
	if err := events.Decode(m.Value, &req); err != nil {
		return events.Requested{}, fmt.Errorf("decode %s: %w", events.TypeRequested, err)
	}
	return req, nil
}

func logResult(ctx context.Context, log *slog.Logger, req events.Requested, res analysis.Result) {
	d := res.Decision
	if res.Duplicate {
		if d.SourceAccount != req.SourceAccount || d.DestAccount != req.DestAccount ||
			d.AmountCents != req.AmountCents || d.Currency != req.Currency || d.ClientID != req.ClientID {
			// The decision stands; an operator should know that the
			// same transfer id arrived with other contents.
			log.WarnContext(ctx, "transfer already decided with other contents; request ignored",
				"transfer_id", d.TransferID, "evento_id", req.EventID, "decided_evento_id", d.RequestEventID)
			return
		}
		log.InfoContext(ctx, "transfer already decided; redelivery ignored",
			"transfer_id", d.TransferID, "evento_id", req.EventID, "outcome", d.Outcome)
		return
	}
	log.InfoContext(ctx, "transfer decided",
		"transfer_id", d.TransferID, "evento_id", req.EventID, "outcome", d.Outcome,
		"score", d.Score, "rules", d.Rules, "explanation", res.Explanation, "output_evento_id", d.EventID)
}
