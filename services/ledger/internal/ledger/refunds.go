package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
)

// Refund is a refund to decide (EstornoSolicitado, CONTRACTS.md section
// 10): ClientID asks to return AmountCents of transfer TransferID from its
// destination Dest to its source Source.
type Refund struct {
	// ID is the refund's id (estornoId, the client's Idempotency-Key).
	ID         uuid.UUID
	TransferID uuid.UUID
	// EventID is the evento-id of the EstornoSolicitado.
	EventID     uuid.UUID
	Source      string
	Dest        string
	AmountCents int64
	Currency    string
	// ClientID is the client that asked (clienteId); Operator is true when
	// it asked as an operator, who may refund any transfer.
	ClientID string
	Operator bool
	// Authorization is the transfers service's signature over the refund
	// (transfersig.RefundClaim); nil when the record carries none.
	Authorization *events.Authorization
	// Traceparent: as in Transfer.
	Traceparent string
}

// RefundAggregate is the outbox aggregate type of a refund's result
// event, whose aggregate id is the refund's id.
const RefundAggregate = "refund"

// Outcomes of a refund, as the refund resource's status says them.
const (
	RefundSettled  Outcome = "LIQUIDADO"
	RefundRejected Outcome = "REJEITADO"
)

// Rejection reasons of a refund beside ReasonInsufficientFunds and
// ReasonUnauthorized.
const (
	ReasonExceedsRefundable = events.ReasonExceedsRefundable
	ReasonNotSettled        = events.ReasonNotSettled
)

// RefundResult is the outcome of one refund: RefundSettled or
// RefundRejected (Reason set). Replayed is true when an earlier delivery
// had decided it: Outcome and Reason are then the stored ones, and
// nothing was done.
type RefundResult struct {
	RefundID   uuid.UUID
	TransferID uuid.UUID
	Outcome    Outcome
	Reason     string
	Replayed   bool
}

// Refundable is what the ledger settled for one transfer, as the store
// read it under the lock that orders the refunds of that transfer: its
// accounts and currency, SettledCents (the amount of a settled transfer,
// the captured amount of a captured hold; 0 when it settled nothing: a
// rejection, or a hold not captured) and RefundedCents, the sum of the
// refunds settled so far.
type Refundable struct {
	TransferID    uuid.UUID
	Source        string
	Dest          string
	Currency      string
	SettledCents  int64
	RefundedCents int64
}

// DecideRefund applies the refund rules, in order, to f against what the
// ledger settled for its transfer (t, nil when it knows none) and the
// locked accounts f names (nil when absent), given the proof of who asked
// (Rules.ProveRefund):
//
//  1. proof Unproven: ORIGEM_NAO_AUTORIZADA;
//  2. with proof Signed, f not an operator's and naming no client, or a
//     client that is not the destination account's titular:
//     ORIGEM_NAO_AUTORIZADA;
//  3. t nil or settled nothing, or f names other accounts or another
//     currency than t's: TRANSFERENCIA_NAO_LIQUIDADA;
//  4. t's refunds settled plus f's amount above what t settled:
//     VALOR_EXCEDE_ESTORNAVEL;
//  5. the destination's available balance below the amount:
//     SALDO_INSUFICIENTE.
//
// Otherwise it is settled: a debit of the destination and a credit of the
// source, applied to the balances in place, and the amount added to t's
// RefundedCents, so that the next refund of a batch sees them as a later
// transaction would. The titular comes before the transfer's state so
// that a client refunding a transfer it did not receive learns nothing of
// it.
func DecideRefund(t *Refundable, source, dest *Account, f Refund, proof Proof) (Outcome, string, []Entry) {
	if proof == Unproven {
		return RefundRejected, ReasonUnauthorized, nil
	}
	if proof == Signed && !f.Operator && (f.ClientID == "" || dest == nil || dest.Holder != f.ClientID) {
		return RefundRejected, ReasonUnauthorized, nil
	}
	if t == nil || t.SettledCents <= 0 || source == nil || dest == nil ||
		t.Source != f.Source || t.Dest != f.Dest || t.Currency != f.Currency {
		return RefundRejected, ReasonNotSettled, nil
	}
	if f.AmountCents > t.SettledCents-t.RefundedCents {
		return RefundRejected, ReasonExceedsRefundable, nil
	}
	if dest.AvailableCents() < f.AmountCents {
		return RefundRejected, ReasonInsufficientFunds, nil
	}
	entries := []Entry{
		{AccountID: dest.ID, Direction: Debit, AmountCents: f.AmountCents},
		{AccountID: source.ID, Direction: Credit, AmountCents: f.AmountCents},
	}
	entries[0].apply(dest)
	entries[1].apply(source)
	t.RefundedCents += f.AmountCents
	return RefundSettled, "", entries
}

