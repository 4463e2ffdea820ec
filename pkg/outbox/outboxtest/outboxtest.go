// Package outboxtest holds what the tests of the outbox's operator actions
// share: a reading of the outbox_audit table that those actions write
// (outbox.Requeue, outbox.Discard). It is a package of its own, beside the
// outbox, because no production code reads the table back; the outbox's
// and pkg/opsapi's tests import it.
package outboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// AuditEntry is one outbox_audit row: one operator action on one event.
type AuditEntry struct {
	At       time.Time
	Operator string
	Action   string
	EventID  uuid.UUID
	Topic    string
	Key      string
	Reason   string
}

// Querier is what AuditLog reads with: a *postgres.DB, a pool or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const auditSQL = `
SELECT at, operator, action, event_id, topic, key, reason FROM outbox_audit ORDER BY id DESC LIMIT $1`

// AuditLog returns up to limit operator actions, newest first; it fails
// the test if the table cannot be read.
func AuditLog(tb testing.TB, db Querier, limit int) []AuditEntry {
	tb.Helper()
	rows, err := db.Query(context.Background(), auditSQL, limit)
	if err != nil {
		tb.Fatalf("read outbox audit: %v", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.At, &e.Operator, &e.Action, &e.EventID, &e.Topic, &e.Key, &e.Reason); err != nil {
			tb.Fatalf("scan outbox audit: %v", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("read outbox audit: %v", err)
	}
	return out
}
