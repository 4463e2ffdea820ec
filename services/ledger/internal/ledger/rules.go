package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
)

// Derived event id kinds (events.DerivedID) of the ledger's result events.
const (
	KindSettled   = events.KindSettled
	KindRejected  = events.KindRejectedLedger
	KindReserved  = events.KindReserved
	KindCancelled = events.KindCancelled
)

// Decision is the settlement of one claimed transfer: its Result, the
// double entry it writes (none unless Settled), the reservation it opens
// (only when Reserved) and the event that announces it, which the store
// writes to its outbox.
type Decision struct {
	Result
	// Entries are Decide's debit and credit, already applied to the
	// balances of the Accounts the Decider was given.
	Entries []Entry
	// Reservation is the hold Decide reserved, already added to the
	// source's ReservedCents; nil unless Reserved.
	Reservation *Reservation
	Event       events.Message
}

// Decider decides one claimed transfer against its locked accounts (nil
// when absent), moving the balances in place as Decide does. The store
// calls it inside its settlement transaction.
type Decider func(source, dest *Account, t Transfer) (Decision, error)

// Rules are how the ledger settles and mints: the ownership rule and the
// keys that prove who asked, the topics its result events go to and the
// ceiling of one deposit (configuration, through the service layer).
type Rules struct {
	Ownership Ownership
	// Keys verify the transfers service's authorizations
	// (LEDGER_AUTHORIZATION_JWKS_FILE); nil verifies none, so that with
	// ownership enforced nothing is debited.
	Keys *transfersig.Verifier
	// MaxDepositCents is the largest amount one deposit may carry; 0 is
	// MaxAmountCents.
	MaxDepositCents int64
	// MaxDepositCentsPerDay is the most one client may deposit in one
	// currency in one UTC day; 0: no ceiling.
	MaxDepositCentsPerDay int64
	// Topics names the topics of the result events; Settled, Rejected,
	// Reserved and Cancelled are used.
	Topics events.Topics
}

// Prove checks t's authorization against r's keys: Signed when it
// verifies over t's id, accounts, amount, currency, client, capture mode
// and expiry, Unproven
// otherwise, and Unchecked with ownership off. It costs one Ed25519
// verification.
func (r Rules) Prove(t Transfer) Proof {
	if r.Ownership == OwnershipOff {
		return Unchecked
	}
	claim := transfersig.Claim{TransferID: t.ID, Source: t.Source, Destination: t.Dest, AmountCents: t.AmountCents,
		Currency: t.Currency, Client: t.ClientID, Hold: t.Hold, ExpiresAt: t.ExpiresAt}
	if r.Keys.Verify(claim, t.Authorization) != nil {
		return Unproven
	}
	return Signed
}

// Decider returns the Decider that applies r with result events stamped at
// now.
func (r Rules) Decider(now time.Time) Decider { return r.decider(now, nil) }

// deciderFor is Decider with the proofs of ts established beforehand, so
// that their signatures are verified before the store's transaction, not
// while it holds the accounts' locks. A transfer it is given that is not
// one of ts is proven when decided.
func (r Rules) deciderFor(now time.Time, ts []Transfer) Decider {
	proofs := make(map[Transfer]Proof, len(ts))
	for _, t := range ts {
		proofs[t] = r.Prove(t)
	}
	return r.decider(now, proofs)
}

func (r Rules) decider(now time.Time, proofs map[Transfer]Proof) Decider {
	return func(source, dest *Account, t Transfer) (Decision, error) {
		proof, ok := proofs[t]
		if !ok {
			proof = r.Prove(t)
		}
		outcome, reason, entries := Decide(source, dest, t, proof)
		d := Decision{Result: Result{TransferID: t.ID, Outcome: outcome, Reason: reason}, Entries: entries}
		if outcome == Reserved {
			d.Reservation = newReservation(t, now)
			t.ExpiresAt = d.Reservation.ExpiresAt
		}
		var err error
		d.Event, err = r.resultEvent(t, outcome, reason, holderOf(dest), now)
		return d, err
	}
}

// resultEvent is the event of a decided transfer:
// TransferenciaLiquidada (naming destHolder, the destination's titular),
// TransferenciaRejeitada or TransferenciaReservada
// (with t.ExpiresAt, the reservation's), keyed by the source
// account, with an id derived from the transfer id so that a second
// decision (which the processed marker prevents anyway) could not make a
// second event.
func (r Rules) resultEvent(t Transfer, outcome Outcome, reason, destHolder string, now time.Time) (events.Message, error) {
	m := transferMessage(t.ID, t.Source, t.Traceparent, now)
	var payload any
	switch outcome {
	case Settled:
		m.ID = events.DerivedID(KindSettled, t.ID)
		m.Topic, m.Type = r.Topics.Settled, events.TypeSettled
		payload = events.Settled{EventID: m.ID, TransferID: t.ID, OccurredAt: now, RequestEventID: t.RequestEventID,
			DestHolder: destHolder}
	case Rejected:
		m.ID = events.DerivedID(KindRejected, t.ID)
		m.Topic, m.Type = r.Topics.Rejected, events.TypeRejected
		payload = events.Rejected{EventID: m.ID, TransferID: t.ID, Reason: reason, OccurredAt: now, RequestEventID: t.RequestEventID}
	case Reserved:
		m.ID = events.DerivedID(KindReserved, t.ID)
		m.Topic, m.Type = r.Topics.Reserved, events.TypeReserved
		payload = events.Reserved{EventID: m.ID, TransferID: t.ID, AmountCents: t.AmountCents, ExpiresAt: t.ExpiresAt,
			OccurredAt: now, RequestEventID: t.RequestEventID}
	default:
		return events.Message{}, fmt.Errorf("no result event for outcome %q", outcome)
	}
	return withPayload(m, payload)
}

// holderOf is the titular of a, empty when a is nil or has none: the
// titularDestino a settlement names, so that the transfers service knows
// who may read and refund what was paid into a.
func holderOf(a *Account) string {
	if a == nil {
		return ""
	}
	return a.Holder
}

// transferMessage is the frame of an event about transfer id: keyed by its
// source account, correlated by its id, with the trace context traceparent
// when there is one (otherwise the outbox takes ctx's).
func transferMessage(id uuid.UUID, source, traceparent string, now time.Time) events.Message {
	m := events.Message{
		AggregateType: "transfer",
		AggregateID:   id.String(),
		Key:           source,
		Headers:       map[string]string{events.HeaderCorrelationID: id.String()},
		OccurredAt:    now,
	}
	if traceparent != "" {
		m.Headers[events.HeaderTraceparent] = traceparent
	}
	return m
}

// withPayload is m carrying payload as JSON.
func withPayload(m events.Message, payload any) (events.Message, error) {
	var err error
	if m.Payload, err = json.Marshal(payload); err != nil {
		return events.Message{}, fmt.Errorf("encode %s event of %s: %w", m.Type, m.AggregateID, err)
	}
	return m, nil
}
