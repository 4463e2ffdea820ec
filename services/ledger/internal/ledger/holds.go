package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
)

// DefaultHoldTTL is how long a hold whose record names no expiraEm stays
// reserved (CONTRACTS.md section 9's default).
const DefaultHoldTTL = 7 * 24 * time.Hour

// Outcomes of closing a reservation (DecideClosing). A capture is Settled.
const (
	// Cancelled: the client's cancellation released the reservation.
	Cancelled Outcome = "CANCELADA"
	// Expired: the reservation was past its expiry and was released.
	Expired Outcome = "EXPIRADA"
	// AlreadyClosed: an earlier capture, cancellation or expiry had closed
	// the reservation; nothing was done. The command that did is in the
	// reservation (Reservation.ClosedBy).
	AlreadyClosed Outcome = "ENCERRADA"
)

// ReservationState is where a reservation stands. Open is the only state
// it leaves, once.
type ReservationState string

// Reservation states, as the reservation table writes them.
const (
	ReservationOpen      ReservationState = "open"
	ReservationCaptured  ReservationState = "captured"
	ReservationCancelled ReservationState = "cancelled"
	ReservationExpired   ReservationState = "expired"
)

// Reservation is the hold of one transfer: AmountCents reserved on Source
// (counted in its ReservedCents while Open) for Dest, until ExpiresAt.
type Reservation struct {
	TransferID  uuid.UUID
	Source      string
	Dest        string
	Currency    string
	AmountCents int64
	ExpiresAt   time.Time
	State       ReservationState
	// CapturedCents is what the capture posted (0 unless captured).
	CapturedCents int64
	// ClosedBy is the evento-id of the command that closed it; uuid.Nil
	// while open and when it expired. ClosedEventID is the id of the
	// event that announced the closing, ClosedAt when it closed.
	ClosedBy      uuid.UUID
	ClosedEventID uuid.UUID
	ClosedAt      time.Time
	// ClientID and RequestEventID are the hold's, as its
	// TransferenciaAnalisada named them (empty, uuid.Nil when it did not).
	ClientID       string
	RequestEventID uuid.UUID
}

// newReservation is the open reservation of hold t decided at now. Its
// expiry keeps the microseconds PostgreSQL stores, so that the event and
// the row say the same instant.
func newReservation(t Transfer, now time.Time) *Reservation {
	expires := t.ExpiresAt
	if expires.IsZero() {
		expires = now.Add(DefaultHoldTTL)
	}
	return &Reservation{TransferID: t.ID, Source: t.Source, Dest: t.Dest, Currency: t.Currency, AmountCents: t.AmountCents,
		ExpiresAt: expires.UTC().Truncate(time.Microsecond), State: ReservationOpen, ClientID: t.ClientID, RequestEventID: t.RequestEventID}
}

// CommandKind is what a Command asks of a reservation.
type CommandKind int

// Command kinds.
const (
	// Capture settles AmountCents of the reservation and releases it all
	// (CapturaSolicitada).
	Capture CommandKind = iota + 1
	// Cancel releases it (CancelamentoSolicitado).
	Cancel
	// Expire releases it when it is past its expiry: the ledger's own
	// sweep, never a record.
	Expire
)

// Command is a capture, a cancellation or an expiry of the reservation of
// transfer TransferID.
type Command struct {
	Kind       CommandKind
	TransferID uuid.UUID
	// EventID is the command's evento-id; uuid.Nil for Expire.
	EventID uuid.UUID
	// Source is the command's contaOrigem (its record key); empty for
	// Expire.
	Source string
	// AmountCents is what a Capture settles: 1 ..= the reserved amount.
	AmountCents int64
	// ClientID is the command's clienteId, checked against the hold's.
	ClientID string
	// Traceparent: as in Transfer.
	Traceparent string
}

// Errors of closing a reservation. None is ever a result that would move
// the transfer's status: the command ends in a dead letter.
// ErrCaptureAmount and ErrForeignCommand are permanent (the DLT at once).
// ErrNotReserved is retried by the consumer's policy before it goes to the
// DLT: the transfers service sends a command only for a transfer it saw
// reserved, so a ledger without the reservation may be behind its own
// event (a failover that lost the reservation's commit after the logical
// relay had published it; the redelivered request reserves it again).
var (
	// ErrNotReserved: the ledger holds no reservation for the transfer
	// (unknown, settled at once, rejected, or not reserved yet).
	ErrNotReserved = errors.New("the ledger holds no reservation for this transfer")
	// ErrCaptureAmount: a capture of less than 1 cent or of more than
	// the reserved amount.
	ErrCaptureAmount = errors.New("a capture takes 1 cent up to the reserved amount")
	// ErrForeignCommand: the command names another source account, or
	// (with ownership enforced) another client than the hold's.
	ErrForeignCommand = errors.New("the command names another client or source account than the hold")
)

