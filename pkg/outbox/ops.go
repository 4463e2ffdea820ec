package outbox

import (
	"context"
	"errors"
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
			Name: "outbox_keys_held_back", Help: "Keys whose oldest event waits for a retry or is DEAD, holding back later events of the key."}),
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_published_total", Help: "Outbox events acknowledged by the broker."}, []string{"topic", "type"}),
		SendFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_send_failures_total", Help: "Failed sends of outbox events, by cause (see outbox.Causes)."}, []string{"cause"}),
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
	// Every cause exists at 0 from start: an alert on increase() sees the
	// first failure.
	for _, c := range Causes {
		m.SendFailures.WithLabelValues(c)
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
	Refusals   int
	LastError  string
	EnqueuedAt time.Time
}

const listDeadSQL = `
SELECT id, topic, key, event_type, attempts, refusals, COALESCE(last_error, ''), enqueued_at
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
		if err := rows.Scan(&d.ID, &d.Topic, &d.Key, &d.Type, &d.Attempts, &d.Refusals, &d.LastError, &d.EnqueuedAt); err != nil {
			return nil, fmt.Errorf("scan dead outbox event: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Audit says who performs an operator action, and why. Each action writes
// one outbox_audit row per event it changed (with the time), in the same
// transaction as the change.
type Audit struct {
	// Operator names the person or tool; required.
	Operator string
	// Reason is free text, e.g. a ticket.
	Reason string
}

// ErrNoOperator is returned by Requeue and Discard without an operator.
var ErrNoOperator = errors.New("an operator action needs the operator's name")

// A DEAD event holds its key back; requeued, it keeps its place (its seq)
// and goes before the key's later events, alone (isolate stays set).
const requeueSQL = `
WITH moved AS (
    UPDATE outbox_event
       SET status = 'PENDING', attempts = 0, refusals = 0, next_attempt_at = now(),
           locked_by = NULL, locked_until = NULL, lease_owner = NULL
     WHERE status = 'DEAD'
       AND ($1::uuid IS NULL OR id = $1)
       AND ($2::text IS NULL OR topic = $2)
       AND ($3::text IS NULL OR event_type = $3)
    RETURNING id, topic, key
)
INSERT INTO outbox_audit (operator, action, event_id, topic, key, reason)
SELECT $4, 'requeue', id, topic, key, $5 FROM moved`

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
// budget, records who did it (see Audit), and wakes the relays. It returns
// how many it moved. Returns ErrEmptyFilter or ErrNoOperator, having
// changed nothing, for an empty filter or operator.
func (o *Outbox) Requeue(ctx context.Context, f RequeueFilter, a Audit) (int64, error) {
	if f.ID == uuid.Nil && f.Topic == "" && f.Type == "" {
		return 0, ErrEmptyFilter
	}
	if a.Operator == "" {
		return 0, ErrNoOperator
	}
	var id *uuid.UUID
	if f.ID != uuid.Nil {
		id = &f.ID
	}
	tag, err := o.db.Exec(ctx, requeueSQL, id, nullable(f.Topic), nullable(f.Type), a.Operator, a.Reason)
	if err != nil {
		return 0, fmt.Errorf("requeue dead outbox events: %w", err)
	}
	o.Wake()
	return tag.RowsAffected(), nil
}

// A discarded event is never sent and no longer holds its key back; the row
// stays, with its payload, for the record.
const discardSQL = `
WITH dropped AS (
    UPDATE outbox_event SET status = 'DISCARDED'
     WHERE status = 'DEAD' AND id = $1
    RETURNING id, topic, key
)
INSERT INTO outbox_audit (operator, action, event_id, topic, key, reason)
SELECT $2, 'discard', id, topic, key, $3 FROM dropped`

// ErrNotDead is returned by Discard when no DEAD event has the id.
var ErrNotDead = errors.New("no DEAD outbox event has this id")

// Discard drops the DEAD event id for good, records who did it (see Audit)
// and wakes the relays: the later events of its key go on. Only DEAD events
// can be discarded, one at a time. Returns ErrNoOperator or ErrNotDead,
// having changed nothing.
func (o *Outbox) Discard(ctx context.Context, id uuid.UUID, a Audit) error {
	if a.Operator == "" {
		return ErrNoOperator
	}
	tag, err := o.db.Exec(ctx, discardSQL, id, a.Operator, a.Reason)
	if err != nil {
		return fmt.Errorf("discard dead outbox event: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotDead
	}
	o.Wake()
	return nil
}

// AuditEntry is one operator action on one event.
type AuditEntry struct {
	At       time.Time
	Operator string
	Action   string
	EventID  uuid.UUID
	Topic    string
	Key      string
	Reason   string
}

const auditSQL = `
SELECT at, operator, action, event_id, topic, key, reason FROM outbox_audit ORDER BY id DESC LIMIT $1`

// AuditLog returns up to limit operator actions, newest first.
func (o *Outbox) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	rows, err := o.db.Query(ctx, auditSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.At, &e.Operator, &e.Action, &e.EventID, &e.Topic, &e.Key, &e.Reason); err != nil {
			return nil, fmt.Errorf("scan outbox audit: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// EventInfo is one outbox event of an aggregate, for operators following
// it: where it stands and when it was published.
type EventInfo struct {
	ID          uuid.UUID
	Topic       string
	Key         string
	Type        string
	Status      string
	Attempts    int
	LastError   string
	EnqueuedAt  time.Time
	PublishedAt *time.Time
	// Traceparent is the W3C trace context the event carries, when the
	// request that caused it was traced.
	Traceparent string
}

const eventsOfSQL = `
SELECT id, topic, key, event_type, status, attempts, COALESCE(last_error, ''), enqueued_at, published_at,
       COALESCE(headers->>'traceparent', '')
  FROM outbox_event WHERE aggregate_id = $1 ORDER BY seq LIMIT 100`

// EventsOf returns the events of one aggregate (a transfer id in every
// service of the suite), oldest first, at most 100. Published events are
// deleted after the retention period, so an old aggregate may have none.
func (o *Outbox) EventsOf(ctx context.Context, aggregateID string) ([]EventInfo, error) {
	rows, err := o.db.Query(ctx, eventsOfSQL, aggregateID)
	if err != nil {
		return nil, fmt.Errorf("outbox events of %s: %w", aggregateID, err)
	}
	defer rows.Close()
	out := []EventInfo{}
	for rows.Next() {
		var e EventInfo
		if err := rows.Scan(&e.ID, &e.Topic, &e.Key, &e.Type, &e.Status, &e.Attempts, &e.LastError, &e.EnqueuedAt, &e.PublishedAt, &e.Traceparent); err != nil {
			return nil, fmt.Errorf("scan outbox event: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
