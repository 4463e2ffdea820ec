package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/validate"
)

// The balance at an instant and the statement (CONTRACTS.md section 11)
// read the running balance each posting keeps (Posting.BalanceAfterCents),
// never the sum of an account's history.
//
// Instants. Every posting is stamped with the database clock read after
// its transaction took the accounts' locks, and postings of one account
// are written under its lock: per account, the stamps never go back in
// the order of the running balance. The balance at an instant T is the
// running balance of the account's last posting stamped before T (0 when
// none): T itself is exclusive, as a statement's end is, so that a
// statement [desde, ate) opens with the balance at desde, lists every
// posting stamped from desde up to ate, and closes with the balance at
// ate, and no posting stamped exactly at an end is counted twice or
// missed. An instant is settled once the transactions writing at it have
// committed (each is a few milliseconds): a posting stamped before T whose
// transaction commits after a read for T changes what a later read for T
// answers, never what the chain says.

// MaxStatementRange is the longest statement (ate - desde): a statement
// streams, so its length does not bound memory, but it reads in one
// snapshot, which holds back the database's cleanup of old row versions
// for as long as the client takes to read it; a year is the longest a
// bank statement covers.
const MaxStatementRange = 366 * 24 * time.Hour

// StatementHeader is what a statement says before its postings: the
// account, the range [From, To), and the balances at both ends.
type StatementHeader struct {
	Account      Account
	From, To     time.Time
	OpeningCents int64
	ClosingCents int64
}

// BalanceAt returns the account and its posted balance at instant at (see
// above), if r may read it. Returns ErrAccountNotFound as Account does.
func (s *Service) BalanceAt(ctx context.Context, id string, at time.Time, r Reader) (Account, int64, error) {
	if !ValidAccountID(id) {
		return Account{}, 0, ErrAccountNotFound
	}
	a, balance, err := s.store.BalanceAt(ctx, id, at)
	if err != nil {
		return Account{}, 0, err
	}
	if !r.Sees(a) {
		return Account{}, 0, ErrAccountNotFound
	}
	return a, balance, nil
}

// Statement reads the account's statement over [from, to), if r may read
// it: it calls begin with the header, then each with every posting stamped
// in the range, oldest first, as it reads them (the postings are never all
// in memory), all from one snapshot, so that the opening balance plus the
// postings is the closing balance. Returns *validate.ValidationError when
// from is not before to or the range is longer than MaxStatementRange,
// ErrAccountNotFound as Account does, and what begin or each return.
func (s *Service) Statement(ctx context.Context, id string, from, to time.Time, r Reader,
	begin func(StatementHeader) error, each func(Posting) error) error {
	switch {
	case !from.Before(to):
		return &validate.ValidationError{Fields: []errkind.FieldError{{Field: "ate", Message: "must be after desde"}}}
	case to.Sub(from) > MaxStatementRange:
		return &validate.ValidationError{Fields: []errkind.FieldError{{Field: "ate",
			Message: fmt.Sprintf("must be at most %d days after desde", MaxStatementRange/(24*time.Hour))}}}
	}
	a, err := s.Account(ctx, id, r)
	if err != nil {
		return err
	}
	return s.store.Statement(ctx, id, from, to, func(opening, closing int64) error {
		return begin(StatementHeader{Account: a, From: from, To: to, OpeningCents: opening, ClosingCents: closing})
	}, each)
}
