package outbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// env is one test's database, outbox and topic.
type env struct {
	db     *postgres.DB
	ob     *outbox.Outbox
	topic  string
	kcfg   broker.Config
	writer *kafkatest.Writer
}

func newEnv(t *testing.T, partitions int) *env {
	t.Helper()
	e := newDBEnv(t)
	e.kcfg = broker.Config{Brokers: kafkatest.Brokers(t)}
	e.writer = kafkatest.NewWriter(t, e.kcfg)
	t.Cleanup(func() { e.writer.Close() })
	e.topic = kafkatest.Topic(t, "outbox", partitions)
	return e
}

// newDBEnv is an env without Kafka (topic "t"), for relays that publish
// through a fake.
func newDBEnv(t *testing.T) *env {
	t.Helper()
	db := openDB(t)
	if _, err := db.Exec(context.Background(), `CREATE TABLE widget (id uuid PRIMARY KEY, name text NOT NULL)`); err != nil {
		t.Fatalf("create business table: %v", err)
	}
	return &env{db: db, ob: outbox.New(db), topic: "t"}
}

// openDB opens a fresh migrated database with a pool sized like a
// service's (the test default of 4 connections would starve four relays).
func openDB(tb testing.TB) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(context.Background(), pgtest.NewDSN(tb, migrations.Platform), 30)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	return db
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// fastRelay is a relay config for tests: small delays, polling fallback.
func fastRelay(name string) outbox.RelayConfig {
	return outbox.RelayConfig{
		Name: name, BatchSize: 200, PollInterval: 50 * time.Millisecond, Lease: 5 * time.Second,
		SendTimeout: 3 * time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
		StatsInterval: 100 * time.Millisecond,
	}
}

func runRelay(t *testing.T, r *outbox.Relay) {
	t.Helper()
	background.Go(t, "relay", r.Run)
}

type payload struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// enqueue writes one widget and its event per (key, n) in one transaction.
func (e *env) enqueue(t *testing.T, items ...payload) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, len(items))
	err := e.db.InTx(context.Background(), func(tx pgx.Tx) error {
		msgs := make([]events.Message, len(items))
		for i, it := range items {
			ids[i] = uuid.New()
			if _, err := tx.Exec(context.Background(), `INSERT INTO widget (id, name) VALUES ($1, $2)`, ids[i], it.Key); err != nil {
				return err
			}
			body, _ := json.Marshal(it)
			msgs[i] = events.Message{ID: ids[i], AggregateType: "widget", AggregateID: ids[i].String(),
				Topic: e.topic, Key: it.Key, Type: "WidgetCreated", Payload: body,
				Headers: map[string]string{events.HeaderCorrelationID: ids[i].String()}}
		}
		return e.ob.Enqueue(context.Background(), tx, msgs...)
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return ids
}

// readTopic reads records from every partition of topic until want records
// arrived or the deadline passed.
func readTopic(t *testing.T, kcfg broker.Config, topic string, want int, within time.Duration) []broker.Record {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: kcfg.Brokers, GroupID: kafkatest.Group(t, "reader"), Topic: topic,
		StartOffset: kafka.FirstOffset, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 100 * time.Millisecond,
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out []broker.Record
	for len(out) < want {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s: got %d of %d records: %v", topic, len(out), want, err)
		}
		out = append(out, kafkatest.Record(m))
	}
	return out
}

func count(t *testing.T, db *postgres.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", sql, err)
	}
	return n
}

// eventIDs returns the event ids (the HeaderEventID header) of got.
func eventIDs(got []broker.Record) map[string]bool {
	seen := map[string]bool{}
	for _, m := range got {
		seen[header(m, events.HeaderEventID)] = true
	}
	return seen
}

func header[M kafka.Message | broker.Record](m M, k string) string { return kafkatest.Header(m, k) }

