// Package validate holds the request rules that the transfers and ledger
// APIs share (CONTRACTS.md): the shape of an account id and of a currency,
// the bounds of an amount, and the error that lists every broken rule of a
// request. The domains call it; a *ValidationError is of the kind
// errkind.Validation (a 422 with one entry per field).
package validate

import (
	"cmp"
	"strings"

	"github.com/paysuite/payments/pkg/errkind"
)

// Bounds of an amount in cents: 1 to 10^15.
const (
	MinAmountCents int64 = 1
	MaxAmountCents int64 = 1_000_000_000_000_000
)

// MaxAccountLen is the longest account id.
const MaxAccountLen = 32

// What a broken rule says, the same in every service.
const (
	AccountRule  = "must be 1 to 32 characters of A-Z, a-z, 0-9, '.', '_' or '-'"
	CurrencyRule = "must be three upper-case letters (ISO 4217)"
	AmountRule   = "must be an integer from 1 to 1000000000000000"
)

// AccountID reports whether id has the shape of an account id: 1 to
// MaxAccountLen characters of [A-Za-z0-9._-].
func AccountID(id string) bool {
	if id == "" || len(id) > MaxAccountLen {
		return false
	}
	for i := range len(id) {
		if !accountChar(id[i]) {
			return false
		}
	}
	return true
}

// accountChar reports whether c is one of [A-Za-z0-9._-].
func accountChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Currency reports whether c is three upper-case letters (an ISO 4217
// code's shape).
func Currency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := range 3 {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// AmountCents reports whether n is within MinAmountCents..MaxAmountCents.
func AmountCents(n int64) bool { return n >= MinAmountCents && n <= MaxAmountCents }

// ValidationError lists every rule a request breaks. Detail is what the
// client is told of the request as a whole; empty, "the request breaks a
// rule".
type ValidationError struct {
	Detail string
	Fields []errkind.FieldError // Field is the JSON name of the field
}

// Public is e as its client is told it: a validation failure naming
// every broken field.
func (e *ValidationError) Public() *errkind.Error {
	return &errkind.Error{Kind: errkind.Validation, Detail: cmp.Or(e.Detail, "the request breaks a rule"), Fields: e.Fields}
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid request: " + strings.Join(parts, "; ")
}
