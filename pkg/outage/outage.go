// Package outage tells an outage of a dependency (the database, the broker)
// from an error that belongs to the work at hand. It is the one rule the
// HTTP layer (503 with Retry-After rather than 500), the consumer loop
// (pause the partition and wait, rather than dead-letter a good record) and
// the outbox relay share.
package outage

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err says a dependency cannot be reached or
// cannot take work now, so that the same work would succeed later unchanged:
//
//   - PostgreSQL: a connection that could not be made or was lost
//     (*pgconn.ConnectError, pgconn.ErrConnClosed, a timeout), SQLSTATE
//     class 08 (connection exception), class 53 (insufficient resources:
//     too many connections, out of memory or disk), 57P01-57P03 (admin or
//     crash shutdown, cannot connect now), 25006 (read-only transaction:
//     the server is a standby, or a revived old primary fenced read-only,
//     so the write waits for the pool to reach the current primary);
//   - the network: connection refused or reset, broken pipe, an unexpected
//     EOF, any *net.OpError or *net.DNSError (not any net.Error: kafka-go's
//     error codes implement that interface too);
//   - a deadline that ran out (a pool that could not hand out a connection
//     in time, a dependency that did not answer);
//   - the broker: errors that say they are temporary (kafka-go's
//     LeaderNotAvailable, NotEnoughReplicas, BrokerNotAvailable, ...).
//
// A cancelled context is not an outage (the caller gave up), and neither is
// any error that carries Exempt in its chain: a failure of a remote party
// that the caller handles by its own rule (a webhook receiver that is down).
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ex exempt
	if errors.As(err, &ex) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableSQLState(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var temp interface{ Temporary() bool }
	switch {
	case errors.As(err, &connectErr),
		errors.Is(err, pgconn.ErrConnClosed),
		pgconn.Timeout(err),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.As(err, &opErr),
		errors.As(err, &dnsErr):
		return true
	case errors.As(err, &temp):
		return temp.Temporary()
	}
	return false
}

func unavailableSQLState(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", "53":
		return true
	}
	switch code {
	case "57P01", "57P02", "57P03", "25006":
		return true
	}
	return false
}

// Exempt wraps err so that Unavailable says false for it: the caller knows
// the failure is a remote party's and disposes of it by its own rule (the
// notifications' retry topics for a webhook receiver that is down). The
// wrapped error is still in the chain (errors.Is and errors.As see it).
func Exempt(err error) error {
	if err == nil {
		return nil
	}
	return exempt{err}
}

type exempt struct{ err error }

func (e exempt) Error() string { return e.err.Error() }
func (e exempt) Unwrap() error { return e.err }
