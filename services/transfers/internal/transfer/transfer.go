// Package transfer is the transfers service's domain: a transfer request,
// its validation and fingerprint, the status machine
// PENDENTE -> LIQUIDADA | REJEITADA, the Service that creates transfers
// idempotently, a hold's capture and cancellation commands (command.go),
// and the results the projection (consume, which decodes them; postgres,
// which writes them) applies and holds. It declares the Store it needs; the
// postgres package implements it.
package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/validate"
)

// Status is the state of a transfer (wire names of CONTRACTS.md).
type Status string

// The statuses. PENDENTE moves to LIQUIDADA or REJEITADA; a hold's moves
// to RESERVADA, then to LIQUIDADA (captured), CANCELADA or EXPIRADA. All
// but PENDENTE and RESERVADA are terminal.
const (
	StatusPending   Status = "PENDENTE"
	StatusSettled   Status = "LIQUIDADA"
	StatusRejected  Status = "REJEITADA"
	StatusReserved  Status = "RESERVADA"
	StatusCancelled Status = "CANCELADA"
	StatusExpired   Status = "EXPIRADA"
)

// Limits of a hold's expiraEm (CONTRACTS.md section 9), after the request.
const (
	MinHoldTTL     = time.Minute
	MaxHoldTTL     = 30 * 24 * time.Hour
	DefaultHoldTTL = 7 * 24 * time.Hour
)

// MaxHolderLen bounds a titular (client id) as the ledger bounds an
// account's holder.
const MaxHolderLen = 255

// Limits of a request (CONTRACTS.md section 1), shared with the ledger.
const (
	MaxAccountLen  = validate.MaxAccountLen
	MaxAmountCents = validate.MaxAmountCents
	MinAmountCents = validate.MinAmountCents
)

