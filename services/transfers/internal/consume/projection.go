// Package consume is the transfers service's Kafka adapter: the projection
// that reads results (TransferenciaLiquidada, TransferenciaRejeitada, and a
// hold's TransferenciaReservada and TransferenciaCancelada, and the
// refunds' EstornoLiquidado and EstornoRejeitado, refunds.go), decodes them
// and hands them to its Store, which moves transfers forward
// (transfer.CanMove) or holds a result whose transfer it does not know (postgres.Store: the write, its deduplication and its counts);
// and the task that re-applies held results once their transfer is
// visible. It tells admission control what either settled.
package consume

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/google/uuid"

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

// Store is where the projection writes (postgres.Store).
type Store interface {
	// ApplyResults applies or holds rs in one transaction, each event id
	// at most once; out[i] is what rs[i] did, created the creation times
	// of the transfers moved.
	ApplyResults(ctx context.Context, rs []transfer.Result) (out []transfer.Outcome, created []time.Time, err error)
	// ReapplyHeld applies at most limit held results received within
	// window whose transfer is now visible with their request, and
	// returns how many it applied and the creation times of the
	// transfers that left PENDENTE.
	ReapplyHeld(ctx context.Context, window time.Duration, limit int) (n int, created []time.Time, err error)
	// ApplyRefundResults applies rs, refund results, in one transaction,
	// each event id at most once; out[i] is what rs[i] did.
	ApplyRefundResults(ctx context.Context, rs []transfer.RefundResult) (out []transfer.Outcome, err error)
}

// Admission is told the creation times of the transfers the projection
// moved, after each commit (admission.Controller).
type Admission interface {
	Settled(created []time.Time)
}

// Projection handles records of the settled, rejected, reserved and
// cancelled topics.
type Projection struct {
	store  Store
	admit  Admission
	topics events.Topics
	log    *slog.Logger
}

// NewProjection returns the projection of the given topics into store,
// telling admit (nil: nobody) what it settles.
func NewProjection(store Store, admit Admission, topics events.Topics, log *slog.Logger) *Projection {
	return &Projection{store: store, admit: admit, topics: topics, log: log}
}

// Topics returns the topics the projection reads.
func (p *Projection) Topics() []string {
	return []string{p.topics.Settled, p.topics.Rejected, p.topics.Reserved, p.topics.Cancelled, p.topics.RefundSettled, p.topics.RefundRejected}
}

// decoded is one record's result: a transfer's, or a refund's (refund
// not nil).
type decoded struct {
	result transfer.Result
	refund *transfer.RefundResult
}

// Handle is a consumer.Handler: it applies the results of the records
// fetched together, in offset order, in one transaction and one statement. A record
// that cannot be decoded, or whose content the contract forbids (an
// eventoId that is not the one derived for its transfer and type,
// events.CheckResultID, included), is a poison message: it stops the batch
// there, the results before it are applied, and Handle returns a
// consumer.BatchFailure naming it, so that the consumer loop commits them,
// sends it straight to the DLT (never marked in the inbox, so it burns no
// event id) and hands the rest to Handle again. A database failure applies
// nothing and is returned for the loop to retry.
//
// A batch is of one topic (consumer.Handler): transfer results or refund
// results. Should it hold both, each kind is applied in its own
// transaction (a refund and a transfer result never touch the same row's
// status), and a failure of the second is retried with the first found
// in the inbox.
func (p *Projection) Handle(ctx context.Context, ms []broker.Record) error {
	ds, stop := consumer.DecodeUntil(ms, func(_ int, m broker.Record) (decoded, error) { return p.decode(m) })
	var rs []transfer.Result
	var refunds []transfer.RefundResult
	for _, d := range ds {
		if d.refund != nil {
			refunds = append(refunds, *d.refund)
		} else {
			rs = append(rs, d.result)
		}
	}
	if len(rs) > 0 {
		if err := p.apply(ctx, rs); err != nil {
			return err
		}
	}
	if len(refunds) > 0 {
		if err := p.applyRefunds(ctx, refunds); err != nil {
			return err
		}
	}
	return consumer.StoppedAt(len(ds), stop)
}

