// Package ledger is the ledger's domain: accounts with a currency and a
// balance, double-entry postings, the settlement rules of an analysed
// transfer (the seed's LiquidacaoService) and deposits from the funding
// account of a currency. It declares the Store it needs; the postgres
// package implements it.
package ledger

import (
	"context"
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
	// ClientID is the client that requested the transfer (clienteId); empty
	// when the record named none.
	ClientID string
	// Authorization is the transfers service's signature over the
	// transfer's id, accounts, amount, currency and client (autorizacao);
	// nil when the record carries none.
	Authorization *events.Authorization
	// RequestEventID is the eventoSolicitacaoId of the analysed record,
	// passed on to the result event (uuid.Nil when it had none).
	RequestEventID uuid.UUID
	// Traceparent is the W3C trace context of the input record of a batch,
	// passed on to the result event; may be empty. Trace context travels
	// in ctx everywhere else; a batch is the one exception: its records
	// belong to as many traces, and one ctx cannot carry them. A single
	// transfer leaves it empty and the outbox takes ctx's.
	Traceparent string
	// Hold makes the transfer a hold (captura MANUAL): approved, it
	// reserves the amount on the source account until ExpiresAt instead
	// of posting it. A zero ExpiresAt is DefaultHoldTTL after the
	// decision.
	Hold      bool
	ExpiresAt time.Time
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
	// Reserved: a hold's amount was reserved on its source account.
	Reserved Outcome = "RESERVADA"
)

// Rejection reasons the ledger gives, in the order its rules apply.
const (
	ReasonAccountNotFound   = events.ReasonAccountNotFound
	ReasonCurrencyMismatch  = events.ReasonCurrencyMismatch
	ReasonInsufficientFunds = events.ReasonInsufficientFunds
	ReasonUnauthorized      = events.ReasonUnauthorizedSource
)

// Ownership says whether Decide checks the transfer's client against the
// source account's titular (LEDGER_OWNERSHIP, CONTRACTS.md section 8).
type Ownership int

// Ownership policies. The zero value enforces.
const (
	// OwnershipEnforced: only the titular's transfers debit an account; a
	// transfer that names no client debits nothing.
	OwnershipEnforced Ownership = iota
	// OwnershipOff skips the check, for a mixed deployment whose producers
	// predate clienteId.
	OwnershipOff
)

// Proof is what the ledger established, before any rule runs, of who
// asked for a transfer.
type Proof int

// Proofs. The zero value debits nothing.
const (
	// Unproven: the record carries no authorization, or one that does not
	// verify against the ledger's keys (another key, or any field changed
	// since the transfers service signed it).
	Unproven Proof = iota
	// Signed: the transfers service's signature verifies: the client the
	// record names is the one that asked, for exactly this transfer.
	Signed
	// Unchecked: LEDGER_OWNERSHIP=off; neither the signature nor the
	// titular is checked.
	Unchecked
)

// String is the policy as LEDGER_OWNERSHIP writes it: "on" or "off".
func (o Ownership) String() string {
	if o == OwnershipOff {
		return "off"
	}
	return "on"
}

// Result is the outcome of one transfer; Reason is set when Rejected.
type Result struct {
	TransferID uuid.UUID
	Outcome    Outcome
	Reason     string
}

