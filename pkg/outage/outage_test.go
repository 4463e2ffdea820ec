package outage_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/outage"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

func TestUnavailableClassifies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("boom"), false},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), false},
		{"deadline", fmt.Errorf("acquire: %w", context.DeadlineExceeded), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"conn closed", fmt.Errorf("exec: %w", pgconn.ErrConnClosed), true},
		{"08006 connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"53300 too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"57P01 admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"57P03 cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"25006 read-only transaction (a standby)", &pgconn.PgError{Code: "25006"}, true},
		{"25001 active transaction (another 25)", &pgconn.PgError{Code: "25001"}, false},
		{"57014 query cancelled", &pgconn.PgError{Code: "57014"}, false},
		{"23505 unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"22P02 invalid input", &pgconn.PgError{Code: "22P02"}, false},
		{"kafka leader not available", kafka.LeaderNotAvailable, true},
		{"kafka not enough replicas", fmt.Errorf("write: %w", kafka.NotEnoughReplicas), true},
		{"kafka message too large", kafka.MessageSizeTooLarge, false},
		{"exempt connection refused", outage.Exempt(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := outage.Unavailable(tt.err); got != tt.want {
				t.Errorf("Unavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// The errors a real PostgreSQL outage produces are outages; a real
// constraint violation is not.
func TestUnavailableOnRealPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	ctx := context.Background()

	t.Run("nothing listens", func(t *testing.T) {
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(addr)
		cfg.ConnConfig.Host = host
		fmt.Sscan(port, &cfg.ConnConfig.Port) //nolint:errcheck // a port from the listener
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err = pool.Exec(qctx, "SELECT 1")
		if err == nil || !outage.Unavailable(err) {
			t.Errorf("query on a closed port: %v; Unavailable = false", err)
		}
	})

	t.Run("session terminated", func(t *testing.T) {
		conn := connect(t, dsn)
		admin := connect(t, dsn)
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", conn.PgConn().PID()); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Exec(ctx, "SELECT 1")
		if err == nil || !outage.Unavailable(err) {
			t.Errorf("query on a terminated session: %v; Unavailable = false", err)
		}
		_, err = conn.Exec(ctx, "SELECT 1")
		if err == nil || !outage.Unavailable(err) {
			t.Errorf("second query on a terminated session: %v; Unavailable = false", err)
		}
	})

	// A session whose writes are refused as on a standby (or a revived old
	// primary fenced read-only) gets 25006: an outage, the write waits for
	// the pool to reach the primary.
	t.Run("read-only server", func(t *testing.T) {
		conn := connect(t, dsn)
		if _, err := conn.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Exec(ctx, "CREATE TEMP TABLE t (id int)")
		if code := postgres.Code(err); code != "25006" || !outage.Unavailable(err) {
			t.Errorf("write in a read-only session: %v (SQLSTATE %q); want 25006 and Unavailable = true", err, code)
		}
	})

	t.Run("constraint violation", func(t *testing.T) {
		conn := connect(t, dsn)
		_, err := conn.Exec(ctx, "CREATE TEMP TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1), (1)")
		if err == nil || outage.Unavailable(err) {
			t.Errorf("unique violation: %v; Unavailable = true", err)
		}
	})
}

// connect opens a connection to dsn, closed when the test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