// 1. The business row and its event are written together; the event
// reaches Kafka with its key and headers.
func TestOutboxSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	runRelay(t, outbox.NewRelay(e.ob, e.writer, fastRelay("r1"), testLogger(t), nil))
	var id uuid.UUID
	err := e.db.InTx(context.Background(), func(tx pgx.Tx) error {
		id = uuid.New()
		if _, err := tx.Exec(context.Background(), `INSERT INTO widget (id, name) VALUES ($1, 'w')`, id); err != nil {
			return err
		}
		return e.ob.Enqueue(context.Background(), tx, events.Message{
			ID: id, AggregateType: "widget", AggregateID: id.String(), Topic: e.topic, Key: "CC-001",
			Type: "WidgetCreated", Payload: []byte(`{"a":1}`),
			Headers: map[string]string{events.HeaderTraceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				events.HeaderCorrelationID: "corr-1"},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.db, `SELECT count(*) FROM widget WHERE id = $1`, id); n != 1 {
		t.Fatalf("business rows = %d, want 1", n)
	}
	got := readTopic(t, e.kcfg, e.topic, 1, 30*time.Second)[0]
	want := map[string]string{"key": "CC-001", "value": `{"a": 1}`, events.HeaderEventID: id.String(),
		events.HeaderEventType: "WidgetCreated", events.HeaderTraceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		events.HeaderCorrelationID: "corr-1"}
	gotMap := map[string]string{"key": string(got.Key), "value": string(got.Value)}
	for _, k := range []string{events.HeaderEventID, events.HeaderEventType, events.HeaderTraceparent, events.HeaderCorrelationID} {
		gotMap[k] = header(got, k)
	}
	if diff := cmp.Diff(want, gotMap); diff != "" {
		t.Errorf("record mismatch (-want +got):\n%s", diff)
	}
	wantPartition := int32((&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte("CC-001")}, 0, 1, 2)) //nolint:gosec // a partition number
	if got.Partition != wantPartition {
		t.Errorf("partition = %d, want murmur2 partition %d", got.Partition, wantPartition)
	}
	poll.True(t, 10*time.Second, "event marked PUBLISHED", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE id = $1 AND status = 'PUBLISHED' AND published_at IS NOT NULL`, id) == 1
	})
}

// 2. An error after both inserts leaves neither.
func TestOutboxRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	boom := errors.New("boom after both inserts")
	id := uuid.New()
	err := e.db.InTx(context.Background(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `INSERT INTO widget (id, name) VALUES ($1, 'w')`, id); err != nil {
			return err
		}
		if err := e.ob.Enqueue(context.Background(), tx, events.Message{ID: id, Topic: e.topic, Key: "k", Type: "T", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx error = %v, want %v", err, boom)
	}
	if n := count(t, e.db, `SELECT (SELECT count(*) FROM widget) + (SELECT count(*) FROM outbox_event)`); n != 0 {
		t.Fatalf("rows after rollback = %d, want 0", n)
	}
}

func TestEnqueueRejectsInvalidMessages(t *testing.T) {
	t.Parallel()
	db := postgres.Wrap(pgtest.NewPool(t, migrations.Platform))
	ob := outbox.New(db)
	tests := []struct {
		name string
		msg  events.Message
	}{
		{"no topic", events.Message{Key: "k", Type: "T", Payload: []byte(`{}`)}},
		{"no key", events.Message{Topic: "t", Type: "T", Payload: []byte(`{}`)}},
		{"no type", events.Message{Topic: "t", Key: "k", Payload: []byte(`{}`)}},
		{"not json", events.Message{Topic: "t", Key: "k", Type: "T", Payload: []byte(`{`)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := db.InTx(context.Background(), func(tx pgx.Tx) error { return ob.Enqueue(context.Background(), tx, tc.msg) })
			if !errors.Is(err, outbox.ErrInvalidMessage) {
				t.Fatalf("err = %v, want ErrInvalidMessage", err)
			}
		})
	}
}

// 3. Broker down: events stay pending and are retried with growing delays;
// once the broker is back, every one arrives.
func TestOutboxBrokerDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	dialer := kafkatest.NewDialer(t)
	dialer.Down()
	cut := kafkatest.NewWriter(t, broker.Config{Brokers: e.kcfg.Brokers, Dial: dialer.DialContext})
	defer cut.Close()
	cfg := fastRelay("down")
	cfg.SendTimeout = time.Second
	runRelay(t, outbox.NewRelay(e.ob, cut, cfg, testLogger(t), nil))

	var items []payload
	for i := range 30 {
		items = append(items, payload{Key: "acct-" + strconv.Itoa(i%5), N: i})
	}
	ids := e.enqueue(t, items...)
	// Every event keeps failing while the broker is unreachable: attempts
	// grow, nothing goes DEAD, nothing is published.
	poll.True(t, 30*time.Second, "three failed attempts on the head events", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE attempts >= 3`) >= 5
	})
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status IN ('PUBLISHED', 'DEAD')`); n != 0 {
		t.Fatalf("%d events published or dead while the broker was down", n)
	}
	// Growing delays: the gap between the last failure and the next attempt
	// grows with the attempt number (base 100ms doubling, jittered by at
	// most half).
	var minNext float64
	if err := e.db.QueryRow(context.Background(), `
		SELECT min(EXTRACT(EPOCH FROM next_attempt_at - now())) FROM outbox_event WHERE attempts >= 3 AND status = 'PENDING'`).Scan(&minNext); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE last_error IS NULL AND attempts > 0`); n != 0 {
		t.Errorf("%d failed events without last_error", n)
	}
	dialer.Up()
	seen := eventIDs(readTopic(t, e.kcfg, e.topic, len(ids), 60*time.Second))
	for _, id := range ids {
		if !seen[id.String()] {
			t.Errorf("event %s never arrived after the broker came back", id)
		}
	}
	poll.True(t, 20*time.Second, "all events PUBLISHED", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`) == len(ids)
	})
}

// recordingPublisher wraps a publisher and records who sends what, to prove
// that no event is sent by two relays at once.
type recordingPublisher struct {
	next     broker.Publisher
	name     string
	mu       *sync.Mutex
	inFlight map[string]string // event id -> relay sending it
	sends    map[string]int
	overlaps *[]string
}

func (p *recordingPublisher) Publish(ctx context.Context, msgs ...broker.Record) error {
	ids := make([]string, len(msgs))
	p.mu.Lock()
	for i, m := range msgs {
		ids[i] = header(m, events.HeaderEventID)
		if other, ok := p.inFlight[ids[i]]; ok {
			*p.overlaps = append(*p.overlaps, fmt.Sprintf("%s sent by %s and %s at once", ids[i], other, p.name))
		}
		p.inFlight[ids[i]] = p.name
		p.sends[ids[i]]++
	}
	p.mu.Unlock()
	err := p.next.Publish(ctx, msgs...)
	p.mu.Lock()
	for _, id := range ids {
		delete(p.inFlight, id)
	}
	p.mu.Unlock()
	return err
}

// 5. Four relays over 10,000 events: every event reaches Kafka, and no
// event is sent by two relays at once.
func TestOutboxConcurrentRelays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 6)
	const total = 10_000
	for batch := 0; batch < total/500; batch++ {
		items := make([]payload, 500)
		for i := range items {
			n := batch*500 + i
			items[i] = payload{Key: "acct-" + strconv.Itoa(n%97), N: n}
		}
		e.enqueue(t, items...)
	}
	var mu sync.Mutex
	inFlight, sends := map[string]string{}, map[string]int{}
	var overlaps []string
	for i := range 4 {
		name := "relay-" + strconv.Itoa(i)
		pub := &recordingPublisher{next: e.writer, name: name, mu: &mu, inFlight: inFlight, sends: sends, overlaps: &overlaps}
		cfg := fastRelay(name)
		cfg.BatchSize = 250
		runRelay(t, outbox.NewRelay(e.ob, pub, cfg, testLogger(t), nil))
	}
	got := readTopic(t, e.kcfg, e.topic, total, 120*time.Second)
	seen := map[string]int{}
	for _, m := range got {
		seen[header(m, events.HeaderEventID)]++
	}
	if len(seen) != total {
		t.Errorf("distinct events in Kafka = %d, want %d", len(seen), total)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("%d events sent by two relays at once, first: %s", len(overlaps), overlaps[0])
	}
	for id, n := range sends {
		if n != 1 {
			t.Errorf("event %s sent %d times, want once (no lease expired in this test)", id, n)
			break
		}
	}
	poll.True(t, 20*time.Second, "all PUBLISHED", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`) == total
	})
}

