// Package consume is the transfers service's Kafka adapter: the projection
// that reads settlement results (TransferenciaLiquidada,
// TransferenciaRejeitada) and moves transfers out of PENDENTE, or holds a
// result whose transfer it does not know for an operator.
package consume

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// Group is the projection's consumer group (CONTRACTS.md section 3).
const Group = "transferencias-projecao"

// reasonRE bounds a motivo to the shape of the contract's reasons, so that
// an unknown future reason is kept but garbage is refused.
var reasonRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// Projection handles records of the settled and rejected topics.
type Projection struct {
	svc      *transfer.Service
	settled  string
	rejected string
	log      *slog.Logger
}

// NewProjection returns the projection of the given topics onto svc.
func NewProjection(svc *transfer.Service, topics events.Topics, log *slog.Logger) *Projection {
	return &Projection{svc: svc, settled: topics.Settled, rejected: topics.Rejected, log: log}
}

// Topics returns the topics the projection reads.
func (p *Projection) Topics() []string { return []string{p.settled, p.rejected} }

// Handle is a consumer.Handler: it applies the results of one partition's
// records, in offset order, in one transaction and one statement. A record
// that cannot be decoded, or whose content the contract forbids (an
// eventoId that is not the one derived for its transfer and type,
// events.CheckResultID, included), is a poison message: it stops the batch
// there, the results before it are applied, and Handle returns a
// consumer.BatchFailure naming it, so that the consumer loop commits them,
// sends it straight to the DLT (never marked in the inbox, so it burns no
// event id) and hands the rest to Handle again. A database failure applies
// nothing and is returned for the loop to retry.
func (p *Projection) Handle(ctx context.Context, ms []broker.Record) error {
	rs, stop := consumer.DecodeUntil(ms, func(_ int, m broker.Record) (transfer.Result, error) { return p.decode(m) })
	if len(rs) > 0 {
		out, err := p.svc.ApplyResults(ctx, rs)
		if err != nil {
			return err
		}
		for i, r := range rs {
			p.logResult(ctx, r, out[i])
		}
	}
	return consumer.StoppedAt(len(rs), stop)
}

func (p *Projection) decode(m broker.Record) (transfer.Result, error) {
	switch m.Topic {
	case p.settled:
		var ev events.Settled
		if err := events.Decode(m.Value, &ev); err != nil {
			return transfer.Result{}, fmt.Errorf("decode %s: %w", events.TypeSettled, err)
		}
		if err := events.CheckResultID(events.TypeSettled, ev.EventID, ev.TransferID); err != nil {
			return transfer.Result{}, err
		}
		return transfer.Result{EventID: ev.EventID, TransferID: ev.TransferID, Status: transfer.StatusSettled,
			RequestEventID: ev.RequestEventID, Type: events.TypeSettled, Payload: m.Value}, nil
	case p.rejected:
		var ev events.Rejected
		if err := events.Decode(m.Value, &ev); err != nil {
			return transfer.Result{}, fmt.Errorf("decode %s: %w", events.TypeRejected, err)
		}
		if !reasonRE.MatchString(ev.Reason) {
			return transfer.Result{}, consumer.Permanent(fmt.Errorf("%w: motivo is not a reason code", events.ErrMalformed))
		}
		if err := events.CheckResultID(events.TypeRejected, ev.EventID, ev.TransferID); err != nil {
			return transfer.Result{}, err
		}
		return transfer.Result{EventID: ev.EventID, TransferID: ev.TransferID, Status: transfer.StatusRejected, Reason: ev.Reason,
			RequestEventID: ev.RequestEventID, Type: events.TypeRejected, Payload: m.Value}, nil
	default:
		return transfer.Result{}, consumer.Permanent(fmt.Errorf("projection: unexpected topic %q", m.Topic))
	}
}

func (p *Projection) logResult(ctx context.Context, r transfer.Result, out transfer.Outcome) {
	switch out {
	case transfer.Moved:
		p.log.InfoContext(ctx, "transfer result projected", "transfer_id", r.TransferID, "evento_id", r.EventID, "status", r.Status)
	case transfer.Held:
		// No transfer has this id, or not the request it was decided for:
		// kept in resultado_retido, re-applied by the store's re-apply
		// task once the transfer of that request is visible, else left to
		// an operator (transfers_results_held, the console's Held results).
		p.log.WarnContext(ctx, "transfer result held: no transfer with its request yet", "transfer_id", r.TransferID,
			"evento_id", r.EventID, "decided_evento_id", r.RequestEventID, "status", r.Status)
	default:
		// A duplicate, or a late result for a transfer already final.
		p.log.DebugContext(ctx, "transfer result changed nothing", "transfer_id", r.TransferID, "evento_id", r.EventID, "status", r.Status)
	}
}
