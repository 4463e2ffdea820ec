//go:build debezium

package debezium

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
	"github.com/paysuite/payments/test/support/spantest"
)

func openDB(tb testing.TB) *postgres.DB {
	tb.Helper()
	// Synchronous commit, production's default (the test servers run
	// synchronous_commit=off): a walsender, the logical relay's and
	// Debezium's alike, sends only flushed WAL, and would otherwise wait for
	// the WAL writer (wal_writer_delay, 200 ms) in the latency benchmark.
	db, err := postgres.Open(context.Background(), pgtest.NewDSN(tb, migrations.Platform)+"&synchronous_commit=on", 30)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	return db
}

// serviceEvents returns, per transfer, the events the services enqueue for
// it, built as they build them: TransferenciaSolicitada (transfers, keyed by
// the source account, correlation-id the transfer id), then
// TransferenciaAnalisada (antifraud) and TransferenciaLiquidada or
// TransferenciaRejeitada (ledger), each keyed as its service keys it.
func serviceEvents(tb testing.TB, t events.Topics, transfers int) [][]events.Message {
	tb.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	var out [][]events.Message
	for i := range transfers {
		id := uuid.New()
		src, dst := fmt.Sprintf("CC-%04d", i%4), fmt.Sprintf("CC-%04d", 100+i)
		msg := func(topic, typ string, ev any) events.Message {
			payload, err := json.Marshal(ev)
			if err != nil {
				tb.Fatal(err)
			}
			eid := reflect.ValueOf(ev).Elem().FieldByName("EventID").Interface().(uuid.UUID)
			return events.Message{ID: eid, AggregateType: "transfer", AggregateID: id.String(), Topic: topic, Key: src, Type: typ,
				Payload: payload, Headers: map[string]string{events.HeaderCorrelationID: id.String()}, OccurredAt: now}
		}
		req := &events.Requested{EventID: uuid.New(), TransferID: id, SourceAccount: src, DestAccount: dst,
			AmountCents: int64(1000 + i), Currency: "BRL", OccurredAt: now, ClientID: "client-1"}
		an := &events.Analysed{EventID: events.DerivedID("analisada", id), TransferID: id, SourceAccount: src, DestAccount: dst,
			AmountCents: req.AmountCents, Currency: "BRL", RiskScore: 10, OccurredAt: now, ClientID: "client-1"}
		ts := []events.Message{msg(t.Requested, events.TypeRequested, req), msg(t.Analysed, events.TypeAnalysed, an)}
		if i%3 == 0 {
			ts = append(ts, msg(t.Rejected, events.TypeRejected, &events.Rejected{EventID: events.DerivedID(events.KindRejectedLedger, id),
				TransferID: id, Reason: events.ReasonInsufficientFunds, OccurredAt: now}))
		} else {
			ts = append(ts, msg(t.Settled, events.TypeSettled, &events.Settled{EventID: events.DerivedID("liquidada", id),
				TransferID: id, OccurredAt: now}))
		}
		out = append(out, ts)
	}
	return out
}

// decodeAsTheServices decodes m with the suite's event decoding, by its
// evento-tipo header, and checks that the evento-id header names the
// payload's event: what the consumers' handlers rely on.
func decodeAsTheServices(m broker.Record) error {
	typ, id := kafkatest.Header(m, events.HeaderEventType), kafkatest.Header(m, events.HeaderEventID)
	var eid uuid.UUID
	switch typ {
	case events.TypeRequested:
		var e events.Requested
		if err := events.Decode(m.Value, &e); err != nil {
			return err
		}
		eid = e.EventID
	case events.TypeAnalysed:
		var e events.Analysed
		if err := events.Decode(m.Value, &e); err != nil {
			return err
		}
		eid = e.EventID
	case events.TypeSettled:
		var e events.Settled
		if err := events.Decode(m.Value, &e); err != nil {
			return err
		}
		eid = e.EventID
	case events.TypeRejected:
		var e events.Rejected
		if err := events.Decode(m.Value, &e); err != nil {
			return err
		}
		eid = e.EventID
	default:
		return consumer.Permanent(fmt.Errorf("evento-tipo %q", typ))
	}
	if eid.String() != id {
		return consumer.Permanent(fmt.Errorf("evento-id header %q, payload eventoId %s", id, eid))
	}
	return nil
}

