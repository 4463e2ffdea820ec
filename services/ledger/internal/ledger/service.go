package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paysuite/payments/pkg/errkind"
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

// Settle settles ts, in order, in one transaction: all or nothing, with
// the results of settling them one by one. A rejection is a result, not
// an error; an error is a failure (database) worth retrying.
func (s *Service) Settle(ctx context.Context, ts []Transfer) ([]Result, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	rs, err := s.store.Settle(ctx, ts, s.rules.deciderFor(s.now().UTC(), ts))
	switch {
	case err != nil && len(ts) == 1:
		return nil, fmt.Errorf("settle transfer %s: %w", ts[0].ID, err)
	case err != nil:
		return nil, fmt.Errorf("settle batch of %d transfers (first %s): %w", len(ts), ts[0].ID, err)
	}
	return rs, nil
}

// MaxHolderLen is the longest titular (client id) an account takes, in
// characters, as the account table's check and the OpenAPI maxLength count.
const MaxHolderLen = 255

// OpenAccount creates a customer account of holder (OpenCreated), or finds
// it when it exists with the same currency and holder (OpenExisting). An existing
// account without a titular (opened before ownership) takes holder when
// operator is true: only an operator assigns it one, since a client that
// could would then debit it. Returns *ValidationError for a bad id (shape,
// or the reserved funding prefix), currency or holder (empty, longer
// than MaxHolderLen characters, or holding a NUL), ErrCurrencyConflict, ErrHolderConflict and, for a
// caller who is not an operator, ErrNoTitular.
func (s *Service) OpenAccount(ctx context.Context, id, currency, holder string, operator bool) (Account, OpenOutcome, error) {
	var fields []errkind.FieldError
	switch {
	case !ValidAccountID(id):
		fields = append(fields, errkind.FieldError{Field: "id", Message: validate.AccountRule})
	case strings.HasPrefix(id, FundingPrefix):
		fields = append(fields, errkind.FieldError{Field: "id", Message: "the prefix " + FundingPrefix + " is reserved"})
	}
	if !validate.Currency(currency) {
		fields = append(fields, errkind.FieldError{Field: "moeda", Message: validate.CurrencyRule})
	}
	// PostgreSQL's text holds no NUL character.
	if holder == "" || utf8.RuneCountInString(holder) > MaxHolderLen || strings.ContainsRune(holder, 0) {
		fields = append(fields, errkind.FieldError{Field: "titular", Message: fmt.Sprintf("must be a client id of 1 to %d characters, with no NUL", MaxHolderLen)})
	}
	if len(fields) > 0 {
		return Account{}, OpenFailed, &validate.ValidationError{Fields: fields}
	}
	a, created, err := s.store.CreateAccount(ctx, id, currency, holder)
	if errors.Is(err, ErrNoTitular) && operator {
		var claimed bool
		a, claimed, err = s.store.ClaimAccount(ctx, id, currency, holder)
		if err != nil {
			return Account{}, OpenFailed, err
		}
		if claimed {
			return a, OpenClaimed, nil
		}
		return a, OpenExisting, nil
	}
	switch {
	case err != nil:
		return Account{}, OpenFailed, err
	case created:
		return a, OpenCreated, nil
	}
	return a, OpenExisting, nil
}

// OpenOutcome is what OpenAccount did.
type OpenOutcome int

// Outcomes of OpenAccount.
const (
	// OpenFailed: an error, nothing done.
	OpenFailed OpenOutcome = iota
	// OpenCreated: the account was created.
	OpenCreated
	// OpenExisting: it existed with that currency and titular; nothing
	// changed.
	OpenExisting
	// OpenClaimed: it existed without a titular and an operator gave it
	// one.
	OpenClaimed
)

// String is the outcome as the audit line says it.
func (o OpenOutcome) String() string {
	switch o {
	case OpenCreated:
		return "created"
	case OpenExisting:
		return "existing"
	case OpenClaimed:
		return "claimed"
	}
	return "failed"
}

// The ledger's own error kinds, validation failures with a problem type
// and title of their own: only the ledger answers them.
var (
	KindDepositCeiling      = errkind.Refine(errkind.Validation, "deposit-over-ceiling", "Deposit over the ceiling of one deposit")
	KindDepositDailyCeiling = errkind.Refine(errkind.Validation, "deposit-over-daily-ceiling", "Deposits over the client's daily ceiling")
)

// CeilingError is a deposit over the configured ceiling of one deposit
// (KindDepositCeiling).
type CeilingError struct {
	// MaxCents is the ceiling.
	MaxCents int64
}

func (e *CeilingError) Error() string {
	return fmt.Sprintf("a deposit may carry at most %d cents", e.MaxCents)
}

