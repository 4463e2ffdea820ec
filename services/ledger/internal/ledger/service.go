package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/validate"
)

// MaxAmountCents is the largest amount a deposit may carry (10^15 cents),
// as for a transfer.
const MaxAmountCents = validate.MaxAmountCents

// Page sizes of Postings.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// FieldError is one invalid input field.
type FieldError = validate.FieldError

// ValidationError lists the invalid fields of a request.
type ValidationError = validate.ValidationError

// ValidAccountID reports whether id has the shape of an account id: 1 to 32
// characters of [A-Za-z0-9._-].
func ValidAccountID(id string) bool { return validate.AccountID(id) }

// Service is the ledger's application service: settlement of analysed
// transfers and the operations of the accounts API.
type Service struct {
	store Store
	rules Rules
	now   func() time.Time
}

// NewService returns the service over store, settling with rules. now is
// the clock stamped on result events (nil: time.Now).
func NewService(store Store, rules Rules, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, rules: rules, now: now}
}

// Settle settles one transfer in its own transaction. A rejection is a
// result, not an error; an error is a failure (database) worth retrying.
func (s *Service) Settle(ctx context.Context, t Transfer) (Result, error) {
	rs, err := s.store.Settle(ctx, []Transfer{t}, s.rules.Decider(s.now().UTC()))
	if err != nil {
		return Result{}, fmt.Errorf("settle transfer %s: %w", t.ID, err)
	}
	return rs[0], nil
}

// SettleBatch settles ts, in order, in one transaction: all or nothing,
// with the results of settling them one by one.
func (s *Service) SettleBatch(ctx context.Context, ts []Transfer) ([]Result, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	rs, err := s.store.Settle(ctx, ts, s.rules.Decider(s.now().UTC()))
	if err != nil {
		return nil, fmt.Errorf("settle batch of %d transfers (first %s): %w", len(ts), ts[0].ID, err)
	}
	return rs, nil
}

// MaxHolderLen is the longest titular (client id) an account takes, in
// characters, as the account table's check and the OpenAPI maxLength count.
const MaxHolderLen = 255

// OpenAccount creates a customer account of holder, or finds it when it
// exists with the same currency and holder (created false). Returns
// *ValidationError for a bad id (shape, or the reserved funding prefix),
// currency or holder (empty, longer than MaxHolderLen characters, or
// holding a NUL),
// ErrCurrencyConflict and ErrHolderConflict.
func (s *Service) OpenAccount(ctx context.Context, id, currency, holder string) (Account, bool, error) {
	var fields []FieldError
	switch {
	case !ValidAccountID(id):
		fields = append(fields, FieldError{Field: "id", Message: validate.AccountRule})
	case strings.HasPrefix(id, FundingPrefix):
		fields = append(fields, FieldError{Field: "id", Message: "the prefix " + FundingPrefix + " is reserved"})
	}
	if !validate.Currency(currency) {
		fields = append(fields, FieldError{Field: "moeda", Message: validate.CurrencyRule})
	}
	// PostgreSQL's text holds no NUL character.
	if holder == "" || utf8.RuneCountInString(holder) > MaxHolderLen || strings.ContainsRune(holder, 0) {
		fields = append(fields, FieldError{Field: "titular", Message: fmt.Sprintf("must be a client id of 1 to %d characters, with no NUL", MaxHolderLen)})
	}
	if len(fields) > 0 {
		return Account{}, false, &ValidationError{Fields: fields}
	}
	return s.store.CreateAccount(ctx, id, currency, holder)
}

// Deposit credits amountCents to accountID from the funding account, once
// per key, recording client as its author. Returns *ValidationError for an
// amount outside 1..10^15, and the errors of Store.Deposit.
func (s *Service) Deposit(ctx context.Context, key uuid.UUID, accountID string, amountCents int64, client string) (Deposit, bool, error) {
	if !validate.AmountCents(amountCents) {
		return Deposit{}, false, &ValidationError{Fields: []FieldError{{Field: "valorEmCentavos", Message: validate.AmountRule}}}
	}
	if !ValidAccountID(accountID) {
		return Deposit{}, false, ErrAccountNotFound
	}
	return s.store.Deposit(ctx, key, accountID, amountCents, client)
}

// Account returns the account. Returns ErrAccountNotFound.
func (s *Service) Account(ctx context.Context, id string) (Account, error) {
	if !ValidAccountID(id) {
		return Account{}, ErrAccountNotFound
	}
	return s.store.Account(ctx, id)
}

// Postings returns up to limit postings of the account older than the
// posting id before (0: from the newest), newest first, and whether older
// ones remain. Returns *ValidationError for a limit outside 1..MaxPageSize,
// and ErrAccountNotFound.
func (s *Service) Postings(ctx context.Context, accountID string, before int64, limit int) ([]Posting, bool, error) {
	if limit < 1 || limit > MaxPageSize {
		return nil, false, &ValidationError{Fields: []FieldError{{Field: "limite", Message: fmt.Sprintf("must be from 1 to %d", MaxPageSize)}}}
	}
	if !ValidAccountID(accountID) {
		return nil, false, ErrAccountNotFound
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	ps, err := s.store.Postings(ctx, accountID, before, limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(ps) > limit {
		return ps[:limit], true, nil
	}
	return ps, false, nil
}
