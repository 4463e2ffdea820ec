package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

const cleanupSQL = `
DELETE FROM inbox_event WHERE ctid IN (
    SELECT ctid FROM inbox_event WHERE processed_at < now() - $1::interval LIMIT $2)`

// Cleanup deletes the processed-event rows of every consumer of db older
// than retention, batch rows per statement, until none is left, and returns
// how many it deleted.
func Cleanup(ctx context.Context, db *postgres.DB, retention time.Duration, batch int) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, cleanupSQL, retention.String(), batch)
		if err != nil {
			return total, fmt.Errorf("inbox cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// CleanupLoop runs Cleanup every interval until ctx ends, like the outbox
// relay's cleanup of published events. It returns nil.
func CleanupLoop(ctx context.Context, db *postgres.DB, retention, interval time.Duration, log *slog.Logger) error {
	periodic.Every(ctx, periodic.Fixed(interval), func() {
		n, err := Cleanup(ctx, db, retention, 1000)
		if err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "inbox cleanup failed", "err", err)
		} else if n > 0 {
			log.DebugContext(ctx, "inbox cleanup", "deleted", n)
		}
	})
	return nil
}
