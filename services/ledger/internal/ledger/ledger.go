// Package ledger is the ledger's domain: accounts with a currency and a
// balance, double-entry postings, the settlement rules of an analysed
// transfer (the seed's LiquidacaoService) and deposits from the funding
// account of a currency. It declares the Store it needs; the postgres
// package implements it.
package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
)

// FundingPrefix starts the id of the funding account of each currency
// ("__FUNDING__BRL"): the other side of every deposit, the only account
// allowed a negative balance, and not an account a client can create or
// transfer from or to.
const FundingPrefix = "__FUNDING__"

// FundingAccountID returns the id of currency's funding account.
func FundingAccountID(currency string) string { return FundingPrefix + currency }

// Transfer is an analysed transfer to settle (TransferenciaAnalisada).
type Transfer struct {
	ID uuid.UUID
	// EventID is the evento-id of the TransferenciaAnalisada.
	EventID     uuid.UUID
	Source      string
	Dest        string
	AmountCents int64
	Currency    string
	// Traceparent is the W3C trace context of the input record, passed on
	// to the result event; may be empty.
	Traceparent string
}

// Outcome is what settling a transfer did.
type Outcome string

// Outcomes. Settled and Rejected are the wire statuses.
const (
	Settled  Outcome = "LIQUIDADA"
	Rejected Outcome = "REJEITADA"
	// Duplicate: the transfer had already been decided (settled or
	// rejected) by an earlier delivery; nothing was done.
	Duplicate Outcome = "DUPLICADA"
)

// Rejection reasons the ledger gives, in the order its rules apply.
const (
	ReasonAccountNotFound   = events.ReasonAccountNotFound
	ReasonCurrencyMismatch  = events.ReasonCurrencyMismatch
	ReasonInsufficientFunds = events.ReasonInsufficientFunds
)

// Result is the outcome of one transfer; Reason is set when Rejected.
type Result struct {
	TransferID uuid.UUID
	Outcome    Outcome
	Reason     string
}

// Account is an account and its balance.
type Account struct {
	ID           string
	Currency     string
	BalanceCents int64
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

// Posting is one line of an account's history.
type Posting struct {
	ID int64
	// EntryID is the transfer id, or the deposit id.
	EntryID     uuid.UUID
	Direction   Direction
	AmountCents int64
	CreatedAt   time.Time
}

// Deposit is money entering an account from its currency's funding account.
type Deposit struct {
	// ID is the client's Idempotency-Key.
	ID                uuid.UUID
	AccountID         string
	AmountCents       int64
	BalanceAfterCents int64
	CreatedAt         time.Time
}

// Errors of the account operations.
var (
	// ErrAccountNotFound: no account with that id.
	ErrAccountNotFound = errors.New("account not found")
	// ErrCurrencyConflict: the account exists with another currency.
	ErrCurrencyConflict = errors.New("account exists with another currency")
	// ErrKeyReused: the idempotency key was used for another request.
	ErrKeyReused = errors.New("idempotency key reused with another request")
	// ErrFundingAccount: funding accounts do not take deposits.
	ErrFundingAccount = errors.New("funding accounts do not take deposits")
	// ErrBalanceOverflow: the deposit would take a balance past what 64
	// bits of cents hold.
	ErrBalanceOverflow = errors.New("balance would overflow")
)

// Store keeps accounts, postings, settlement results and the outbox.
type Store interface {
	// Settle settles ts in one database transaction, in order, with the
	// rules of Decide, exactly as if each were settled alone in its own
	// transaction one after the other: it claims each transfer by inserting
	// its processed marker (a transfer already claimed, earlier or in ts
	// itself, is a Duplicate), locks every account involved ORDER BY id FOR
	// UPDATE, writes the debit and credit postings and balances of each
	// settled transfer, records each result and enqueues its result event in
	// the outbox, stamped at now. It returns one Result per transfer, in the
	// order of ts. On error nothing was written.
	Settle(ctx context.Context, ts []Transfer, now time.Time) ([]Result, error)

	// CreateAccount creates a customer account with a zero balance (and the
	// funding account of its currency if needed). created is false when the
	// account already existed with that currency. Returns
	// ErrCurrencyConflict if it exists with another currency.
	CreateAccount(ctx context.Context, id, currency string) (a Account, created bool, err error)

	// Deposit credits amount to the account and debits its currency's
	// funding account, once per id: a second call with the same id, account
	// and amount returns the first deposit with replayed true. Returns
	// ErrAccountNotFound, ErrFundingAccount, ErrKeyReused (same id, other
	// account or amount) or ErrBalanceOverflow.
	Deposit(ctx context.Context, id uuid.UUID, accountID string, amountCents int64) (d Deposit, replayed bool, err error)

	// Account returns the account. Returns ErrAccountNotFound.
	Account(ctx context.Context, id string) (Account, error)

	// Postings returns up to limit postings of the account with an id below
	// before, newest first. Returns ErrAccountNotFound.
	Postings(ctx context.Context, accountID string, before int64, limit int) ([]Posting, error)
}

// Decide applies the settlement rules, in the seed's order, to t against
// the locked accounts (nil when absent) and returns the outcome (Settled or
// Rejected) and the reason of a rejection:
//
//  1. either account missing, or a funding account: CONTA_INEXISTENTE;
//  2. either account in another currency than t: MOEDA_INCOMPATIVEL;
//  3. source balance below the amount: SALDO_INSUFICIENTE.
//
// On Settled it moves the amount between the two balances in place, so that
// the next transfer of a batch sees them as a later transaction would.
func Decide(source, dest *Account, t Transfer) (Outcome, string) {
	if source == nil || dest == nil || source.Funding || dest.Funding {
		return Rejected, ReasonAccountNotFound
	}
	if source.Currency != t.Currency || dest.Currency != t.Currency {
		return Rejected, ReasonCurrencyMismatch
	}
	if source.BalanceCents < t.AmountCents {
		return Rejected, ReasonInsufficientFunds
	}
	source.BalanceCents -= t.AmountCents
	dest.BalanceCents += t.AmountCents
	return Settled, ""
}