// 6. A relay that claimed a batch and died before marking it: after the
// lease expires another relay publishes those events.
func TestOutboxDeadRelayLeaseExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ids := e.enqueue(t, payload{"a", 1}, payload{"a", 2}, payload{"b", 3})
	// The state a relay leaves when it dies right after claiming: rows
	// PROCESSING, leased to it for 2 more seconds.
	if _, err := e.db.Exec(context.Background(), `
		UPDATE outbox_event SET status = 'PROCESSING', locked_by = 'dead-relay', locked_until = now() + interval '2 seconds'`); err != nil {
		t.Fatal(err)
	}
	claimedAt := time.Now()
	runRelay(t, outbox.NewRelay(e.ob, e.writer, fastRelay("survivor"), testLogger(t), nil))
	got := readTopic(t, e.kcfg, e.topic, len(ids), 30*time.Second)
	if since := time.Since(claimedAt); since < 1900*time.Millisecond {
		t.Errorf("events published %v after the claim, before the 2s lease expired", since)
	}
	// Key "a" keeps its order through the takeover.
	var aOrder []string
	for _, m := range got {
		if string(m.Key) == "a" {
			aOrder = append(aOrder, header(m, events.HeaderEventID))
		}
	}
	if diff := cmp.Diff([]string{ids[0].String(), ids[1].String()}, aOrder); diff != "" {
		t.Errorf("key a order mismatch (-want +got):\n%s", diff)
	}
	poll.True(t, 10*time.Second, "survivor marks them PUBLISHED", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED' AND locked_by IS NULL`) == len(ids)
	})
}

