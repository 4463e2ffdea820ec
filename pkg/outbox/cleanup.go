package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

const cleanupSQL = `
DELETE FROM outbox_event WHERE id IN (
    SELECT id FROM outbox_event
     WHERE status = 'PUBLISHED' AND published_at < now() - $1::interval
     LIMIT $2)`

// Cleanup deletes PUBLISHED events older than retention, batch rows per
// statement, until none is left; DEAD events are never deleted. It returns
// how many it deleted.
func (o *Outbox) Cleanup(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	var total int64
	for {
		dctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
		tag, err := o.db.Exec(dctx, cleanupSQL, retention.String(), batch)
		cancel()
		if err != nil {
			return total, fmt.Errorf("outbox cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

func (r *Relay) cleanupLoop(ctx context.Context) {
	periodic.Every(ctx, periodic.Fixed(r.cfg.CleanupInterval), func() {
		n, err := r.ob.Cleanup(ctx, r.cfg.Retention, r.cfg.CleanupBatch)
		if err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "outbox cleanup failed", "err", err)
		} else if n > 0 {
			r.log.DebugContext(ctx, "outbox cleanup", "deleted", n)
		}
	})
}