// RefundDecision is the decision on one refund: its result, the entries
// of a settled one and the event that announces it.
type RefundDecision struct {
	RefundResult
	Entries []Entry
	Event   events.Message
}

// RefundDecider decides one refund against its transfer's Refundable and
// the locked accounts (nil when absent), moving them in place as
// DecideRefund does. The store calls it inside its transaction.
type RefundDecider func(t *Refundable, source, dest *Account, f Refund) (RefundDecision, error)

// ProveRefund checks f's authorization against r's keys, as Prove does a
// transfer's: Signed, Unproven, or Unchecked with ownership off.
func (r Rules) ProveRefund(f Refund) Proof {
	if r.Ownership == OwnershipOff {
		return Unchecked
	}
	claim := transfersig.RefundClaim{RefundID: f.ID, TransferID: f.TransferID, Source: f.Source, Destination: f.Dest,
		AmountCents: f.AmountCents, Currency: f.Currency, Client: f.ClientID, Operator: f.Operator}
	if r.Keys.VerifyRefund(claim, f.Authorization) != nil {
		return Unproven
	}
	return Signed
}

// refundDecider returns the RefundDecider of r with events stamped at now,
// the proofs of fs established beforehand (outside the store's
// transaction, as deciderFor does).
func (r Rules) refundDecider(now time.Time, fs []Refund) RefundDecider {
	proofs := make(map[Refund]Proof, len(fs))
	for _, f := range fs {
		proofs[f] = r.ProveRefund(f)
	}
	return func(t *Refundable, source, dest *Account, f Refund) (RefundDecision, error) {
		proof, ok := proofs[f]
		if !ok {
			proof = r.ProveRefund(f)
		}
		outcome, reason, entries := DecideRefund(t, source, dest, f, proof)
		d := RefundDecision{RefundResult: RefundResult{RefundID: f.ID, TransferID: f.TransferID, Outcome: outcome, Reason: reason},
			Entries: entries}
		var err error
		d.Event, err = r.refundEvent(f, outcome, reason, now)
		return d, err
	}
}

// refundEvent is the result event of refund f: EstornoLiquidado or
// EstornoRejeitado about the refund (its outbox aggregate), keyed by the
// transfer's source account (the record's key), correlated by the
// transfer id, with an id derived from the refund's id: a refund has one
// result event whatever delivery decides it.
func (r Rules) refundEvent(f Refund, outcome Outcome, reason string, now time.Time) (events.Message, error) {
	m := transferMessage(f.TransferID, f.Source, f.Traceparent, now)
	m.AggregateType, m.AggregateID = RefundAggregate, f.ID.String()
	var payload any
	if outcome == RefundSettled {
		m.ID = events.DerivedID(events.KindRefundSettled, f.ID)
		m.Topic, m.Type = r.Topics.RefundSettled, events.TypeRefundSettled
		payload = events.RefundSettled{EventID: m.ID, RefundID: f.ID, TransferID: f.TransferID, AmountCents: f.AmountCents, OccurredAt: now}
	} else {
		m.ID = events.DerivedID(events.KindRefundRejected, f.ID)
		m.Topic, m.Type = r.Topics.RefundRejected, events.TypeRefundRejected
		payload = events.RefundRejected{EventID: m.ID, RefundID: f.ID, TransferID: f.TransferID, Reason: reason, OccurredAt: now}
	}
	return withPayload(m, payload)
}

// Refund decides fs, in order, in one transaction (Store.Refund): all or
// nothing, with the results of deciding them one by one. A rejection is a
// result, not an error; an error is a failure (database) worth retrying.
func (s *Service) Refund(ctx context.Context, fs []Refund) ([]RefundResult, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	now := s.now().UTC()
	rs, err := s.store.Refund(ctx, fs, s.rules.refundDecider(now, fs))
	if err != nil {
		return nil, fmt.Errorf("refund a batch of %d (first %s of transfer %s): %w", len(fs), fs[0].ID, fs[0].TransferID, err)
	}
	return rs, nil
}