// 7. An event the broker refuses for good (larger than the topic's
// max.message.bytes) goes DEAD with its error after its attempts, while
// other events keep flowing.
func TestOutboxPoisonEventGoesDead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	small := kafkatest.TopicWithConfig(t, "outbox-small", 1, map[string]string{"max.message.bytes": "2048"})
	cfg := fastRelay("poison")
	cfg.MaxAttempts = 3
	runRelay(t, outbox.NewRelay(e.ob, e.writer, cfg, testLogger(t), nil))

	// Random, so that no compression brings it under the limit.
	raw := make([]byte, 4<<10)
	_, _ = rand.Read(raw)
	big := hex.EncodeToString(raw)
	var poisonID uuid.UUID
	var goodIDs []uuid.UUID
	err := e.db.InTx(context.Background(), func(tx pgx.Tx) error {
		poisonID = uuid.New()
		msgs := []events.Message{{ID: poisonID, Topic: small, Key: "p", Type: "Big",
			Payload: []byte(`{"blob":"` + big + `"}`)}}
		for i := range 10 {
			id := uuid.New()
			goodIDs = append(goodIDs, id)
			msgs = append(msgs, events.Message{ID: id, Topic: small, Key: "k" + strconv.Itoa(i%3), Type: "Small", Payload: []byte(`{"n":1}`)})
		}
		return e.ob.Enqueue(context.Background(), tx, msgs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := readTopic(t, e.kcfg, small, len(goodIDs), 30*time.Second)
	for _, m := range got {
		if header(m, events.HeaderEventID) == poisonID.String() {
			t.Fatalf("the oversized event reached Kafka")
		}
	}
	poll.True(t, 30*time.Second, "poison event DEAD", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE id = $1 AND status = 'DEAD' AND refusals = 3 AND last_error <> ''`, poisonID) == 1
	})
	dead, err := e.ob.ListDead(context.Background(), 10)
	if err != nil || len(dead) != 1 || dead[0].ID != poisonID {
		t.Fatalf("ListDead = %+v, %v; want the poison event", dead, err)
	}
	// Requeue gives it a fresh budget; it dies again, as it must.
	n, err := e.ob.Requeue(context.Background(), outbox.RequeueFilter{ID: poisonID}, outbox.Audit{Operator: "test"})
	if err != nil || n != 1 {
		t.Fatalf("Requeue = %d, %v; want 1", n, err)
	}
	poll.True(t, 30*time.Second, "poison event DEAD again", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE id = $1 AND status = 'DEAD' AND refusals = 3`, poisonID) == 1
	})
}

