package ledger

import (
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
)

// Account is an account and its balance.
type Account struct {
	ID           string
	Currency     string
	BalanceCents int64
	// ReservedCents is the sum of the account's open reservations (holds):
	// of its balance, only AvailableCents may be debited.
	ReservedCents int64
	// Holder is the titular: the client whose transfers may debit the
	// account. Empty for funding accounts and for accounts opened before
	// ownership existed.
	Holder string
	// Funding marks the funding account of the currency.
	Funding   bool
	CreatedAt time.Time
}

// Direction of a posting: debit or credit.
type Direction string

// Directions.
const (
	Debit  Direction = "D"
	Credit Direction = "C"
)

// Entry is one line of the double entry a settlement writes: an account
// debited or credited by an amount.
type Entry struct {
	AccountID   string
	Direction   Direction
	AmountCents int64
}

// apply moves a's balance by e: a debit takes the amount out, a credit
// puts it in.
func (e Entry) apply(a *Account) { a.BalanceCents += e.Signed() }

// Signed is e's amount as it moves its account's balance: a credit adds
// it, a debit takes it out.
func (e Entry) Signed() int64 {
	if e.Direction == Debit {
		return -e.AmountCents
	}
	return e.AmountCents
}

// AvailableCents is what a transfer or a hold may take from the account:
// its balance less its reservations.
func (a Account) AvailableCents() int64 { return a.BalanceCents - a.ReservedCents }

// Posting is one line of an account's history.
type Posting struct {
	ID int64
	// EntryID is the transfer id (a refund's posting's too), or the
	// deposit id.
	EntryID uuid.UUID
	// RefundID is the refund's id on a refund's posting; uuid.Nil
	// otherwise.
	RefundID    uuid.UUID
	Direction   Direction
	AmountCents int64
	// BalanceAfterCents is the running balance: the account's posted
	// balance right after this posting.
	BalanceAfterCents int64
	CreatedAt         time.Time
}

// Deposit is money entering an account from its currency's funding account.
type Deposit struct {
	// ID is the client's Idempotency-Key.
	ID                uuid.UUID
	AccountID         string
	Currency          string
	AmountCents       int64
	BalanceAfterCents int64
	// ClientID is the client that made the deposit.
	ClientID string
	// RequestID is the request id (X-Request-Id) of the request that made
	// it; empty when it was made outside a request.
	RequestID string
	CreatedAt time.Time
	// AccountHolder is the account's titular, read with the deposit
	// (empty for an account without one): it says who may see
	// BalanceAfterCents (BalanceVisibleTo).
	AccountHolder string
}

// BalanceVisibleTo reports whether r may see the balance the deposit left:
// only the account's titular or an operator, who may read the account
// anyway. A minting client that is not the titular learns nothing of the
// account's balance from its deposit.
func (d Deposit) BalanceVisibleTo(r Reader) bool {
	return r.Sees(Account{Holder: d.AccountHolder})
}

// DepositRequest is a deposit to make: ID is the client's Idempotency-Key,
// ClientID its author and RequestID the request id of the request asking
// for it (may be empty), both recorded with it.
type DepositRequest struct {
	ID          uuid.UUID
	AccountID   string
	AmountCents int64
	ClientID    string
	RequestID   string
	// DayCeilingCents is the most ClientID may deposit in the account's
	// currency in one UTC day, this deposit included; 0: no ceiling. The
	// service sets it from Rules.
	DayCeilingCents int64
}

// Reader is who reads an account: a client sees only the accounts whose
// titular it is; an operator (scope operacoes) sees every account.
type Reader struct {
	Client   string
	Operator bool
}

// Sees reports whether r may read a.
func (r Reader) Sees(a Account) bool {
	return r.Operator || (a.Holder != "" && a.Holder == r.Client)
}

// Errors of the account operations, each with its kind and what the
// client is told.
var (
	// ErrAccountNotFound: no account with that id.
	ErrAccountNotFound = errkind.Errorf(errkind.NotFound, "account not found")
	// ErrCurrencyConflict: the account exists with another currency.
	ErrCurrencyConflict = errkind.Errorf(errkind.Conflict, "the account exists with another currency")
	// ErrHolderConflict: the account exists with another titular.
	ErrHolderConflict = errkind.Errorf(errkind.Conflict, "the account exists with another titular")
	// ErrNoTitular: the account exists without a titular, and only an
	// operator may give it one.
	ErrNoTitular = errkind.Errorf(errkind.Conflict, "the account exists without a titular; only an operator can give it one")
	// ErrKeyReused: the idempotency key was used for another request.
	ErrKeyReused = errkind.Errorf(errkind.KeyReused, "this Idempotency-Key was used for another deposit")
	// ErrFundingAccount: funding accounts do not take deposits.
	ErrFundingAccount = errkind.Errorf(errkind.Validation, "funding accounts do not take deposits")
	// ErrBalanceOverflow: the deposit would take a balance past what 64
	// bits of cents hold.
	ErrBalanceOverflow = &errkind.Error{Kind: errkind.Validation, Detail: "the deposit would overflow a balance",
		Fields: []errkind.FieldError{{Field: "valorEmCentavos", Message: "too large for this account"}}}
)
