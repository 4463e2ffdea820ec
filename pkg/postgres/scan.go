package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ScanOne reads the row of a query that finds at most one with scan: it
// returns notFound when there is no row and any other error wrapped with
// what (such as "read account CC-1"), so that each store's lookups by key
// map "no row" to their own domain error the same way.
func ScanOne[T any](row pgx.Row, scan func(pgx.Row) (T, error), notFound error, what string) (T, error) {
	v, err := scan(row)
	if errors.Is(err, pgx.ErrNoRows) {
		var zero T
		return zero, notFound
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}