// Store keeps accounts, postings, settlement results and the outbox.
type Store interface {
	// Settle settles ts in one database transaction, in order, exactly as
	// if each were settled alone in its own transaction one after the
	// other: it claims each transfer by inserting its processed marker (a
	// transfer already claimed, earlier or in ts itself, is a Duplicate),
	// locks every account involved ORDER BY id FOR UPDATE, asks decide for
	// each claimed transfer's Decision, writes each Decision's Entries as
	// postings and, for every account they name, the balance decide left
	// on the locked Account, records each result and enqueues each
	// Decision's event in the outbox. It computes no amount itself. It returns one Result per
	// transfer, in the order of ts. On error nothing was written.
	Settle(ctx context.Context, ts []Transfer, decide Decider) ([]Result, error)

	// CloseReservations applies cs, in order, in one database transaction, exactly as
	// if each were applied alone one after the other: it locks the
	// reservations they name ORDER BY transfer id FOR UPDATE, then the
	// accounts of the open ones ORDER BY id FOR UPDATE, asks close for
	// each command's Closing (a reservation unknown to the store is
	// passed as nil), writes each capture's Entries as postings, the
	// balances and reservations close left on the locked Accounts, the
	// closed reservations, and enqueues each closing event in the outbox.
	// It returns one Result per command, in the order of cs. On error
	// (close's included) nothing was written.
	CloseReservations(ctx context.Context, cs []Command, close Closer) ([]Result, error)

	// ExpireDue closes, as CloseReservations does with Expire commands, up to limit
	// open reservations whose expiry is at or before now, oldest first,
	// skipping those another transaction has locked (FOR UPDATE SKIP
	// LOCKED), so that concurrent sweeps share the work and never wait
	// for each other. It returns one Result per reservation it closed.
	ExpireDue(ctx context.Context, now time.Time, limit int, close Closer) ([]Result, error)

	// Refund decides fs in one database transaction, in order, exactly as
	// if each were decided alone one after the other: it claims each
	// refund by inserting its marker (a refund claimed earlier, or earlier
	// in fs, is Replayed with the stored result and changes nothing),
	// locks what the ledger settled for each transfer ORDER BY transfer
	// id (the lock that orders the refunds of one transfer), then the
	// accounts fs name ORDER BY id FOR UPDATE, reads each transfer's
	// refunds settled once those locks are held, asks decide for each
	// claimed refund (its transfer's Refundable nil when the ledger
	// decided no such transfer), writes each decision's Entries as
	// postings of the refund, the balances decide left, the results, and
	// enqueues each event in the outbox. It returns one RefundResult per
	// refund, in the order of fs. On error nothing was written.
	Refund(ctx context.Context, fs []Refund, decide RefundDecider) ([]RefundResult, error)

	// CreateAccount creates a customer account of holder with a zero
	// balance (and the funding account of its currency if needed). created
	// is false when the account already existed with that currency and
	// holder. Returns ErrCurrencyConflict if it exists with another
	// currency, ErrNoTitular if it exists without a holder (opened before
	// ownership), ErrHolderConflict if with another holder.
	CreateAccount(ctx context.Context, id, currency, holder string) (a Account, created bool, err error)

	// ClaimAccount gives holder to an existing customer account of currency
	// that has no holder yet, and returns it; an account that already has
	// holder is returned unchanged (claimed false). Returns
	// ErrAccountNotFound, ErrCurrencyConflict and ErrHolderConflict (it
	// has another holder).
	ClaimAccount(ctx context.Context, id, currency, holder string) (a Account, claimed bool, err error)

	// Deposit credits the amount to the account and debits its currency's
	// funding account, once per id, recording its client and request id: a
	// second call with the same id, account, amount and client returns the
	// first deposit with replayed true. With a DayCeilingCents, the
	// client's deposits of the day in the account's currency are counted
	// in the same transaction, under a lock of that count, so that
	// concurrent deposits cannot pass the ceiling together. Returns
	// ErrAccountNotFound, ErrFundingAccount, ErrKeyReused (same id, other
	// account, amount or client), ErrBalanceOverflow or
	// *DailyCeilingError; on error nothing was written.
	Deposit(ctx context.Context, req DepositRequest) (d Deposit, replayed bool, err error)

	// Deposits returns up to limit deposits, newest first.
	Deposits(ctx context.Context, limit int) ([]Deposit, error)

	// Account returns the account. Returns ErrAccountNotFound.
	Account(ctx context.Context, id string) (Account, error)

	// Postings returns up to limit postings of the account with an id below
	// before, newest first. Returns ErrAccountNotFound.
	Postings(ctx context.Context, accountID string, before int64, limit int) ([]Posting, error)

	// BalanceAt returns the account and the running balance of its last
	// posting stamped before at, 0 when there is none, in one statement
	// (the balance one index probe). Returns ErrAccountNotFound.
	BalanceAt(ctx context.Context, accountID string, at time.Time) (Account, int64, error)

	// Statement reads, in one snapshot, the account's balances at from and
	// at to (as BalanceAt), calls begin with them, then calls each with
	// every posting stamped in [from, to), oldest first, as it reads it.
	// It stops at the first error begin or each returns, and returns it.
	Statement(ctx context.Context, accountID string, from, to time.Time,
		begin func(opening, closing int64) error, each func(Posting) error) error
}

// Decide applies the settlement rules, in the seed's order, to t against
// the locked accounts (nil when absent), given the proof of who asked for
// t (Rules.Prove), and returns the outcome (Settled or Rejected), the
// reason of a rejection and, when Settled, the double entry (a debit of
// the source and a credit of the destination for the amount); a hold
// (t.Hold) is Reserved instead, with no entries:
//
//  1. proof is Unproven: ORIGEM_NAO_AUTORIZADA;
//  2. either account missing, or a funding account: CONTA_INEXISTENTE;
//  3. with proof Signed, t names no client or a client that is not the
//     source account's titular: ORIGEM_NAO_AUTORIZADA;
//  4. either account in another currency than t: MOEDA_INCOMPATIVEL;
//  5. source available balance (AvailableCents: the balance less the
//     open reservations) below the amount: SALDO_INSUFICIENTE.
//
// The proof comes first so that a record the transfers service did not
// sign (forged with a principal's broker credentials or written into an
// outbox table) gets the same answer whatever it names: it learns neither
// whether an account exists nor whether its titular guess was right.
// Ownership comes before the currency and balance rules so that a client
// who does not hold the source account learns nothing of its currency or
// balance from the motivo.
//
// On Settled it applies the entries to the two balances in place, and on
// Reserved it adds the amount to the source's ReservedCents, so that the
// next transfer of a batch sees them as a later transaction would, and so
// that the store writes the balances it is given: this is the one place a
// settlement's or a reservation's amounts are computed.
func Decide(source, dest *Account, t Transfer, proof Proof) (Outcome, string, []Entry) {
	if proof == Unproven {
		return Rejected, ReasonUnauthorized, nil
	}
	if source == nil || dest == nil || source.Funding || dest.Funding {
		return Rejected, ReasonAccountNotFound, nil
	}
	if proof != Unchecked && (t.ClientID == "" || source.Holder != t.ClientID) {
		return Rejected, ReasonUnauthorized, nil
	}
	if source.Currency != t.Currency || dest.Currency != t.Currency {
		return Rejected, ReasonCurrencyMismatch, nil
	}
	if source.AvailableCents() < t.AmountCents {
		return Rejected, ReasonInsufficientFunds, nil
	}
	if t.Hold {
		source.ReservedCents += t.AmountCents
		return Reserved, "", nil
	}
	entries := []Entry{
		{AccountID: source.ID, Direction: Debit, AmountCents: t.AmountCents},
		{AccountID: dest.ID, Direction: Credit, AmountCents: t.AmountCents},
	}
	entries[0].apply(source)
	entries[1].apply(dest)
	return Settled, "", entries
}
