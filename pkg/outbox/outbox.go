// Package outbox is the suite's transactional outbox: business code enqueues
// events in the same PostgreSQL transaction as the change that caused them,
// and a relay publishes them to Kafka afterwards, outside any transaction.
//
// Guarantees: an event is enqueued if and only if its transaction commits;
// every enqueued event reaches Kafka at least once (consumers deduplicate by
// event id); two events with the same topic and key reach Kafka in the order
// their transactions committed them, across relays, retries and lease
// expiry; a key whose oldest event waits for a retry holds back only that
// key.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/tracing"
)

// DefaultChannel is the PostgreSQL NOTIFY channel that wakes relays.
const DefaultChannel = "outbox_event"

// Outbox enqueues events and wakes the relays of this process, and, by a
// NOTIFY sent after commit, those of other processes.
type Outbox struct {
	db      *postgres.DB
	channel string
	// id is the payload of this Outbox's NOTIFYs. Its own relays skip
	// them: Wake woke each of them already.
	id string
	// mu guards subs, the wake-up channels of the relays running on this
	// Outbox; Wake signals each. Each is coalescing (capacity 1).
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// notify asks a relay's notifier to send one NOTIFY for the relays of
	// other processes; coalescing (capacity 1).
	notify chan struct{}
}

// New returns the outbox of db. The NOTIFY channel is DefaultChannel.
func New(db *postgres.DB) *Outbox {
	return &Outbox{
		db:      db,
		channel: DefaultChannel,
		id:      uuid.NewString(),
		subs:    map[chan struct{}]struct{}{},
		notify:  make(chan struct{}, 1),
	}
}

// subscribe returns a channel that receives a signal after each Wake (a
// signal not yet taken absorbs the next ones), until cancel is called.
func (o *Outbox) subscribe() (wakes <-chan struct{}, cancel func()) {
	c := make(chan struct{}, 1)
	o.mu.Lock()
	o.subs[c] = struct{}{}
	o.mu.Unlock()
	return c, func() {
		o.mu.Lock()
		delete(o.subs, c)
		o.mu.Unlock()
	}
}

// ErrInvalidMessage is returned by Enqueue for a message missing a topic,
// key, type or a JSON payload.
var ErrInvalidMessage = errors.New("invalid outbox message")

const insertSQL = `
INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, headers, occurred_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[], $9::timestamptz[])`

// Enqueue writes msgs in tx, the caller's transaction: they are published if
// and only if tx commits. There is deliberately no way to enqueue outside a
// transaction. When tx came from postgres.DB.InTx, the relays are woken right
// after the commit. Returns ErrInvalidMessage for a malformed message.
func (o *Outbox) Enqueue(ctx context.Context, tx pgx.Tx, msgs ...events.Message) error {
	b := &pgx.Batch{}
	if err := o.Queue(ctx, tx, b, msgs...); err != nil || b.Len() == 0 {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("enqueue %d outbox events: %w", len(msgs), err)
	}
	return nil
}

// Queue is Enqueue for callers that send their statements as a pgx.Batch:
// it queues the insert of msgs on b, and the caller sends b on tx
// (tx.SendBatch), so that the events travel in one round trip with the
// caller's own writes. The insert's error, if any, is the result of its
// place in the batch. Like Enqueue, it needs tx: the events commit or roll
// back with it. Returns ErrInvalidMessage for a malformed message, having
// queued nothing.
func (o *Outbox) Queue(ctx context.Context, tx pgx.Tx, b *pgx.Batch, msgs ...events.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	// The span is the parent of the relay's publish (its traceparent goes
	// into the headers); it ends once the insert is queued.
	ctx, span := tracing.Tracer().Start(ctx, "outbox enqueue")
	defer span.End()
	args, err := insertArgs(ctx, msgs)
	if err != nil {
		return err
	}
	b.Queue(insertSQL, args...)
	postgres.AfterCommit(tx, o.Wake)
	return nil
}

// insertArgs validates msgs and returns the arguments of insertSQL. The
// traceparent of ctx (the enqueue span) goes into each message's headers.
func insertArgs(ctx context.Context, msgs []events.Message) ([]any, error) {
	traceparent := tracing.Traceparent(ctx)
	n := len(msgs)
	// UUIDs as [16]byte, which pgx encodes natively (uuid.UUID would go
	// through driver.Valuer and text).
	ids := make([][16]byte, n)
	aggTypes, aggIDs := make([]string, n), make([]string, n)
	topics, keys, types := make([]string, n), make([]string, n), make([]string, n)
	payloads, headers := make([]string, n), make([]string, n)
	occurred := make([]time.Time, n)
	now := time.Now().UTC()
	for i, m := range msgs {
		if m.Topic == "" || m.Key == "" || m.Type == "" || !json.Valid(m.Payload) {
			return nil, fmt.Errorf("%w: topic %q key %q type %q", ErrInvalidMessage, m.Topic, m.Key, m.Type)
		}
		id := m.ID
		if id == uuid.Nil {
			id = uuid.New()
		}
		ids[i] = id
		aggTypes[i], aggIDs[i] = m.AggregateType, m.AggregateID
		topics[i], keys[i], types[i] = m.Topic, m.Key, m.Type
		payloads[i] = string(m.Payload)
		hs := nonNil(m.Headers)
		if given, ok := hs[events.HeaderTraceparent]; traceparent != "" && (!ok || sameTrace(given, traceparent)) {
			// This enqueue's span is the closest parent of the publish;
			// a traceparent of another trace, given on purpose, stays.
			hs = maps.Clone(hs)
			hs[events.HeaderTraceparent] = traceparent
		}
		h, err := json.Marshal(hs)
		if err != nil {
			return nil, fmt.Errorf("encode outbox headers: %w", err)
		}
		headers[i] = string(h)
		occurred[i] = m.OccurredAt
		if occurred[i].IsZero() {
			occurred[i] = now
		}
	}
	return []any{ids, aggTypes, aggIDs, topics, keys, types, payloads, headers, occurred}, nil
}

// Wake tells the relays that events were committed: those running on this
// Outbox at once, the others by a NOTIFY. It never blocks.
func (o *Outbox) Wake() {
	o.mu.Lock()
	for c := range o.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// sameTrace reports whether two W3C traceparents belong to one trace
// ("00-<trace id>-<span id>-<flags>").
func sameTrace(a, b string) bool {
	return len(a) >= 35 && len(b) >= 35 && a[3:35] == b[3:35]
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