// apply writes rs through the store, tells admission control what moved,
// and logs each result's outcome.
func (p *Projection) apply(ctx context.Context, rs []transfer.Result) error {
	out, created, err := p.store.ApplyResults(ctx, rs)
	if err != nil {
		return err
	}
	p.tell(created)
	for i, r := range rs {
		p.logResult(ctx, r, out[i])
	}
	return nil
}

// tell hands admission control the creation times of transfers just moved.
func (p *Projection) tell(created []time.Time) {
	if p.admit != nil && len(created) > 0 {
		p.admit.Settled(created)
	}
}

func (p *Projection) decode(m broker.Record) (decoded, error) {
	switch m.Topic {
	case p.topics.RefundSettled, p.topics.RefundRejected:
		r, err := p.decodeRefund(m)
		return decoded{refund: &r}, err
	}
	r, err := p.decodeResult(m)
	return decoded{result: r}, err
}

func (p *Projection) decodeResult(m broker.Record) (transfer.Result, error) {
	r := transfer.Result{Payload: m.Value}
	var err error
	switch m.Topic {
	case p.topics.Settled:
		var ev events.Settled
		err = checked(events.TypeSettled, events.Decode(m.Value, &ev), &ev.EventID, &ev.TransferID)
		r.EventID, r.TransferID, r.RequestEventID, r.Status, r.SettledCents = ev.EventID, ev.TransferID, ev.RequestEventID, transfer.StatusSettled, ev.AmountCents
		r.DestHolder = ev.DestHolder
		if err == nil && len(ev.DestHolder) > transfer.MaxHolderLen {
			err = consumer.Permanent(fmt.Errorf("%w: titularDestino over %d bytes", events.ErrMalformed, transfer.MaxHolderLen))
		}
	case p.topics.Rejected:
		var ev events.Rejected
		err = checked(events.TypeRejected, events.Decode(m.Value, &ev), &ev.EventID, &ev.TransferID)
		if err == nil && !reasonRE.MatchString(ev.Reason) {
			err = consumer.Permanent(fmt.Errorf("%w: motivo is not a reason code", events.ErrMalformed))
		}
		r.EventID, r.TransferID, r.RequestEventID, r.Status, r.Reason = ev.EventID, ev.TransferID, ev.RequestEventID, transfer.StatusRejected, ev.Reason
	case p.topics.Reserved:
		var ev events.Reserved
		err = checked(events.TypeReserved, events.Decode(m.Value, &ev), &ev.EventID, &ev.TransferID)
		r.EventID, r.TransferID, r.RequestEventID, r.Status = ev.EventID, ev.TransferID, ev.RequestEventID, transfer.StatusReserved
	case p.topics.Cancelled:
		var ev events.Cancelled
		err = checked(events.TypeCancelled, events.Decode(m.Value, &ev), &ev.EventID, &ev.TransferID)
		r.EventID, r.TransferID, r.RequestEventID, r.Status = ev.EventID, ev.TransferID, ev.RequestEventID, transfer.StatusCancelled
		if ev.Reason == events.ReasonExpired {
			r.Status = transfer.StatusExpired
		}
	default:
		return transfer.Result{}, consumer.Permanent(fmt.Errorf("projection: unexpected topic %q", m.Topic))
	}
	if err != nil {
		return transfer.Result{}, err
	}
	r.Type = resultTypes[r.Status]
	return r, nil
}

// resultTypes is the evento-tipo of each status a result moves to.
var resultTypes = map[transfer.Status]string{
	transfer.StatusSettled: events.TypeSettled, transfer.StatusRejected: events.TypeRejected, transfer.StatusReserved: events.TypeReserved,
	transfer.StatusCancelled: events.TypeCancelled, transfer.StatusExpired: events.TypeCancelled,
}

// checked is the error of a result of type typ whose decoding returned
// err: err itself, or when it decoded, whether its eventoId is the one
// derived for its transfer and type (events.CheckResultID).
func checked(typ string, err error, eventID, transferID *uuid.UUID) error {
	if err != nil {
		return fmt.Errorf("decode %s: %w", typ, err)
	}
	return events.CheckResultID(typ, *eventID, *transferID)
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
