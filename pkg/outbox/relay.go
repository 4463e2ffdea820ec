package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/tracing"
)

// Publisher sends records to Kafka; *kafka.Writer from broker.NewWriter is
// the production one. WriteMessages returns nil when every record was
// acknowledged, or kafka.WriteErrors (aligned with msgs) or another error.
type Publisher interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// RelayConfig tunes a relay. Zero values take the defaults documented on
// each field.
type RelayConfig struct {
	// Name identifies this relay in locked_by; default host-pid-random.
	Name string
	// BatchSize is how many events one claim takes; default 500.
	BatchSize int
	// Workers is how many claim-send-mark loops run at once; default 2.
	Workers int
	// Lease is how long a claim is owned before another relay may reclaim
	// it; default 30s. It must exceed SendTimeout.
	Lease time.Duration
	// SendTimeout bounds one publish call; default 15s.
	SendTimeout time.Duration
	// PollInterval is the fallback scan when no wake-up arrives; default 1s.
	PollInterval time.Duration
	// MaxAttempts is how many failed sends with a permanent error (the
	// broker refused the record itself) turn an event DEAD; default 12.
	// Transient failures (broker unreachable, leader moving) are retried at
	// the capped delay for as long as they last: an outage never kills
	// events, it shows as the age of the oldest pending event.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the exponential retry delay (with
	// jitter); defaults 500ms and 60s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Retention is how long PUBLISHED rows are kept; default 7 days.
	Retention time.Duration
	// CleanupInterval and CleanupBatch pace the deletion of old published
	// rows; defaults 1 minute and 1000 rows per statement.
	CleanupInterval time.Duration
	CleanupBatch    int
	// StatsInterval is how often the gauges are refreshed; default 2s.
	StatsInterval time.Duration
	// DisableListen turns off LISTEN (cross-process wake-ups).
	DisableListen bool
}

func (c RelayConfig) withDefaults() RelayConfig {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.BatchSize, 500)
	def(&c.Workers, 2)
	def(&c.MaxAttempts, 12)
	def(&c.CleanupBatch, 1000)
	defD(&c.Lease, 30*time.Second)
	defD(&c.SendTimeout, 15*time.Second)
	defD(&c.PollInterval, time.Second)
	defD(&c.BackoffBase, 500*time.Millisecond)
	defD(&c.BackoffMax, 60*time.Second)
	defD(&c.Retention, 7*24*time.Hour)
	defD(&c.CleanupInterval, time.Minute)
	defD(&c.StatsInterval, 2*time.Second)
	return c
}

// Relay publishes committed outbox events. Any number of relays, in one
// process or many, may run against one database.
type Relay struct {
	ob      *Outbox
	pub     Publisher
	cfg     RelayConfig
	log     *slog.Logger
	metrics *Metrics
}

// NewRelay returns a relay publishing ob's events through pub. metrics may be
// nil.
func NewRelay(ob *Outbox, pub Publisher, cfg RelayConfig, log *slog.Logger, metrics *Metrics) *Relay {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Relay{ob: ob, pub: pub, cfg: cfg.withDefaults(), log: log, metrics: metrics}
}

// Name returns the relay's lease owner name.
func (r *Relay) Name() string { return r.cfg.Name }

// Run publishes until ctx is cancelled, then lets the batches in hand finish
// and returns nil. It also runs the NOTIFY listener and sender, the cleanup
// of old published rows and the gauges.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wake := make(chan struct{}, r.cfg.Workers)
	fanout := func() {
		for i := 0; i < r.cfg.Workers; i++ {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
	// Work loops get a context that outlives ctx by the time a batch needs
	// to finish: a cancelled relay still marks what it sent.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	go func() {
		<-ctx.Done()
		// Give the batches in flight their send timeout, then stop them.
		t := time.NewTimer(r.cfg.SendTimeout + 5*time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWork()
		case <-workCtx.Done():
		}
	}()

	wg.Add(1)
	go func() { defer wg.Done(); r.wakeLoop(ctx, fanout) }()
	if !r.cfg.DisableListen {
		wg.Add(2)
		go func() { defer wg.Done(); r.listenLoop(ctx, fanout) }()
		go func() { defer wg.Done(); r.notifyLoop(ctx) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); r.cleanupLoop(ctx) }()
	go func() { defer wg.Done(); r.statsLoop(ctx) }()

	var workers sync.WaitGroup
	for i := 0; i < r.cfg.Workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r.workLoop(ctx, workCtx, wake)
		}()
	}
	workers.Wait()
	cancelWork()
	wg.Wait()
	return nil
}