// DecideClosing decides command c on reservation r, locked with its accounts (r
// nil when the ledger has none), at now. It is the one place where
// capture, cancellation and expiry of a reservation race: whichever is
// decided first on an open reservation closes it, and every later one
// finds it closed and is AlreadyClosed, changing nothing. An open
// reservation past its expiry expires, whatever the command: nothing is
// captured after ExpiresAt. In order:
//
//  1. r nil: ErrNotReserved;
//  2. a capture or cancellation naming another source account, or, with
//     ownership enforced, no client or another client than the hold's:
//     ErrForeignCommand;
//  3. a capture of less than 1 cent or more than reserved: ErrCaptureAmount;
//  4. r closed: AlreadyClosed;
//  5. r past its expiry (now >= ExpiresAt): Expired (motivo EXPIRADA); an
//     Expire of an r not yet due is an error (the sweep selects due ones);
//  6. Capture: Settled, with the debit of the source and the credit of the
//     destination for the captured amount;
//  7. Cancel: Cancelled (motivo CANCELADA_PELO_CLIENTE).
//
// On a closing it releases the whole reservation from the source's
// ReservedCents, applies the entries to the balances and records the
// closing in r, in place, as Decide does.
func DecideClosing(r *Reservation, source, dest *Account, c Command, own Ownership, now time.Time) (Outcome, string, []Entry, error) {
	if r == nil {
		return "", "", nil, ErrNotReserved
	}
	if c.Kind != Expire && (c.Source != r.Source || own != OwnershipOff && (c.ClientID == "" || c.ClientID != r.ClientID)) {
		return "", "", nil, ErrForeignCommand
	}
	if c.Kind == Capture && (c.AmountCents < 1 || c.AmountCents > r.AmountCents) {
		return "", "", nil, ErrCaptureAmount
	}
	if r.State != ReservationOpen {
		return AlreadyClosed, "", nil, nil
	}
	if source == nil || dest == nil {
		return "", "", nil, fmt.Errorf("reservation %s: its accounts are not locked", r.TransferID)
	}
	kind := c.Kind
	if !now.Before(r.ExpiresAt) {
		kind = Expire
	} else if kind == Expire {
		return "", "", nil, fmt.Errorf("reservation %s is not due until %s", r.TransferID, r.ExpiresAt)
	}
	source.ReservedCents -= r.AmountCents
	r.ClosedAt = now
	switch kind {
	case Capture:
		entries := []Entry{
			{AccountID: source.ID, Direction: Debit, AmountCents: c.AmountCents},
			{AccountID: dest.ID, Direction: Credit, AmountCents: c.AmountCents},
		}
		entries[0].apply(source)
		entries[1].apply(dest)
		r.State, r.CapturedCents, r.ClosedBy = ReservationCaptured, c.AmountCents, c.EventID
		return Settled, "", entries, nil
	case Cancel:
		r.State, r.ClosedBy = ReservationCancelled, c.EventID
		return Cancelled, events.ReasonCancelledByClient, nil, nil
	default:
		r.State = ReservationExpired
		return Expired, events.ReasonExpired, nil, nil
	}
}

// Closing is the decision on one command: its Result (Outcome Settled,
// Cancelled, Expired or AlreadyClosed; Reason the motivo of a
// cancellation), the entries of a capture and, unless AlreadyClosed, the
// event that announces the closing, whose id is also in the
// Reservation's ClosedEventID.
type Closing struct {
	Result
	Entries []Entry
	// Event is the zero Message when AlreadyClosed.
	Event events.Message
}

// Closer decides one command on its locked reservation and accounts (nil
// when absent), moving balances, reservations and the Reservation in
// place as DecideClosing does. The store calls it inside its transaction.
type Closer func(r *Reservation, source, dest *Account, c Command) (Closing, error)

// Closer returns the Closer that applies r's ownership rule, with events
// stamped at now.
func (r Rules) Closer(now time.Time) Closer {
	return func(res *Reservation, source, dest *Account, c Command) (Closing, error) {
		outcome, reason, entries, err := DecideClosing(res, source, dest, c, r.Ownership, now)
		if err != nil {
			return Closing{}, fmt.Errorf("close the reservation of %s: %w", c.TransferID, err)
		}
		cl := Closing{Result: Result{TransferID: c.TransferID, Outcome: outcome, Reason: reason}, Entries: entries}
		if outcome == AlreadyClosed {
			return cl, nil
		}
		cl.Event, err = r.closingEvent(res, c, outcome, reason, holderOf(dest), now)
		res.ClosedEventID = cl.Event.ID
		return cl, err
	}
}

// closingEvent announces the closing of res: TransferenciaLiquidada with
// the captured amount and destHolder (the destination's titular), or TransferenciaCancelada with its motivo, keyed by
// the source account, with an id derived from the transfer id so that it
// is the one closing event of the transfer whatever command closed it.
func (r Rules) closingEvent(res *Reservation, c Command, outcome Outcome, reason, destHolder string, now time.Time) (events.Message, error) {
	m := transferMessage(res.TransferID, res.Source, c.Traceparent, now)
	var payload any
	if outcome == Settled {
		m.ID = events.DerivedID(KindSettled, res.TransferID)
		m.Topic, m.Type = r.Topics.Settled, events.TypeSettled
		payload = events.Settled{EventID: m.ID, TransferID: res.TransferID, OccurredAt: now,
			RequestEventID: res.RequestEventID, AmountCents: res.CapturedCents, DestHolder: destHolder}
	} else {
		m.ID = events.DerivedID(KindCancelled, res.TransferID)
		m.Topic, m.Type = r.Topics.Cancelled, events.TypeCancelled
		payload = events.Cancelled{EventID: m.ID, TransferID: res.TransferID, Reason: reason, OccurredAt: now,
			RequestEventID: res.RequestEventID}
	}
	return withPayload(m, payload)
}
