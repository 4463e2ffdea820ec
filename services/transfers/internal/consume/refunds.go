package consume

import (
	"context"
	"fmt"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// decodeRefund decodes a refund result (EstornoLiquidado or
// EstornoRejeitado, by the topic it was read from). A record that does not
// decode, or whose eventoId is not the one derived for its refund and type
// (events.CheckRefundResultID), is a poison message.
func (p *Projection) decodeRefund(m broker.Record) (transfer.RefundResult, error) {
	var typ string
	var r transfer.RefundResult
	var err error
	if m.Topic == p.topics.RefundSettled {
		var ev events.RefundSettled
		typ, err = events.TypeRefundSettled, events.Decode(m.Value, &ev)
		r = transfer.RefundResult{EventID: ev.EventID, RefundID: ev.RefundID, TransferID: ev.TransferID,
			Status: transfer.RefundSettled, AmountCents: ev.AmountCents}
	} else {
		var ev events.RefundRejected
		typ, err = events.TypeRefundRejected, events.Decode(m.Value, &ev)
		r = transfer.RefundResult{EventID: ev.EventID, RefundID: ev.RefundID, TransferID: ev.TransferID,
			Status: transfer.RefundRejected, Reason: ev.Reason}
	}
	if err != nil {
		return transfer.RefundResult{}, fmt.Errorf("decode %s: %w", typ, err)
	}
	if err := events.CheckRefundResultID(typ, r.EventID, r.RefundID); err != nil {
		return transfer.RefundResult{}, err
	}
	return r, nil
}

// applyRefunds writes rs through the store and logs each one's outcome.
func (p *Projection) applyRefunds(ctx context.Context, rs []transfer.RefundResult) error {
	out, err := p.store.ApplyRefundResults(ctx, rs)
	if err != nil {
		return err
	}
	for i, r := range rs {
		attrs := []any{"transfer_id", r.TransferID, "refund_id", r.RefundID, "evento_id", r.EventID, "status", r.Status}
		switch out[i] {
		case transfer.Moved:
			p.log.InfoContext(ctx, "refund result projected", attrs...)
		case transfer.Unmatched:
			// Not recorded as processed: a redelivery (a DLT replay) applies
			// once the refund exists here.
			p.log.WarnContext(ctx, "refund result for no refund of this database: not applied", attrs...)
		default:
			p.log.DebugContext(ctx, "refund result changed nothing", attrs...)
		}
	}
	return nil
}
