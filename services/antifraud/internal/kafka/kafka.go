// Package kafka turns TransferenciaSolicitada records into antifraud
// decisions: the handler the consumer loop runs for the antifraude group.
package kafka

import (
	"context"
	"fmt"
	"log/slog"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
)

// Analyser decides a requested transfer (analysis.Service).
type Analyser interface {
	Analyse(ctx context.Context, req events.Requested, traceparent string) (analysis.Result, error)
}

// NewHandler returns the handler of the requested topic. A record that
// cannot be decoded, misses a required field or carries another event type
// is returned as a permanent error (the loop sends it to the DLT at once);
// any other failure is returned as is, for the loop to retry.
func NewHandler(a Analyser, log *slog.Logger) consumer.Handler {
	return func(ctx context.Context, m kafkago.Message) error {
		if t := broker.Header(m, events.HeaderEventType); t != "" && t != events.TypeRequested {
			return consumer.Permanent(fmt.Errorf("unexpected event type %q on %s", t, m.Topic))
		}
		var req events.Requested
		if err := events.Decode(m.Value, &req); err != nil {
			return fmt.Errorf("decode %s: %w", events.TypeRequested, err)
		}
		res, err := a.Analyse(ctx, req, broker.Header(m, events.HeaderTraceparent))
		if err != nil {
			return err
		}
		d := res.Decision
		if res.Duplicate {
			if d.SourceAccount != req.SourceAccount || d.DestAccount != req.DestAccount ||
				d.AmountCents != req.AmountCents || d.Currency != req.Currency || d.ClientID != req.ClientID {
				// The decision stands; an operator should know that the
				// same transfer id arrived with other contents.
				log.WarnContext(ctx, "transfer already decided with other contents; request ignored",
					"transfer_id", d.TransferID, "evento_id", req.EventID, "decided_evento_id", d.RequestEventID)
				return nil
			}
			log.InfoContext(ctx, "transfer already decided; redelivery ignored",
				"transfer_id", d.TransferID, "evento_id", req.EventID, "outcome", d.Outcome)
			return nil
		}
		log.InfoContext(ctx, "transfer decided",
			"transfer_id", d.TransferID, "evento_id", req.EventID, "outcome", d.Outcome,
			"score", d.Score, "rules", d.Rules, "explanation", res.Explanation, "output_evento_id", d.EventID)
		return nil
	}
}