// workLoop claims and publishes batches while there is work, and otherwise
// waits for a wake-up or the poll interval.
func (r *Relay) workLoop(ctx, workCtx context.Context, wake <-chan struct{}) {
	poll := time.NewTimer(r.cfg.PollInterval)
	defer poll.Stop()
	for ctx.Err() == nil {
		n, err := r.PublishBatch(workCtx)
		if err != nil && workCtx.Err() == nil {
			r.log.WarnContext(ctx, "outbox relay batch failed", "relay", r.cfg.Name, "err", err)
		}
		if err == nil && n == r.cfg.BatchSize {
			continue // a full batch: more is probably waiting
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		poll.Reset(r.jitter(r.cfg.PollInterval))
		select {
		case <-ctx.Done():
		case <-wake:
		case <-poll.C:
		}
	}
}

func (r *Relay) jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func (r *Relay) wakeLoop(ctx context.Context, fanout func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ob.local:
			fanout()
		}
	}
}

// notifyLoop sends one NOTIFY for each burst of local commits, after the
// commit and outside the business transaction: a NOTIFY inside it would take
// a database-wide lock at commit and serialise every commit.
func (r *Relay) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ob.notify:
			nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := r.ob.db.Exec(nctx, "SELECT pg_notify($1, '')", r.ob.channel)
			cancel()
			if err != nil && ctx.Err() == nil {
				r.log.DebugContext(ctx, "outbox notify failed", "err", err)
			}
		}
	}
}

// listenLoop wakes the workers on NOTIFY from other processes. A lost
// connection is re-established; meanwhile polling covers.
func (r *Relay) listenLoop(ctx context.Context, fanout func()) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, fanout)
		if ctx.Err() != nil {
			return
		}
		r.log.DebugContext(ctx, "outbox listen connection lost", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.jitter(2 * time.Second)):
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context, fanout func()) error {
	// A connection of its own, outside the pool: a listener holds its
	// connection for as long as it runs.
	conn, err := pgx.ConnectConfig(ctx, r.ob.db.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx) //nolint:errcheck // closing a listener; nothing to do on error
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.ob.channel}.Sanitize()); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		fanout()
	}
}

// claimed is one event owned by this relay for one send.
type claimed struct {
	id         uuid.UUID
	seq        int64
	topic      string
	key        string
	eventType  string
	payload    []byte
	headers    map[string]string
	attempts   int
	isolate    bool
	enqueuedAt time.Time
}

// The claim query: ready events (pending and due, or leased by a relay whose
// lease expired) whose key is not held back by an older event that waits for
// a retry or is leased to a relay. Rows other relays are claiming right now
// are skipped (SKIP LOCKED); the order check below covers them. held has at
// most one row per key, so the outer join (which the planner hashes) adds no
// rows; a NOT EXISTS here was planned as a nested loop over every held key
// and took seconds once another relay leased a thousand keys.
const claimSQL = `
WITH held AS (
    SELECT topic, key, min(seq) AS seq FROM (
        SELECT topic, key, seq FROM outbox_event
         WHERE status = 'PENDING' AND attempts > 0 AND next_attempt_at > now()
        UNION ALL
        SELECT topic, key, seq FROM outbox_event
         WHERE status = 'PROCESSING' AND locked_until > now()
    ) waiting
    GROUP BY topic, key
)
SELECT e.id, e.seq, e.topic, e.key, e.event_type, e.payload, e.headers, e.attempts, e.isolate, e.enqueued_at
  FROM outbox_event e
  LEFT JOIN held h ON h.topic = e.topic AND h.key = e.key
 WHERE (h.seq IS NULL OR e.seq < h.seq)
   AND e.status IN ('PENDING', 'PROCESSING')
   AND ((e.status = 'PENDING' AND e.next_attempt_at <= now())
     OR (e.status = 'PROCESSING' AND e.locked_until <= now()))
 ORDER BY e.seq
 LIMIT $1
 FOR UPDATE OF e SKIP LOCKED`