// Public is e as the client is told it, the ceiling on the amount's field.
func (e *CeilingError) Public() *errkind.Error {
	return &errkind.Error{Kind: KindDepositCeiling, Detail: "the deposit is above the ceiling of one deposit",
		Fields: []errkind.FieldError{{Field: "valorEmCentavos", Message: fmt.Sprintf("must be at most %d", e.MaxCents)}}}
}

// DailyCeilingError is a deposit that would take its client's deposits
// of the day, in the account's currency, over the configured daily
// ceiling (LEDGER_MAX_DEPOSIT_CENTS_PER_DAY).
type DailyCeilingError struct {
	// MaxCents is the daily ceiling; Currency the currency it was
	// counted in.
	MaxCents int64
	Currency string
}

func (e *DailyCeilingError) Error() string {
	return fmt.Sprintf("a client may deposit at most %d cents of %s per day (UTC)", e.MaxCents, e.Currency)
}

// Public is e as the client is told it (KindDepositDailyCeiling).
func (e *DailyCeilingError) Public() *errkind.Error {
	return errkind.Errorf(KindDepositDailyCeiling, "the deposit would take this client's deposits of %s today (UTC) "+
		"over the daily ceiling of %d cents; nothing was written", e.Currency, e.MaxCents)
}

// MaxDepositCents is the ceiling of one deposit.
func (s *Service) MaxDepositCents() int64 {
	if s.rules.MaxDepositCents <= 0 {
		return MaxAmountCents
	}
	return s.rules.MaxDepositCents
}

// Deposit credits req's amount to its account from the funding account,
// once per key, recording its client and request id. Returns
// *ValidationError for an amount outside 1..10^15, *CeilingError for one
// above MaxDepositCents (nothing is written), and the errors of
// Store.Deposit, *DailyCeilingError among them when the client's
// deposits of the day in that currency would pass
// Rules.MaxDepositCentsPerDay (counted in the deposit's transaction). The
// ceiling of one deposit is checked before the key is looked up: a
// replay of a deposit above a ceiling lowered since is refused too; a
// replay is not counted again against the daily ceiling.
func (s *Service) Deposit(ctx context.Context, req DepositRequest) (Deposit, bool, error) {
	if !validate.AmountCents(req.AmountCents) {
		return Deposit{}, false, &validate.ValidationError{Fields: []errkind.FieldError{{Field: "valorEmCentavos", Message: validate.AmountRule}}}
	}
	if ceiling := s.MaxDepositCents(); req.AmountCents > ceiling {
		return Deposit{}, false, &CeilingError{MaxCents: ceiling}
	}
	if !ValidAccountID(req.AccountID) {
		return Deposit{}, false, ErrAccountNotFound
	}
	req.DayCeilingCents = max(0, s.rules.MaxDepositCentsPerDay)
	return s.store.Deposit(ctx, req)
}

// Deposits returns up to limit of the newest deposits, newest first.
// Returns *ValidationError for a limit outside 1..MaxPageSize.
func (s *Service) Deposits(ctx context.Context, limit int) ([]Deposit, error) {
	if limit < 1 || limit > MaxPageSize {
		return nil, &validate.ValidationError{Fields: []errkind.FieldError{{Field: "limite", Message: fmt.Sprintf("must be from 1 to %d", MaxPageSize)}}}
	}
	return s.store.Deposits(ctx, limit)
}

// Account returns the account, if r may read it. Returns
// ErrAccountNotFound for an unknown account and for one r may not read,
// so that a client learns nothing of the accounts of others, not even
// that they exist.
func (s *Service) Account(ctx context.Context, id string, r Reader) (Account, error) {
	if !ValidAccountID(id) {
		return Account{}, ErrAccountNotFound
	}
	a, err := s.store.Account(ctx, id)
	if err != nil {
		return Account{}, err
	}
	if !r.Sees(a) {
		return Account{}, ErrAccountNotFound
	}
	return a, nil
}

// Postings returns up to limit postings of the account older than the
// posting id before (0: from the newest), newest first, and whether older
// ones remain, if r may read the account. Returns *ValidationError for a
// limit outside 1..MaxPageSize, and ErrAccountNotFound as Account does.
func (s *Service) Postings(ctx context.Context, accountID string, before int64, limit int, r Reader) ([]Posting, bool, error) {
	if limit < 1 || limit > MaxPageSize {
		return nil, false, &validate.ValidationError{Fields: []errkind.FieldError{{Field: "limite", Message: fmt.Sprintf("must be from 1 to %d", MaxPageSize)}}}
	}
	if _, err := s.Account(ctx, accountID, r); err != nil {
		return nil, false, err
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