// received is what the consumer handed its handler.
type received struct {
	mu   sync.Mutex
	msgs []broker.Record
	errs []error
}

func (r *received) handle(_ context.Context, ms []broker.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range ms {
		err := decodeAsTheServices(m)
		r.msgs = append(r.msgs, m)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s offset %d: %w", m.Topic, m.Offset, err))
			return &consumer.BatchFailure{Handled: i, Err: err}
		}
	}
	return nil
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// The records Debezium publishes from the outbox, with the documented
// configuration, are taken by the suite's consumer loop and event decoding
// as the polling relay's records of the same events: same topic, partition,
// key, payload and the headers evento-id, evento-tipo and correlation-id;
// per key in commit order. Debezium does not carry the traceparent header.
func TestDebeziumRecordsAsTheRelays(t *testing.T) {
	spantest.Record(t) // the enqueue spans are recorded, so every event has a traceparent, as in the services
	db := openDB(t)
	ob := outbox.New(db)
	topics := kafkatest.SuiteTopics(t, 3)
	w := startConnect(t, db, nil)

	var want []events.Message
	for _, ms := range serviceEvents(t, topics, 12) {
		// One transaction per event, as each service writes its own.
		for _, m := range ms {
			if err := db.InTx(context.Background(), func(tx pgx.Tx) error { return ob.Enqueue(context.Background(), tx, m) }); err != nil {
				t.Fatal(err)
			}
			want = append(want, m)
		}
	}
	n := len(want)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := &received{}
	consumed := make(chan error, 1)
	go func() {
		consumed <- consumer.Run(ctx, consumer.Config{Broker: broker.Config{Brokers: kafkatest.Brokers(t)},
			Group: kafkatest.Group(t, "debezium"), Topics: topics.All(), Handler: got.handle})
	}()
	w.waitRecords(n, got.count)

	// The same events again, from the table, by the polling relay.
	relayCtx, stopRelay := context.WithCancel(ctx)
	writer := kafkatest.NewWriter(t, broker.Config{Brokers: kafkatest.Brokers(t)})
	defer func() { _ = writer.Close() }()
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		_ = outbox.NewRelay(ob, writer, outbox.RelayConfig{PollInterval: 50 * time.Millisecond}, slog.New(slog.DiscardHandler), nil).Run(relayCtx)
	}()
	poll.Until(t, 2*time.Minute, fmt.Sprintf("the consumer handed %d more records published by the polling relay", n), func() (bool, string) {
		return got.count() >= 2*n, fmt.Sprint(got.count())
	})
	stopRelay()
	<-relayDone
	cancel()
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}

	got.mu.Lock()
	defer got.mu.Unlock()
	for _, err := range got.errs {
		t.Errorf("the consumer's handler refused a record: %v", err)
	}
	if len(got.msgs) != 2*n {
		t.Fatalf("%d records, want %d: Debezium's %d and the relay's %d", len(got.msgs), 2*n, n, n)
	}
	dbz, relay := byID(t, got.msgs[:n]), byID(t, got.msgs[n:])
	missing, extra := map[string]bool{}, map[string]bool{}
	for _, m := range want {
		id := m.ID.String()
		d, r := dbz[id], relay[id]
		if d == nil || r == nil {
			t.Errorf("event %s: Debezium's record %v, the relay's %v", id, d != nil, r != nil)
			continue
		}
		if d.Topic != m.Topic || string(d.Key) != m.Key || d.Partition != r.Partition {
			t.Errorf("event %s: Debezium's record on %s[%d] key %q, the relay's on %s[%d] key %q, enqueued for %s key %q",
				id, d.Topic, d.Partition, d.Key, r.Topic, r.Partition, r.Key, m.Topic, m.Key)
		}
		if !sameJSON(d.Value, r.Value) || !sameJSON(d.Value, m.Payload) {
			t.Errorf("event %s: Debezium's payload %s, the relay's %s", id, d.Value, r.Value)
		}
		for _, h := range []string{events.HeaderEventID, events.HeaderEventType, events.HeaderCorrelationID} {
			if dv, rv := kafkatest.Header(*d, h), kafkatest.Header(*r, h); dv != rv || dv == "" {
				t.Errorf("event %s: header %s: Debezium's %q, the relay's %q", id, h, dv, rv)
			}
		}
		dh, rh := headerSet(*d), headerSet(*r)
		for k := range rh {
			if _, ok := dh[k]; !ok {
				missing[k] = true
			}
		}
		for k := range dh {
			if _, ok := rh[k]; !ok {
				extra[k] = true
			}
		}
	}
	t.Logf("headers of the relay's records that Debezium's lack: %v; headers only Debezium's have: %v", keys(missing), keys(extra))
	if !reflect.DeepEqual(keys(missing), []string{events.HeaderTraceparent}) {
		t.Errorf("Debezium's records lack the headers %v, want exactly [traceparent] (deploy/README.md says so)", keys(missing))
	}
	// Per key, Debezium's records are in the order the events committed.
	perKey := map[string][]string{}
	for _, m := range got.msgs[:n] {
		perKey[m.Topic+"/"+string(m.Key)] = append(perKey[m.Topic+"/"+string(m.Key)], kafkatest.Header(m, events.HeaderEventID))
	}
	for _, m := range want {
		k := m.Topic + "/" + m.Key
		if len(perKey[k]) == 0 || perKey[k][0] != m.ID.String() {
			t.Errorf("key %s: Debezium's records %v out of commit order at %s", k, perKey[k], m.ID)
			continue
		}
		perKey[k] = perKey[k][1:]
	}
}