// The order check: for each claimed key, the oldest unpublished event of
// that key that this claim does not hold (another relay is claiming it, or
// it became visible meanwhile). Only events older than it may be sent.
const orderCheckSQL = `
SELECT o.topic, o.key, min(o.seq)
  FROM outbox_event o
  JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS k(topic, key, maxseq)
    ON o.topic = k.topic AND o.key = k.key
 WHERE o.status IN ('PENDING', 'PROCESSING')
   AND o.seq < k.maxseq
   AND o.id NOT IN (SELECT unnest($4::uuid[]))
 GROUP BY o.topic, o.key`

const leaseSQL = `
UPDATE outbox_event
   SET status = 'PROCESSING', locked_by = $2, locked_until = now() + $3::interval
 WHERE id = ANY($1::uuid[])`

const publishedSQL = `
UPDATE outbox_event
   SET status = 'PUBLISHED', published_at = now(), locked_by = NULL, locked_until = NULL
 WHERE id = ANY($1::uuid[]) AND status = 'PROCESSING' AND locked_by = $2`

const failedSQL = `
UPDATE outbox_event AS o
   SET status = CASE WHEN f.dead THEN 'DEAD' ELSE 'PENDING' END,
       attempts = o.attempts + 1,
       next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
       last_error = f.err,
       isolate = f.permanent,
       locked_by = NULL, locked_until = NULL
  FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::bool[], $6::bool[]) AS f(id, delay_ms, err, dead, permanent)
 WHERE o.id = f.id AND o.status = 'PROCESSING' AND o.locked_by = $5`

// PublishBatch claims one batch, publishes it and records the outcome. It
// returns how many events it claimed. Exported for tests and benchmarks;
// Run calls it in a loop.
func (r *Relay) PublishBatch(ctx context.Context) (int, error) {
	start := time.Now()
	batch, err := r.claim(ctx)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	results := r.send(ctx, batch)
	err = r.record(ctx, batch, results)
	r.metrics.BatchSize.Observe(float64(len(batch)))
	r.metrics.BatchDuration.Observe(time.Since(start).Seconds())
	return len(batch), err
}

func (r *Relay) claim(ctx context.Context) ([]claimed, error) {
	var out []claimed
	err := r.ob.db.InTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, claimSQL, r.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("claim outbox events: %w", err)
		}
		var cands []claimed
		for rows.Next() {
			var c claimed
			var headers []byte
			if err := rows.Scan(&c.id, &c.seq, &c.topic, &c.key, &c.eventType, &c.payload, &headers, &c.attempts, &c.isolate, &c.enqueuedAt); err != nil {
				rows.Close()
				return fmt.Errorf("scan outbox event: %w", err)
			}
			if err := json.Unmarshal(headers, &c.headers); err != nil {
				c.headers = nil // a broken header map must not block the event
			}
			cands = append(cands, c)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim outbox events: %w", err)
		}
		if len(cands) == 0 {
			return nil
		}
		cutoff, err := r.orderCheck(ctx, tx, cands)
		if err != nil {
			return err
		}
		out = selectRuns(cands, cutoff)
		if len(out) == 0 {
			return nil
		}
		ids := make([]uuid.UUID, len(out))
		for i, c := range out {
			ids[i] = c.id
		}
		if _, err := tx.Exec(ctx, leaseSQL, ids, r.cfg.Name, r.cfg.Lease.String()); err != nil {
			return fmt.Errorf("lease outbox events: %w", err)
		}
		return nil
	})
	return out, err
}

type topicKey struct{ topic, key string }

