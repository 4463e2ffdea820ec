package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// Stats is a snapshot of the outbox table.
type Stats struct {
	Pending      int64
	OldestAge    time.Duration
	Dead         int64
	KeysHeldBack int64
}

const statsSQL = `
SELECT (SELECT count(*) FROM outbox_event WHERE status IN ('PENDING', 'PROCESSING')),
       (SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(enqueued_at)), 0)::float8
          FROM outbox_event WHERE status IN ('PENDING', 'PROCESSING')),
       (SELECT count(*) FROM outbox_event WHERE status = 'DEAD'),
       (SELECT count(DISTINCT (topic, key)) FROM outbox_event
         WHERE (status = 'PENDING' AND next_attempt_at > now() AND attempts > 0) OR status = 'DEAD')`

// Stats reads the current outbox figures.
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	var age float64
	if err := o.db.QueryRow(ctx, statsSQL).Scan(&s.Pending, &age, &s.Dead, &s.KeysHeldBack); err != nil {
		return s, fmt.Errorf("outbox stats: %w", err)
	}
	s.OldestAge = time.Duration(age * float64(time.Second))
	return s, nil
}

func (r *Relay) statsLoop(ctx context.Context) {
	refresh := func() {
		sctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
		defer cancel()
		if s, err := r.ob.Stats(sctx); err == nil {
			r.metrics.Pending.Set(float64(s.Pending))
			r.metrics.OldestAge.Set(s.OldestAge.Seconds())
			r.metrics.Dead.Set(float64(s.Dead))
			r.metrics.KeysHeldBack.Set(float64(s.KeysHeldBack))
		}
	}
	refresh()
	periodic.Every(ctx, periodic.Fixed(r.cfg.StatsInterval), refresh)
}
