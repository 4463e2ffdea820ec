package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

// TestScanOne: the row's value when there is one, the caller's not-found
// error when there is none, and any other error wrapped with what.
func TestScanOne(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	errMissing := errors.New("missing")
	scanInt := func(row pgx.Row) (int, error) {
		var n int
		err := row.Scan(&n)
		return n, err
	}
	one := func(sql string) (int, error) {
		return postgres.ScanOne(pool.QueryRow(t.Context(), sql), scanInt, errMissing, "read n")
	}
	if n, err := one(`SELECT 7`); err != nil || n != 7 {
		t.Errorf("one row: %d, %v; want 7", n, err)
	}
	if n, err := one(`SELECT 7 WHERE false`); err != errMissing || n != 0 { //nolint:errorlint // the very error, unwrapped
		t.Errorf("no row: %d, %v; want 0 and the not-found error itself", n, err)
	}
	n, err := one(`SELECT 1/0`)
	if err == nil || errors.Is(err, errMissing) || n != 0 || err.Error()[:8] != "read n: " {
		t.Errorf("failing query: %d, %v; want 0 and the error after \"read n: \"", n, err)
	}
}