func (r *Relay) orderCheck(ctx context.Context, tx pgx.Tx, cands []claimed) (map[topicKey]int64, error) {
	maxSeq := map[topicKey]int64{}
	for _, c := range cands {
		k := topicKey{c.topic, c.key}
		if c.seq > maxSeq[k] {
			maxSeq[k] = c.seq
		}
	}
	topics := make([]string, 0, len(maxSeq))
	keys := make([]string, 0, len(maxSeq))
	seqs := make([]int64, 0, len(maxSeq))
	for k, s := range maxSeq {
		topics, keys, seqs = append(topics, k.topic), append(keys, k.key), append(seqs, s)
	}
	ids := make([]uuid.UUID, len(cands))
	for i, c := range cands {
		ids[i] = c.id
	}
	rows, err := tx.Query(ctx, orderCheckSQL, topics, keys, seqs, ids)
	if err != nil {
		return nil, fmt.Errorf("outbox order check: %w", err)
	}
	defer rows.Close()
	cutoff := map[topicKey]int64{}
	for rows.Next() {
		var k topicKey
		var s int64
		if err := rows.Scan(&k.topic, &k.key, &s); err != nil {
			return nil, fmt.Errorf("outbox order check: %w", err)
		}
		cutoff[k] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox order check: %w", err)
	}
	return cutoff, nil
}

// selectRuns keeps, for each key, the events older than its cutoff; and of a
// key whose oldest event the broker refused, only that event, so that it
// travels alone and cannot fail its neighbours again.
func selectRuns(cands []claimed, cutoff map[topicKey]int64) []claimed {
	out := cands[:0:0]
	done := map[topicKey]bool{}
	for _, c := range cands { // in seq order
		k := topicKey{c.topic, c.key}
		if done[k] {
			continue
		}
		if s, ok := cutoff[k]; ok && c.seq > s {
			done[k] = true
			continue
		}
		out = append(out, c)
		if c.isolate {
			done[k] = true
		}
	}
	return out
}

// send publishes the batch and returns one error per event (nil: acked).
// Events go in one call, in seq order, so that the events of a key form one
// record batch of one partition and succeed or fail together. Events the
// broker refused before go afterwards, one call each, one after the other:
// the writer merges concurrent calls into one batch, and a poison event must
// not fail its neighbours again.
func (r *Relay) send(ctx context.Context, batch []claimed) []error {
	results := make([]error, len(batch))
	var together []int
	var alone []int
	for i, c := range batch {
		if c.isolate {
			alone = append(alone, i)
		} else {
			together = append(together, i)
		}
	}
	call := func(idx []int) {
		msgs := make([]kafka.Message, len(idx))
		spans := make([]trace.Span, len(idx))
		for j, i := range idx {
			msgs[j], spans[j] = publishSpan(ctx, batch[i])
		}
		defer func() {
			for j, i := range idx {
				if results[i] != nil {
					spans[j].SetStatus(codes.Error, results[i].Error())
				}
				spans[j].End()
			}
		}()
		sctx, cancel := context.WithTimeout(ctx, r.cfg.SendTimeout)
		defer cancel()
		err := r.pub.WriteMessages(sctx, msgs...)
		var werrs kafka.WriteErrors
		switch {
		case err == nil:
		case errors.As(err, &werrs) && len(werrs) == len(idx):
			for j, i := range idx {
				results[i] = werrs[j]
			}
		default:
			for _, i := range idx {
				results[i] = err
			}
		}
	}
	if len(together) > 0 {
		call(together)
	}
	for _, i := range alone {
		call([]int{i})
	}
	return results
}

// publishSpan starts the producer span of one event, a child of the trace
// the event was enqueued in, and returns the record carrying that span's
// traceparent.
func publishSpan(ctx context.Context, c claimed) (kafka.Message, trace.Span) {
	parent := tracing.WithTraceparent(context.WithoutCancel(ctx), c.headers[events.HeaderTraceparent])
	sctx, span := tracing.Tracer().Start(parent, "outbox publish "+c.topic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.destination.name", c.topic),
			attribute.String("messaging.message.id", c.id.String())))
	m := toKafka(c)
	if tp := tracing.Traceparent(sctx); tp != "" {
		m.Headers = broker.SetHeader(m.Headers, events.HeaderTraceparent, tp)
	}
	return m, span
}

