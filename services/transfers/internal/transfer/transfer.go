// Package transfer is the transfers service's domain: a transfer request,
// its validation and fingerprint, the status machine
// PENDENTE -> LIQUIDADA | REJEITADA, the Service that creates transfers
// idempotently, and the settlement results the projection (consume, which
// decodes them; postgres, which writes them) applies and holds. It declares
// the Store it needs; the postgres package implements it.
package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
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

// The statuses. PENDENTE moves to LIQUIDADA or REJEITADA, both terminal.
const (
	StatusPending  Status = "PENDENTE"
	StatusSettled  Status = "LIQUIDADA"
	StatusRejected Status = "REJEITADA"
)

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
	// Client is the client (the token's sub) that created the transfer;
	// empty for transfers created before clients were recorded.
	Client string
	// RequestID is the id of the request that created it (for operators);
	// empty when not recorded.
	RequestID string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Request is what a client asks for: move AmountCents of Currency from
// Source to Destination.
type Request struct {
	Source      string
	Destination string
	AmountCents int64
	Currency    string
}

// Validate returns a *ValidationError listing every broken rule, or nil:
// accounts of 1..32 characters of [A-Za-z0-9._-] and different from each
// other, an amount of 1..10^15 cents, a currency of three upper-case letters.
func (r Request) Validate() error {
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
	if len(fs) > 0 {
		return &validate.ValidationError{Detail: "the transfer breaks the rules of its fields", Fields: fs}
	}
	return nil
}

// Fingerprint is the SHA-256 of the canonical form of r: each field
// length-prefixed in a fixed order, so that two bodies differing only in
// whitespace, key order or escaping have the same fingerprint and two
// different requests never do.
func (r Request) Fingerprint() [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, s := range []string{r.Source, r.Destination, r.Currency} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	binary.BigEndian.PutUint64(n[:], uint64(r.AmountCents)) //nolint:gosec // a bit pattern, not arithmetic
	h.Write(n[:])
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
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

// Viewer is who reads a transfer: a client sees only its own transfers, an
// operator (All) sees every one.
type Viewer struct {
	Client string
	All    bool
}

// Sees reports whether v may read t.
func (v Viewer) Sees(t Transfer) bool { return v.All || (v.Client != "" && v.Client == t.Client) }

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

// Result is a settlement outcome to project onto a transfer.
type Result struct {
	EventID    uuid.UUID
	TransferID uuid.UUID
	// Status is StatusSettled or StatusRejected.
	Status Status
	// Reason is the motivo of a rejection.
	Reason string
	// RequestEventID is the result's binding (eventoSolicitacaoId): the
	// eventoId of the TransferenciaSolicitada it was decided for; uuid.Nil
	// when the record carried none.
	RequestEventID uuid.UUID
	// Type is the event's evento-tipo and Payload its record's value, kept
	// when the result is held (see Outcome).
	Type    string
	Payload []byte
}

// Check returns an error when r cannot be applied: its status is not
// final, or it is a rejection without a reason.
func (r Result) Check() error {
	if r.Status != StatusSettled && r.Status != StatusRejected {
		return fmt.Errorf("apply result: status %q is not final", r.Status)
	}
	if r.Status == StatusRejected && r.Reason == "" {
		return errors.New("apply result: rejection without a reason")
	}
	return nil
}

// Outcome is what applying one result did.
type Outcome int

// The outcomes of a result.
const (
	// Unchanged: a duplicate event, or a transfer already final.
	Unchanged Outcome = iota
	// Moved: the PENDENTE transfer took the result.
	Moved
	// Held: no transfer has the result's id, or the one that has it was
	// created with another request event than the result was decided for;
	// the result is kept (see HeldResult) instead of being applied or
	// dropped.
	Held
)

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
}
