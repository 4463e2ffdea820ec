package pgtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/test/support/pgtest"
)

// A standby pool refuses writes with SQLSTATE 25006 until promote, and
// takes them after.
func TestStandbyPoolRefusesWritesUntilPromoted(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	pool, promote := pgtest.StandbyPool(t, cfg)
	ctx := context.Background()
	_, err = pool.Exec(ctx, `CREATE TABLE t (v int)`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("write on the standby: %v, want SQLSTATE 25006", err)
	}
	promote()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (v int)`); err != nil {
		t.Fatalf("write after promote: %v", err)
	}
}