func toKafka(c claimed) kafka.Message {
	hs := make([]kafka.Header, 0, 2+len(c.headers))
	hs = append(hs,
		kafka.Header{Key: events.HeaderEventID, Value: []byte(c.id.String())},
		kafka.Header{Key: events.HeaderEventType, Value: []byte(c.eventType)},
	)
	names := make([]string, 0, len(c.headers))
	for k := range c.headers {
		if k != events.HeaderEventID && k != events.HeaderEventType {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		hs = append(hs, kafka.Header{Key: k, Value: []byte(c.headers[k])})
	}
	return kafka.Message{Topic: c.topic, Key: []byte(c.key), Value: c.payload, Headers: hs}
}

// record marks acked events PUBLISHED and schedules the failed ones. The
// updates only touch rows this relay still leases: if the lease expired and
// another relay took the event over, that relay records the outcome.
func (r *Relay) record(ctx context.Context, batch []claimed, results []error) error {
	var ok []uuid.UUID
	var failIDs []uuid.UUID
	var delays []int64
	var errs []string
	var dead, perms []bool
	var firstErr error
	var firstID uuid.UUID
	var firstAttempts int
	now := time.Now()
	for i, c := range batch {
		err := results[i]
		if err == nil {
			ok = append(ok, c.id)
			r.metrics.Published.WithLabelValues(c.topic, c.eventType).Inc()
			r.metrics.EnqueueToAck.Observe(now.Sub(c.enqueuedAt).Seconds())
			continue
		}
		perm := Permanent(err)
		attempts := c.attempts + 1
		isDead := perm && attempts >= r.cfg.MaxAttempts
		failIDs = append(failIDs, c.id)
		delays = append(delays, r.backoff(attempts).Milliseconds())
		errs = append(errs, truncate(err.Error(), 2000))
		dead = append(dead, isDead)
		perms = append(perms, perm)
		r.metrics.SendFailures.WithLabelValues(Cause(err)).Inc()
		if isDead {
			r.metrics.DeadTotal.Inc()
			r.log.ErrorContext(ctx, "outbox event is DEAD: the broker refused it for good",
				"evento_id", c.id, "topic", c.topic, "evento_tipo", c.eventType, "attempts", attempts, "err", err)
		} else if firstErr == nil {
			firstErr, firstID, firstAttempts = err, c.id, attempts
		}
	}
	if firstErr != nil {
		// One line per batch: an outage fails every event of every batch.
		r.log.WarnContext(ctx, "outbox sends failed, will retry", "failed", len(failIDs), "of", len(batch),
			"cause", Cause(firstErr), "first_evento_id", firstID, "attempts", firstAttempts, "err", firstErr)
	}
	// Fresh context: the marks must land even if the send used up ctx.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if len(ok) > 0 {
		if _, err := r.ob.db.Exec(mctx, publishedSQL, ok, r.cfg.Name); err != nil {
			// The events stay PROCESSING; after the lease they are sent
			// again: a duplicate, never a loss.
			return fmt.Errorf("mark %d outbox events published: %w", len(ok), err)
		}
	}
	if len(failIDs) > 0 {
		if _, err := r.ob.db.Exec(mctx, failedSQL, failIDs, delays, errs, dead, r.cfg.Name, perms); err != nil {
			return fmt.Errorf("schedule %d outbox retries: %w", len(failIDs), err)
		}
	}
	return nil
}

// backoff is the delay before attempt+1: exponential from BackoffBase,
// capped at BackoffMax, with equal jitter.
func (r *Relay) backoff(attempts int) time.Duration {
	d := r.cfg.BackoffBase
	for i := 1; i < attempts && d < r.cfg.BackoffMax; i++ {
		d *= 2
	}
	if d > r.cfg.BackoffMax {
		d = r.cfg.BackoffMax
	}
	return r.jitter(d)
}

// Permanent reports whether err means the broker refused the record itself
// (too large, invalid, not authorised), as opposed to a failure of the path
// to the broker that a later attempt may not meet.
func Permanent(err error) bool {
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) {
		return true
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return !kerr.Temporary() && !kerr.Timeout()
	}
	return false
}

// Cause is a short label for a send failure, for metrics.
func Cause(err error) string {
	var tooLarge kafka.MessageTooLargeError
	var kerr kafka.Error
	var nerr net.Error
	switch {
	case errors.As(err, &tooLarge):
		return "message_too_large"
	case errors.As(err, &kerr):
		return strings.ToLower(strings.ReplaceAll(kerr.Title(), " ", "_"))
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &nerr):
		return "network"
	default:
		return "other"
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
