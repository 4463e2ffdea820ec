package pgtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StandbyPool opens a pool from cfg whose connections refuse writes as a
// standby's do (SQLSTATE 25006: the pool reached a standby, or an old
// primary fenced read-only) until promote is called. promote is the
// promotion: new connections take writes, and the pool is reset so that
// none of its read-only connections is used again. The pool is closed when
// the test ends; cfg is copied, not changed.
func StandbyPool(tb testing.TB, cfg *pgxpool.Config) (pool *pgxpool.Pool, promote func()) {
	tb.Helper()
	cfg = cfg.Copy()
	var standby atomic.Bool
	standby.Store(true)
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		if standby.Load() {
			_, err := c.Exec(ctx, `SET default_transaction_read_only = on`)
			return err
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: open standby pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool, func() {
		standby.Store(false)
		pool.Reset()
	}
}
