// Package postgres holds the suite's PostgreSQL plumbing: the connection
// pool, transactions as closures with a bounded retry on serialization
// failures and deadlocks, after-commit hooks, and the mapping of SQLSTATE
// codes to Go errors.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/backoff"
)

// SQLSTATE codes the suite reacts to.
const (
	CodeUniqueViolation      = "23505"
	CodeCheckViolation       = "23514"
	CodeForeignKeyViolation  = "23503"
	CodeSerializationFailure = "40001"
	CodeDeadlockDetected     = "40P01"
	CodeLockNotAvailable     = "55P03"
)

// maxTxAttempts bounds the retries of a transaction that failed with a
// serialization failure or a deadlock.
const maxTxAttempts = 5

// txBackoff paces the retries of a transaction that lost a serialization
// conflict or a deadlock: 10 to 20 ms, then 20 to 40 ms, ..., at most 200 ms.
var txBackoff = backoff.Exponential{Initial: 20 * time.Millisecond, Multiplier: 2, Max: 200 * time.Millisecond, Jitter: true}

// CallTimeout bounds one database call of a long-running loop (a relay's
// claim and mark, a periodic read, a consumer's attempt): a server that
// hangs (SIGSTOP, a partition that drops packets without a reset) never
// answers, and without a bound the loop would wait for it for good instead
// of reconnecting, through a multi-host URL, to the promoted standby.
const CallTimeout = 10 * time.Second

// PingTimeout bounds the ping of a connection idle for over a second,
// which the pool sends before it hands the connection out: one to a hung
// server is dropped within it, and the next is tried, instead of failing
// the caller at its own deadline.
const PingTimeout = time.Second

// DB is a pgx pool with the suite's transaction helper.
type DB struct {
	*pgxpool.Pool
}

// Open connects a pool to dsn and checks it answers.
func Open(ctx context.Context, dsn string, maxConns int32) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = PingTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return &DB{Pool: pool}, nil
}

// Wrap makes a DB of an existing pool.
func Wrap(pool *pgxpool.Pool) *DB { return &DB{Pool: pool} }

// Migrate applies the given migration sets through a database/sql handle
// borrowed from the pool.
func (db *DB) Migrate(ctx context.Context, sets ...migrations.Set) error {
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	defer sqlDB.Close()
	return migrations.Apply(ctx, sqlDB, sets...)
}

// SQL returns a database/sql handle on the pool; the caller closes it.
func (db *DB) SQL() *sql.DB { return stdlib.OpenDBFromPool(db.Pool) }

// Tx is the transaction handed to InTx closures: a pgx.Tx that can also
// register functions to run after a successful commit.
type Tx struct {
	pgx.Tx
	afterCommit []func()
}

// AfterCommit registers f to run once the transaction committed. f does not
// run if the transaction rolls back.
func (t *Tx) AfterCommit(f func()) { t.afterCommit = append(t.afterCommit, f) }

// AfterCommit registers f on tx when tx came from InTx; for any other pgx.Tx
// it does nothing (the caller then relies on whatever polling exists).
func AfterCommit(tx pgx.Tx, f func()) {
	if t, ok := tx.(*Tx); ok {
		t.AfterCommit(f)
	}
}

// InTx runs fn in a transaction: it commits when fn returns nil and rolls
// back otherwise. A serialization failure or deadlock (40001, 40P01) reruns
// the whole closure, up to a bound, so fn must be safe to run again.
func (db *DB) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return db.InTxOptions(ctx, pgx.TxOptions{}, fn)
}

// InTxOptions is InTx with explicit transaction options.
func (db *DB) InTxOptions(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		var hooks []func()
		err = pgx.BeginTxFunc(ctx, db.Pool, opts, func(ptx pgx.Tx) error {
			t := &Tx{Tx: ptx}
			if err := fn(t); err != nil {
				return err
			}
			hooks = t.afterCommit
			return nil
		})
		if err == nil {
			for _, h := range hooks {
				h()
			}
			return nil
		}
		if !IsRetryable(err) || attempt == maxTxAttempts {
			break
		}
		// Short jittered pause so that the contenders do not collide again.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(txBackoff.Delay(attempt)):
		}
	}
	return err
}

// GenericPlanSQL makes the prepared statements that follow it in the same
// transaction run on their generic plan, made with sequential scans off
// (set_config(..., true) ends with the transaction). A statement whose rows
// come from unnest of array parameters is re-planned at every execution
// otherwise: its generic plan, costed for arrays of unknown length, never
// looks cheaper than a custom plan for the arrays at hand, so PostgreSQL
// keeps making custom ones, and the planning of a statement of several CTEs
// costs more than running it for a batch of one. Queue it ahead of such
// statements in their batch (one round trip). Only for statements whose
// plan is the same whatever the arrays' lengths: index lookups by key per
// element.
//
// The generic plan is made once per session and kept until the table's
// statistics change, and on a new deployment they are taken while the
// tables are nearly empty: a plan made then would read the whole table per
// batch (a sequential scan is the cheapest way through a page or two) for
// as long as the session lives, while the table grows by thousands of rows
// between two autovacuum analyses. With sequential scans off the plan finds
// each row by its key whatever the statistics say.
const GenericPlanSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`

// Code returns the SQLSTATE of err, or "" when err is not a PostgreSQL error.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// ConstraintName returns the violated constraint of err, or "".
func ConstraintName(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

// IsRetryable reports whether err is a serialization failure or a deadlock,
// after which the whole transaction may be run again.
func IsRetryable(err error) bool {
	switch Code(err) {
	case CodeSerializationFailure, CodeDeadlockDetected:
		return true
	}
	return false
}