// Transfer is a transfer as stored and shown.
type Transfer struct {
	ID          uuid.UUID
	Source      string
	Destination string
	AmountCents int64
	Currency    string
	Status      Status
	// Reason is the rejection reason (motivo); empty unless REJEITADA.
	Reason string
	// Capture is events.CaptureAutomatic or events.CaptureManual (a hold).
	Capture string
	// ExpiresAt is when the ledger releases a hold; zero unless MANUAL.
	ExpiresAt time.Time
	// SettledCents is what a hold's capture settled; 0 until captured.
	SettledCents int64
	// RefundedCents is the sum of its settled refunds
	// (valorEstornadoEmCentavos).
	RefundedCents int64
	// Client is the client (the token's sub) that created the transfer;
	// empty for transfers created before clients were recorded.
	Client string
	// RequestID is the id of the request that created it (for operators);
	// empty when not recorded.
	RequestID string
	// DestHolder is the titular (client id) of the destination account,
	// which the ledger names when it settles the transfer (titularDestino);
	// empty until then, or when the ledger named none.
	DestHolder string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Request is what a client asks for: move AmountCents of Currency from
// Source to Destination, at once or (Capture MANUAL) as a hold.
type Request struct {
	Source      string
	Destination string
	AmountCents int64
	Currency    string
	// Capture is captura as sent: empty (AUTOMATICA), AUTOMATICA or MANUAL.
	Capture string
	// ExpiresAt is expiraEm as sent (RFC 3339); empty when absent.
	ExpiresAt string
}

// Validate returns a *ValidationError listing every broken rule, or nil:
// accounts of 1..32 characters of [A-Za-z0-9._-] and different from each
// other, an amount of 1..10^15 cents, a currency of three upper-case
// letters, captura AUTOMATICA or MANUAL, and expiraEm only with MANUAL, an
// RFC 3339 time between MinHoldTTL and MaxHoldTTL after now.
func (r Request) Validate(now time.Time) error {
	var fs []errkind.FieldError
	account := func(field, v string) {
		switch {
		case v == "":
			fs = append(fs, errkind.FieldError{Field: field, Message: "is required"})
		case !validate.AccountID(v):
			fs = append(fs, errkind.FieldError{Field: field, Message: validate.AccountRule})
		}
	}
	account("contaOrigem", r.Source)
	account("contaDestino", r.Destination)
	if r.Source != "" && r.Source == r.Destination {
		fs = append(fs, errkind.FieldError{Field: "contaDestino", Message: "must differ from contaOrigem"})
	}
	if !validate.AmountCents(r.AmountCents) {
		fs = append(fs, errkind.FieldError{Field: "valorEmCentavos", Message: validate.AmountRule})
	}
	switch {
	case r.Currency == "":
		fs = append(fs, errkind.FieldError{Field: "moeda", Message: "is required"})
	case !validate.Currency(r.Currency):
		fs = append(fs, errkind.FieldError{Field: "moeda", Message: validate.CurrencyRule})
	}
	fs = append(fs, r.holdErrors(now)...)
	if len(fs) > 0 {
		return &validate.ValidationError{Detail: "the transfer breaks the rules of its fields", Fields: fs}
	}
	return nil
}

// holdErrors checks captura and expiraEm.
func (r Request) holdErrors(now time.Time) []errkind.FieldError {
	switch r.Capture {
	case "", events.CaptureAutomatic:
		if r.ExpiresAt != "" {
			return []errkind.FieldError{{Field: "expiraEm", Message: "is allowed only with captura MANUAL"}}
		}
		return nil
	case events.CaptureManual:
	default:
		return []errkind.FieldError{{Field: "captura", Message: "must be AUTOMATICA or MANUAL"}}
	}
	if r.ExpiresAt == "" {
		return nil
	}
	at, err := time.Parse(time.RFC3339Nano, r.ExpiresAt)
	if err != nil {
		return []errkind.FieldError{{Field: "expiraEm", Message: "must be an RFC 3339 time"}}
	}
	if d := at.Sub(now); d < MinHoldTTL || d > MaxHoldTTL {
		return []errkind.FieldError{{Field: "expiraEm", Message: "must be between 1 minute and 30 days from now"}}
	}
	return nil
}

// Hold returns the capture mode of r and, for a hold, when it expires:
// expiraEm as sent, or DefaultHoldTTL after now. r must be valid.
func (r Request) Hold(now time.Time) (capture string, expiresAt time.Time) {
	if r.Capture != events.CaptureManual {
		return events.CaptureAutomatic, time.Time{}
	}
	if at, err := time.Parse(time.RFC3339Nano, r.ExpiresAt); err == nil {
		return events.CaptureManual, at.UTC().Truncate(time.Microsecond)
	}
	return events.CaptureManual, now.Add(DefaultHoldTTL).UTC().Truncate(time.Microsecond)
}

// Fingerprint is the SHA-256 of the canonical form of r: each field
// length-prefixed in a fixed order, so that two bodies differing only in
// whitespace, key order or escaping have the same fingerprint and two
// different requests never do. captura absent and AUTOMATICA are the same
// request (and the fingerprint of an immediate transfer is the one it had
// before holds existed); a hold adds its mode and expiraEm as sent (the
// instant, or none: a default expiry is not part of what was asked).
func (r Request) Fingerprint() [32]byte {
	c := newCanonical()
	c.str(r.Source)
	c.str(r.Destination)
	c.str(r.Currency)
	c.int(r.AmountCents)
	if r.Capture == events.CaptureManual {
		c.str(r.Capture)
		var at int64 = -1 // no expiraEm
		if t, err := time.Parse(time.RFC3339Nano, r.ExpiresAt); err == nil {
			at = t.UnixNano()
		}
		c.int(at)
	}
	return c.sum()
}

// Response is the answer given to the request that created a transfer. It is
// stored with the transfer so that a replay gets exactly the same answer.
type Response struct {
	StatusCode int
	Body       []byte
}

// Record is what a key is bound to: the client and the fingerprint of the
// request that created the transfer, and the response it got.
type Record struct {
	Client      string
	Fingerprint [32]byte
	Response    Response
}

// Viewer is who reads a transfer: a client sees the transfers it created
// and those paid into an account it holds (once the ledger has named it,
// DestHolder), an operator (All) sees every one.
type Viewer struct {
	Client string
	All    bool
}

// Sees reports whether v may read t.
func (v Viewer) Sees(t Transfer) bool {
	return v.All || (v.Client != "" && (v.Client == t.Client || v.Client == t.DestHolder))
}

// Creation is everything the creation of a transfer writes in its one
// transaction.
type Creation struct {
	Transfer    Transfer
	Fingerprint [32]byte
	Response    Response
	// Event is the TransferenciaSolicitada event, which the store writes to
	// its outbox with the transfer.
	Event events.Message
}

// Result is an outcome of the ledger or antifraud to project onto a
// transfer: a settlement, a rejection, a hold's reservation, or its
// release (cancelled or expired).
type Result struct {
	EventID    uuid.UUID
	TransferID uuid.UUID
	// Status is StatusSettled, StatusRejected, StatusReserved,
	// StatusCancelled or StatusExpired.
	Status Status
	// Reason is the motivo of a rejection.
	Reason string
	// SettledCents is what a hold's capture settled (the valorEmCentavos of
	// its TransferenciaLiquidada); 0 when the record carries none.
	SettledCents int64
	// DestHolder is the destination's titular a settlement names
	// (titularDestino); empty when the record carries none.
	DestHolder string
	// RequestEventID is the result's binding (eventoSolicitacaoId): the
	// eventoId of the TransferenciaSolicitada it was decided for; uuid.Nil
	// when the record carried none.
	RequestEventID uuid.UUID
	// Type is the event's evento-tipo and Payload its record's value, kept
	// when the result is held (see Outcome).
	Type    string
	Payload []byte
}

// Check returns an error when r cannot be applied: its status is not one
// a result moves a transfer to, or it is a rejection without a reason.
func (r Result) Check() error {
	switch r.Status {
	case StatusSettled, StatusRejected, StatusReserved, StatusCancelled, StatusExpired:
	default:
		return fmt.Errorf("apply result: status %q is not a result", r.Status)
	}
	if r.Status == StatusRejected && r.Reason == "" {
		return errors.New("apply result: rejection without a reason")
	}
	if len(r.DestHolder) > MaxHolderLen {
		return fmt.Errorf("apply result: titularDestino over %d bytes", MaxHolderLen)
	}
	return nil
}

// Outcome is what applying one result did.
type Outcome int

// The outcomes of a result.
const (
	// Unchanged: a duplicate event, or a transfer already past the
	// result's status.
	Unchanged Outcome = iota
	// Moved: the transfer took the result (see CanMove).
	Moved
	// Held: no transfer has the result's id, or the one that has it was
	// created with another request event than the result was decided for;
	// the result is kept (see HeldResult) instead of being applied or
	// dropped.
	Held
	// Unmatched: a refund result for no refund this database has (with
	// that transfer and, when settled, that amount); it changes nothing
	// and is not recorded as processed, so that a redelivery applies once
	// the refund exists.
	Unmatched
)

// CanMove reports whether a transfer in status from takes a result of
// status to. Status moves only forward: PENDENTE takes every result;
// RESERVADA takes a hold's end (LIQUIDADA, CANCELADA, EXPIRADA); the rest
// are terminal. A hold's end may arrive before its RESERVADA (the two come
// on different topics, so in either order): it applies from PENDENTE, and
// the late RESERVADA then changes nothing. The projection's SQL
// (postgres.applyAllSQL, reapplySQL) states the same rule.
func CanMove(from, to Status) bool {
	switch from {
	case StatusPending:
		return true
	case StatusReserved:
		return to == StatusSettled || to == StatusCancelled || to == StatusExpired
	default:
		return false
	}
}

// Domain errors, each with its kind and what the client is told.
var (
	// ErrNotFound: no transfer has that id.
	ErrNotFound = errkind.Errorf(errkind.NotFound, "no transfer with this id")
	// ErrInProgress: another request with the same key is being processed.
	ErrInProgress = errkind.Errorf(errkind.InProgress, "a request with this Idempotency-Key is still in progress; retry later")
	// ErrKeyReused: the key was already used with another request body, or
	// by another client: the same answer for both, so that nothing tells
	// whose key it is.
	ErrKeyReused = errkind.Errorf(errkind.KeyReused, "this Idempotency-Key was already used with a different request body")
)

// Store keeps transfers. Implementations: postgres.Store.
type Store interface {
	// Create writes c.Transfer, its idempotency record and c.Event in one
	// transaction, unless a transfer with that id exists: then it writes
	// nothing and returns that transfer's record. It returns (nil, nil) when
	// it created the transfer, and ErrInProgress when another transaction
	// for the same id has not finished yet. It never blocks on one.
	Create(ctx context.Context, c Creation) (*Record, error)
	// Get returns the transfer, or ErrNotFound.
	Get(ctx context.Context, id uuid.UUID) (Transfer, error)
	// Command runs one command of a hold in one transaction: when a
	// command with id exists it writes nothing and returns its record;
	// otherwise it locks the transfer transferID (ErrNotFound when there
	// is none), calls decide with it, and writes the CommandCreation
	// decide returns, command row and event, unless decide returns an
	// error (returned, nothing written) or the transfer already has a
	// command (ErrCommandInProgress). It returns (nil, nil) when it wrote
	// the command, and ErrInProgress while another transaction with the
	// same id has not finished, without waiting for it.
	Command(ctx context.Context, id, transferID uuid.UUID, decide func(Transfer) (CommandCreation, error)) (*Record, error)
	// Refund runs one refund in one transaction: when a refund with id
	// exists it writes nothing and returns its record; otherwise it locks
	// the transfer transferID (ErrNotFound when there is none), calls
	// decide with it and the sum of its refunds not rejected, and writes
	// the RefundCreation decide returns, refund row and event, unless
	// decide returns an error (returned, nothing written). It returns
	// (nil, nil) when it wrote the refund, and ErrInProgress while another
	// transaction with the same id has not finished, without waiting.
	Refund(ctx context.Context, id, transferID uuid.UUID, decide func(t Transfer, committed int64) (RefundCreation, error)) (*Record, error)
	// GetRefund returns the refund, or ErrRefundNotFound.
	GetRefund(ctx context.Context, id uuid.UUID) (Refund, error)
}
