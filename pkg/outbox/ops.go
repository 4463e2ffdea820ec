package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the outbox's counters and gauges.
type Metrics struct {
	Pending       prometheus.Gauge
	OldestAge     prometheus.Gauge
	Dead          prometheus.Gauge
	KeysHeldBack  prometheus.Gauge
	Published     *prometheus.CounterVec
	SendFailures  *prometheus.CounterVec
	DeadTotal     prometheus.Counter
	EnqueueToAck  prometheus.Histogram
	BatchSize     prometheus.Histogram
	BatchDuration prometheus.Histogram
}

// NewMetrics creates the outbox metrics and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_pending_events", Help: "Outbox events not yet published (PENDING or PROCESSING)."}),
		OldestAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_oldest_pending_age_seconds", Help: "Age of the oldest unpublished outbox event; 0 when none."}),
		Dead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_dead_events", Help: "Outbox events in DEAD status, waiting for an operator."}),
		KeysHeldBack: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_keys_held_back", Help: "Keys whose oldest event waits for a retry, holding back later events of the key."}),
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_published_total", Help: "Outbox events acknowledged by the broker."}, []string{"topic", "type"}),
		SendFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_send_failures_total", Help: "Failed sends of outbox events, by cause."}, []string{"cause"}),
		DeadTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_dead_total", Help: "Outbox events that went DEAD."}),
		EnqueueToAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_enqueue_to_ack_seconds", Help: "Time from enqueue to broker acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_relay_batch_size", Help: "Events per relay batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		BatchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_relay_batch_duration_seconds", Help: "Time to claim, send and mark one relay batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	if reg != nil {
		reg.MustRegister(m.Pending, m.OldestAge, m.Dead, m.KeysHeldBack, m.Published,
			m.SendFailures, m.DeadTotal, m.EnqueueToAck, m.BatchSize, m.BatchDuration)
	}
	return m
}

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
         WHERE status = 'PENDING' AND next_attempt_at > now() AND attempts > 0)`

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
	t := time.NewTicker(r.cfg.StatsInterval)
	defer t.Stop()
	for {
		if s, err := r.ob.Stats(ctx); err == nil {
			r.metrics.Pending.Set(float64(s.Pending))
			r.metrics.OldestAge.Set(s.OldestAge.Seconds())
			r.metrics.Dead.Set(float64(s.Dead))
			r.metrics.KeysHeldBack.Set(float64(s.KeysHeldBack))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

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
		tag, err := o.db.Exec(ctx, cleanupSQL, retention.String(), batch)
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
	t := time.NewTicker(r.cfg.CleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := r.ob.Cleanup(ctx, r.cfg.Retention, r.cfg.CleanupBatch)
		if err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "outbox cleanup failed", "err", err)
		} else if n > 0 {
			r.log.DebugContext(ctx, "outbox cleanup", "deleted", n)
		}
	}
}

// DeadEvent is an event that went DEAD, for operators.
type DeadEvent struct {
	ID         uuid.UUID
	Topic      string
	Key        string
	Type       string
	Attempts   int
	LastError  string
	EnqueuedAt time.Time
}

const listDeadSQL = `
SELECT id, topic, key, event_type, attempts, COALESCE(last_error, ''), enqueued_at
  FROM outbox_event WHERE status = 'DEAD' ORDER BY seq LIMIT $1`

// ListDead returns up to limit DEAD events, oldest first.
func (o *Outbox) ListDead(ctx context.Context, limit int) ([]DeadEvent, error) {
	rows, err := o.db.Query(ctx, listDeadSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list dead outbox events: %w", err)
	}
	defer rows.Close()
	var out []DeadEvent
	for rows.Next() {
		var d DeadEvent
		if err := rows.Scan(&d.ID, &d.Topic, &d.Key, &d.Type, &d.Attempts, &d.LastError, &d.EnqueuedAt); err != nil {
			return nil, fmt.Errorf("scan dead outbox event: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

const requeueSQL = `
UPDATE outbox_event
   SET status = 'PENDING', attempts = 0, next_attempt_at = now(), locked_by = NULL, locked_until = NULL
 WHERE status = 'DEAD'
   AND ($1::uuid IS NULL OR id = $1)
   AND ($2::text IS NULL OR topic = $2)
   AND ($3::text IS NULL OR event_type = $3)`

// RequeueFilter chooses DEAD events to requeue; empty fields match all, but
// at least one must be set.
type RequeueFilter struct {
	ID    uuid.UUID
	Topic string
	Type  string
}

// ErrEmptyFilter is returned by Requeue when the filter names nothing.
var ErrEmptyFilter = fmt.Errorf("requeue needs an id, a topic or a type")

// Requeue moves the DEAD events matching f back to PENDING with a fresh
// attempt budget, and wakes the relays. It returns how many it moved.
func (o *Outbox) Requeue(ctx context.Context, f RequeueFilter) (int64, error) {
	if f.ID == uuid.Nil && f.Topic == "" && f.Type == "" {
		return 0, ErrEmptyFilter
	}
	var id *uuid.UUID
	if f.ID != uuid.Nil {
		id = &f.ID
	}
	tag, err := o.db.Exec(ctx, requeueSQL, id, nullable(f.Topic), nullable(f.Type))
	if err != nil {
		return 0, fmt.Errorf("requeue dead outbox events: %w", err)
	}
	o.Wake()
	return tag.RowsAffected(), nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