func byID(t *testing.T, ms []broker.Record) map[string]*broker.Record {
	out := map[string]*broker.Record{}
	for i := range ms {
		id := kafkatest.Header(ms[i], events.HeaderEventID)
		if _, dup := out[id]; dup {
			t.Errorf("event %s published twice by the same path", id)
		}
		out[id] = &ms[i]
	}
	return out
}

func headerSet(m broker.Record) map[string]string {
	out := map[string]string{}
	for _, h := range m.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// The remedy deploy/README.md gives for the lost traceparent works: with a
// column that a trigger fills from headers->>'traceparent', placed as a
// header, Debezium's records carry the traceparent the enqueue wrote. (A
// generated column does not do: PostgreSQL before 18 leaves generated
// columns out of logical replication, and the router then fails the task.)
func TestDebeziumTraceparentColumn(t *testing.T) {
	spantest.Record(t)
	db := openDB(t)
	if _, err := db.Exec(context.Background(), traceparentColumnSQL); err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(db)
	topics := kafkatest.SuiteTopics(t, 3)
	_, cfg := documentedConnector(t)
	placement := "transforms.outbox.table.fields.additional.placement"
	w := startConnect(t, db, map[string]string{placement: cfg[placement] + ",traceparent:header:traceparent"})

	var want []events.Message
	for _, ms := range serviceEvents(t, topics, 3) {
		for _, m := range ms {
			if err := db.InTx(context.Background(), func(tx pgx.Tx) error { return ob.Enqueue(context.Background(), tx, m) }); err != nil {
				t.Fatal(err)
			}
			want = append(want, m)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := &received{}
	consumed := make(chan error, 1)
	go func() {
		consumed <- consumer.Run(ctx, consumer.Config{Broker: broker.Config{Brokers: kafkatest.Brokers(t)},
			Group: kafkatest.Group(t, "debezium-tp"), Topics: topics.All(), Handler: got.handle})
	}()
	w.waitRecords(len(want), got.count)
	cancel()
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	for _, err := range got.errs {
		t.Errorf("the consumer's handler refused a record: %v", err)
	}
	for _, m := range got.msgs {
		id := kafkatest.Header(m, events.HeaderEventID)
		var stored string
		if err := db.QueryRow(context.Background(), `SELECT headers->>'traceparent' FROM outbox_event WHERE id = $1`, id).Scan(&stored); err != nil {
			t.Fatalf("event %s: %v", id, err)
		}
		if tp := kafkatest.Header(m, events.HeaderTraceparent); tp == "" || tp != stored {
			t.Errorf("event %s: traceparent header %q, the outbox row's %q", id, tp, stored)
		}
	}
}

// traceparentColumnSQL is the column and trigger of deploy/README.md.
const traceparentColumnSQL = `
ALTER TABLE outbox_event ADD COLUMN traceparent text;
CREATE FUNCTION outbox_event_traceparent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.traceparent := NEW.headers->>'traceparent';
    RETURN NEW;
END $$;
CREATE TRIGGER outbox_event_traceparent BEFORE INSERT ON outbox_event
    FOR EACH ROW EXECUTE FUNCTION outbox_event_traceparent();`