// failingPublisher fails every send of the events of some keys until the
// test heals it, and passes everything else through.
type failingPublisher struct {
	next     broker.Publisher
	mu       sync.Mutex
	failKeys map[string]bool
	healed   bool
	failures int
}

func (p *failingPublisher) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healed = true
}

func (p *failingPublisher) Publish(ctx context.Context, msgs ...broker.Record) error {
	errs := make(broker.PublishErrors, len(msgs))
	var pass []broker.Record
	var passIdx []int
	p.mu.Lock()
	for i, m := range msgs {
		if p.failKeys[string(m.Key)] && !p.healed {
			p.failures++
			errs[i] = broker.RecordError(kerr.NotEnoughReplicas) // transient: retried, never DEAD
			continue
		}
		pass = append(pass, m)
		passIdx = append(passIdx, i)
	}
	p.mu.Unlock()
	if len(pass) > 0 {
		if err := p.next.Publish(ctx, pass...); err != nil {
			var werrs broker.PublishErrors
			for j, i := range passIdx {
				if errors.As(err, &werrs) {
					errs[i] = werrs[j]
				} else {
					errs[i] = err
				}
			}
		}
	}
	for _, e := range errs {
		if e != nil {
			return errs
		}
	}
	return nil
}

// 8. With two relays and injected send failures on some keys, the events of
// every key arrive in enqueue order, and keys without failures are not
// delayed by the failing ones.
func TestOutboxPerKeyOrderUnderFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4)
	pub := &failingPublisher{next: e.writer, failKeys: map[string]bool{"bad-0": true, "bad-1": true, "bad-2": true}}
	keys := []string{"bad-0", "bad-1", "bad-2"}
	for i := range 12 {
		keys = append(keys, "good-"+strconv.Itoa(i))
	}
	// 40 rounds, each one transaction with one event per key, in order.
	for n := range 40 {
		items := make([]payload, len(keys))
		for i, k := range keys {
			items[i] = payload{Key: k, N: n}
		}
		e.enqueue(t, items...)
	}
	for i := range 2 {
		cfg := fastRelay("order-" + strconv.Itoa(i))
		cfg.BatchSize = 64
		runRelay(t, outbox.NewRelay(e.ob, pub, cfg, testLogger(t), nil))
	}
	// Every good-key event is published while the bad keys keep failing.
	poll.True(t, 60*time.Second, "every good-key event published", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE key LIKE 'good-%' AND status = 'PUBLISHED'`) == 12*40
	})
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE key LIKE 'bad-%' AND status = 'PUBLISHED'`); n != 0 {
		t.Fatalf("%d events of failing keys published while their sends failed", n)
	}
	// The failing keys were retried meanwhile, with backoff.
	if n := count(t, e.db, `SELECT count(DISTINCT key) FROM outbox_event WHERE key LIKE 'bad-%' AND attempts >= 2`); n != 3 {
		t.Errorf("%d failing keys retried at least twice, want 3", n)
	}
	pub.heal()
	got := readTopic(t, e.kcfg, e.topic, len(keys)*40, 60*time.Second)
	last := map[string]int{}
	for _, k := range keys {
		last[k] = -1
	}
	for _, m := range got {
		var p payload
		if err := json.Unmarshal(m.Value, &p); err != nil {
			t.Fatal(err)
		}
		if p.N != last[p.Key]+1 {
			t.Errorf("key %s: got n=%d after n=%d (out of order or missing)", p.Key, p.N, last[p.Key])
		}
		last[p.Key] = p.N
	}
}

// Cleanup deletes old PUBLISHED rows only; DEAD rows stay.
func TestOutboxCleanup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.enqueue(t, payload{"a", 1}, payload{"a", 2}, payload{"b", 3}, payload{"c", 4})
	if _, err := e.db.Exec(context.Background(), `
		UPDATE outbox_event SET status = CASE WHEN key = 'c' THEN 'DEAD' ELSE 'PUBLISHED' END,
		       published_at = CASE WHEN key = 'c' THEN NULL ELSE now() - interval '8 days' END`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(context.Background(), `UPDATE outbox_event SET published_at = now() WHERE key = 'b'`); err != nil {
		t.Fatal(err)
	}
	n, err := e.ob.Cleanup(context.Background(), 7*24*time.Hour, 1)
	if err != nil || n != 2 {
		t.Fatalf("Cleanup = %d, %v; want 2", n, err)
	}
	var left []string
	rows, _ := e.db.Query(context.Background(), `SELECT key || ':' || status FROM outbox_event ORDER BY key`)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b:PUBLISHED", "c:DEAD"}, left); diff != "" {
		t.Errorf("rows left (-want +got):\n%s", diff)
	}
}

// countingPublisher counts the records it is asked to send and sends none.
type countingPublisher struct {
	mu   sync.Mutex
	sent int
}

func (p *countingPublisher) Publish(_ context.Context, msgs ...broker.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent += len(msgs)
	return nil
}

// A relay whose lease expired marks its event (a failed send: retry later)
// while another relay's claim is taking that event over with the key's next
// event. The claim must not send the next event ahead of the failed one.
func TestRelayClaimYieldsToConcurrentMark(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ob := outbox.New(db)
	var ids []uuid.UUID
	err := db.InTx(context.Background(), func(tx pgx.Tx) error {
		for n := range 2 {
			id := uuid.New()
			ids = append(ids, id)
			if err := ob.Enqueue(context.Background(), tx, events.Message{ID: id, Topic: "t", Key: "a", Type: "T",
				Payload: []byte(`{"n":` + strconv.Itoa(n) + `}`)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), `
		UPDATE outbox_event SET status = 'PROCESSING', locked_by = 'stalled', locked_until = now() - interval '1 second'
		 WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	// The stalled relay's mark, not yet committed: it holds the row lock.
	tx, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // committed below
	if _, err := tx.Exec(context.Background(), `
		UPDATE outbox_event SET status = 'PENDING', attempts = 1, next_attempt_at = now() + interval '1 hour',
		       locked_by = NULL, locked_until = NULL
		 WHERE id = $1 AND locked_by = 'stalled'`, ids[0]); err != nil {
		t.Fatal(err)
	}
	pub := &countingPublisher{}
	relay := outbox.NewRelay(ob, pub, fastRelay("taker"), testLogger(t), nil)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := relay.PublishBatch(context.Background())
		done <- result{n, err}
	}()
	time.Sleep(300 * time.Millisecond) // the claim now waits for the row lock
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.n != 0 {
		t.Fatalf("PublishBatch = %d, %v; want 0, nil (the key waits for its retry)", res.n, res.err)
	}
	if pub.sent != 0 {
		t.Fatalf("%d records sent ahead of the key's failed event", pub.sent)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox_event WHERE id = $1 AND status = 'PENDING' AND locked_by IS NULL`, ids[1]); n != 1 {
		t.Fatalf("the key's second event is not pending and unleased")
	}
}
