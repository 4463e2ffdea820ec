package consume_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/consume"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/poll"
)

// failingStore fails every settlement that includes the transfer failID, as
// a database that is down for it would, and records every call.
type failingStore struct {
	ledger.Store
	failID uuid.UUID

	mu    sync.Mutex
	calls []call
}

type call struct {
	at  time.Time
	ids []uuid.UUID
}

var errInjected = errors.New("injected failure: database unavailable")

func (f *failingStore) Settle(ctx context.Context, ts []ledger.Transfer, decide ledger.Decider) ([]ledger.Result, error) {
	c := call{at: time.Now()}
	for _, t := range ts {
		c.ids = append(c.ids, t.ID)
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if slices.Contains(c.ids, f.failID) {
		return nil, errInjected
	}
	return f.Store.Settle(ctx, ts, decide)
}

// callsWith returns the calls that included id.
func (f *failingStore) callsWith(id uuid.UUID) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if slices.Contains(c.ids, id) {
			out = append(out, c)
		}
	}
	return out
}

type env struct {
	db      *pgplatform.DB
	store   *postgres.Store
	failing *failingStore
	brokers []string
	topic   string
	writer  *kafkatest.Writer
	reg     *prometheus.Registry
	logs    *logtest.Buffer
	// group is the settlement consumer's group, once run.
	group string
	// ownership is the ownership rule the settlement consumer applies.
	ownership ledger.Ownership
	// metrics are the ledger's metrics, registered on reg.
	metrics *consume.Metrics
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := ledgertest.NewDB(t)
	e := &env{db: db, store: postgres.New(db, outbox.New(db)), brokers: kafkatest.Brokers(t),
		reg: prometheus.NewRegistry(), logs: &logtest.Buffer{}}
	e.metrics = consume.NewMetrics(e.reg)
	e.failing = &failingStore{Store: e.store, failID: uuid.New()}
	e.topic = kafkatest.Topic(t, "ledger-analisada", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, broker.Config{Brokers: e.brokers},
		[]broker.TopicSpec{{Name: events.DLT(e.topic), Partitions: 1, ReplicationFactor: 1}}); err != nil {
		t.Fatalf("create DLT topic: %v", err)
	}
	e.writer = kafkatest.NewWriter(t, broker.Config{Brokers: e.brokers})
	t.Cleanup(func() { _ = e.writer.Close() })
	return e
}

func (e *env) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// run starts the settlement consumer until the test ends; without batch,
// it takes one record at a time.
func (e *env) run(t *testing.T, policy consumer.Policy, batch bool) {
	t.Helper()
	svc := ledger.NewService(e.failing, ledger.Rules{Ownership: e.ownership, Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}, nil)
	h := consume.NewSettlement(svc, e.logger(), e.metrics)
	e.group = kafkatest.Group(t, "ledger")
	cfg := consumer.Config{
		Broker: broker.Config{Brokers: e.brokers}, Group: e.group, Topics: []string{e.topic},
		Handler: h.Handle, MaxBatch: 1, Policy: policy, Publisher: e.writer, Logger: e.logger(),
	}
	if batch {
		cfg.MaxBatch = 50
	}
	e.start(t, cfg)
}

func (e *env) start(t *testing.T, cfg consumer.Config) {
	t.Helper()
	background.Go(t, "consumer", func(ctx context.Context) error { return consumer.Run(ctx, cfg) })
}

func (e *env) open(t *testing.T, id string, balance int64) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.store.CreateAccount(ctx, id, "BRL", ledgertest.Client); err != nil {
		t.Fatal(err)
	}
	if balance > 0 {
		if _, _, err := e.store.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: id, AmountCents: balance, ClientID: ledgertest.Client}); err != nil {
			t.Fatal(err)
		}
	}
}

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// analysed returns a TransferenciaAnalisada record of ledgertest.Client,
// signed as the transfers service signs.
func analysed(t testing.TB, id uuid.UUID, src, dst string, cents int64) broker.Record {
	t.Helper()
	ev := events.Analysed{EventID: uuid.New(), TransferID: id, SourceAccount: src, DestAccount: dst,
		AmountCents: cents, Currency: "BRL", RiskScore: 10, OccurredAt: time.Now().UTC(), ClientID: ledgertest.Client}
	ev.Authorization = ledgertest.Authorize(transfersig.Claim{TransferID: id, Source: src, Destination: dst,
		AmountCents: cents, Currency: "BRL", Client: ledgertest.Client})
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return broker.Record{Key: []byte(src), Value: b, Headers: []broker.Header{
		{Key: events.HeaderEventID, Value: []byte(ev.EventID.String())},
		{Key: events.HeaderEventType, Value: []byte(events.TypeAnalysed)},
		{Key: events.HeaderTraceparent, Value: []byte(traceparent)},
		{Key: events.HeaderCorrelationID, Value: []byte(id.String())},
	}}
}

func (e *env) produce(t *testing.T, ms ...broker.Record) {
	t.Helper()
	for i := range ms {
		ms[i].Topic = e.topic
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.writer.Publish(ctx, ms...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// readDLT reads n records from the DLT.
func (e *env) readDLT(t *testing.T, n int) []broker.Record {
	t.Helper()
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: e.brokers, Topic: events.DLT(e.topic), Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []broker.Record
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read DLT (%d of %d records): %v", len(out), n, err)
		}
		out = append(out, kafkatest.Record(m))
	}
	return out
}

func (e *env) result(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var res string
	err := e.db.QueryRow(context.Background(), `SELECT result FROM processed_transfer WHERE transfer_id = $1`, id).Scan(&res)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return res
}

func (e *env) waitResult(t *testing.T, id uuid.UUID, want string) {
	t.Helper()
	poll.True(t, 60*time.Second, "transfer "+id.String()+" "+want, func() bool { return e.result(t, id) == want })
}

func header(m broker.Record, key string) string { return kafkatest.Header(m, key) }

func TestFailingTransferIsRetriedWithBackoffThenDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "A", 1_000)
	e.open(t, "B", 0)
	failing := analysed(t, e.failing.failID, "A", "B", 100)
	nextID := uuid.New()
	e.produce(t, failing, analysed(t, nextID, "A", "B", 200))
	policy := consumer.Blocking{Backoff: backoff.Exponential{Initial: 200 * time.Millisecond, Multiplier: 2, Max: 500 * time.Millisecond}, Retries: 3}
	e.run(t, policy, false)

	dead := e.readDLT(t, 1)[0]
	e.waitResult(t, nextID, "LIQUIDADA")

	// 1 attempt and 3 retries, 200, 400 and 500 (capped) ms apart.
	attempts := e.failing.callsWith(e.failing.failID)
	if len(attempts) != 4 {
		t.Fatalf("%d attempts, want 4", len(attempts))
	}
	for i, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond} {
		gap := attempts[i+1].at.Sub(attempts[i].at)
		if gap < want-5*time.Millisecond || gap > want+400*time.Millisecond {
			t.Errorf("retry %d came %s after the previous attempt, want %s", i+1, gap, want)
		}
	}
	// The partition waited: the next record was handled after the last retry.
	next := e.failing.callsWith(nextID)
	if len(next) == 0 || next[0].at.Before(attempts[3].at) {
		t.Errorf("the next record was handled before the failing one was given up")
	}

	if got := string(dead.Value); got != string(failing.Value) {
		t.Errorf("DLT value = %s, want the original", got)
	}
	if string(dead.Key) != "A" {
		t.Errorf("DLT key = %q, want A", dead.Key)
	}
	origin, _ := dlt.ClaimedOrigin(dead)
	if origin.Topic != e.topic || origin.Partition != 0 || origin.Offset != 0 || origin.Group == "" {
		t.Errorf("DLT origin = %+v, want %s partition 0 offset 0 with the group", origin, e.topic)
	}
	for _, h := range []struct{ key, want string }{
		{events.HeaderEventID, header(failing, events.HeaderEventID)},
		{events.HeaderEventType, events.TypeAnalysed},
		{events.HeaderTraceparent, traceparent},
		{events.HeaderCorrelationID, e.failing.failID.String()},
	} {
		if got := header(dead, h.key); got != h.want {
			t.Errorf("DLT header %s = %q, want %q", h.key, got, h.want)
		}
	}
	if msg := dlt.ExceptionMessage(dead); !strings.Contains(msg, errInjected.Error()) {
		t.Errorf("DLT exception message = %q, want it to carry the cause", msg)
	}
	if header(dead, dlt.HeaderDLTExceptionFQCN) == "" {
		t.Error("DLT record has no exception type header")
	}
	if got := e.result(t, e.failing.failID); got != "" {
		t.Errorf("the dead-lettered transfer has result %q, want none", got)
	}
	ledgertest.CheckInvariants(t, e.db)
}

func TestPoisonRecordsAreDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "A", 1_000)
	e.open(t, "B", 0)
	okID := uuid.New()
	missing, _ := json.Marshal(map[string]any{"eventoId": uuid.New(), "transferenciaId": uuid.New(), "contaOrigem": "A"})
	start := time.Now()
	e.produce(t,
		broker.Record{Key: []byte("A"), Value: []byte(`{"transferenciaId": "not json`)},
		broker.Record{Key: []byte("A"), Value: missing},
		analysed(t, okID, "A", "B", 100))
	// A retry would wait 10 s: the test would notice.
	policy := consumer.Blocking{Backoff: backoff.Exponential{Initial: 10 * time.Second, Multiplier: 2, Max: 10 * time.Second}, Retries: 5}
	e.run(t, policy, true)

	dead := e.readDLT(t, 2)
	e.waitResult(t, okID, "LIQUIDADA")
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("poison records took %s to clear: were they retried?", took)
	}
	for i, m := range dead {
		if o, _ := dlt.ClaimedOrigin(m); o.Offset != int64(i) {
			t.Errorf("DLT record %d comes from offset %d", i, o.Offset)
		}
		if msg := dlt.ExceptionMessage(m); !strings.Contains(msg, "malformed event") {
			t.Errorf("DLT record %d cause = %q, want a decoding error", i, msg)
		}
	}
	if n := len(e.failing.callsWith(okID)); n < 1 {
		t.Errorf("the valid record was settled %d times", n)
	}
	ledgertest.CheckInvariants(t, e.db)
}

// TestBatchWithAFailingTransferSettlesTheOthersOnce: a batch fails as a
// whole on a database error, which the loop takes as its first record's
// failure (that record retried alone, the rest handed on as a batch), the
// failing transfer goes to the DLT, and every other transfer, duplicates
// and dependencies included, ends exactly as if settled alone in order.
func TestBatchWithAFailingTransferSettlesTheOthersOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "A", 1_000)
	e.open(t, "B", 0)
	e.open(t, "C", 0)
	ab, bc, ca := uuid.New(), uuid.New(), uuid.New()
	recs := []broker.Record{
		analysed(t, ab, "A", "B", 300),
		analysed(t, e.failing.failID, "A", "C", 100),
		analysed(t, ab, "A", "B", 300),  // duplicate delivery inside the batch
		analysed(t, bc, "B", "C", 300),  // only possible after A->B
		analysed(t, ca, "C", "A", 1000), // more than C will hold
	}
	e.produce(t, recs...)
	policy := consumer.Blocking{Backoff: backoff.Exponential{Initial: 50 * time.Millisecond, Multiplier: 2, Max: 100 * time.Millisecond}, Retries: 2}
	e.run(t, policy, true)

	if o, _ := dlt.ClaimedOrigin(e.readDLT(t, 1)[0]); o.Offset != 1 {
		t.Errorf("DLT record from offset %d, want 1", o.Offset)
	}
	e.waitResult(t, ca, "REJEITADA")

	batchTried := false
	for _, c := range e.failing.callsWith(e.failing.failID) {
		batchTried = batchTried || len(c.ids) > 1
	}
	if !batchTried {
		t.Error("the records were never settled as a batch")
	}
	got := map[uuid.UUID]string{}
	for _, id := range []uuid.UUID{ab, bc, ca, e.failing.failID} {
		got[id] = e.result(t, id)
	}
	want := map[uuid.UUID]string{ab: "LIQUIDADA", bc: "LIQUIDADA", ca: "REJEITADA", e.failing.failID: ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}
	e.checkBalances(t, map[string]int64{"A": 700, "B": 0, "C": 300, "__FUNDING__BRL": -1000})
	ledgertest.CheckInvariants(t, e.db)
	if n := counter(t, e.reg, "ledger_settlements_total", map[string]string{"result": "LIQUIDADA", "reason": ""}); n != 2 {
		t.Errorf("ledger_settlements_total{LIQUIDADA} = %v, want 2", n)
	}
}

// TestPoisonInABatchSettlesTheGoodRecordsOnce: a record that cannot be
// decoded in the middle of a batch goes to the DLT at once, the transfers
// before it are settled together in one transaction and those after it in
// another, each exactly once, and none is settled again alone.
func TestPoisonInABatchSettlesTheGoodRecordsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "A", 1_000)
	e.open(t, "B", 0)
	var good []uuid.UUID
	var recs []broker.Record
	for i := range 9 {
		if i == 4 {
			recs = append(recs, broker.Record{Key: []byte("A"), Value: []byte(`{"transferenciaId": "not json`)})
			continue
		}
		id := uuid.New()
		good = append(good, id)
		recs = append(recs, analysed(t, id, "A", "B", 100))
	}
	e.produce(t, recs...)
	// A retry would wait 10 s: the test would notice.
	policy := consumer.Blocking{Backoff: backoff.Exponential{Initial: 10 * time.Second, Multiplier: 2, Max: 10 * time.Second}, Retries: 5}
	start := time.Now()
	e.run(t, policy, true)

	dead := e.readDLT(t, 1)[0]
	for _, id := range good {
		e.waitResult(t, id, "LIQUIDADA")
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("the batch took %s to clear: was a record retried?", took)
	}
	if o, _ := dlt.ClaimedOrigin(dead); o.Offset != 4 || !strings.Contains(dlt.ExceptionMessage(dead), "malformed event") {
		t.Errorf("DLT record from offset %d with cause %q, want the poison record (offset 4) and its decoding error",
			o.Offset, dlt.ExceptionMessage(dead))
	}
	for _, id := range good {
		calls := e.failing.callsWith(id)
		if len(calls) != 1 {
			t.Errorf("transfer %s was in %d settlements, want 1", id, len(calls))
			continue
		}
		if len(calls[0].ids) < 2 {
			t.Errorf("transfer %s was settled alone, not with its batch", id)
		}
	}
	if n := counter(t, e.reg, "ledger_settlements_total", map[string]string{"result": "LIQUIDADA", "reason": ""}); n != float64(len(good)) {
		t.Errorf("ledger_settlements_total{LIQUIDADA} = %v, want %d", n, len(good))
	}
	e.checkBalances(t, map[string]int64{"A": 200, "B": 800, "__FUNDING__BRL": -1000})
	ledgertest.CheckInvariants(t, e.db)
}

func TestDLTMonitorLogsAndCountsByOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.produce(t, broker.Record{Key: []byte("CC-9"), Value: []byte(`garbage`)})
	// The settlement consumer dead-letters the record; the monitor reads it.
	e.run(t, consumer.BlockingRetries, false)
	monitor := consume.NewDLTMonitor(e.logger(), e.metrics)
	e.start(t, consumer.Config{Broker: broker.Config{Brokers: e.brokers}, Group: kafkatest.Group(t, "ledger-dlt-monitor"),
		Topics: []string{events.DLT(e.topic)}, Handler: monitor.Handle, Publisher: e.writer, Logger: e.logger()})

	poll.True(t, 60*time.Second, "the monitor counts the DLT record", func() bool {
		return counter(t, e.reg, "ledger_dlt_messages_total", map[string]string{"origin_topic": e.topic}) == 1
	})
	line := findLog(t, e.logs, "record sent to the DLT")
	for k, want := range map[string]any{"key": "CC-9", "origin": e.topic, "origin_offset": 0.0} {
		if line[k] != want {
			t.Errorf("log %s = %v, want %v", k, line[k], want)
		}
	}
	if cause, _ := line["cause"].(string); !strings.Contains(cause, "malformed event") {
		t.Errorf("log cause = %q", cause)
	}
}

func TestDLTMonitorWithoutOriginHeaders(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	logs := &logtest.Buffer{}
	m := consume.NewDLTMonitor(slog.New(slog.NewJSONHandler(logs, nil)), consume.NewMetrics(reg))
	if err := m.Handle(context.Background(), []broker.Record{{Topic: "x-dlt", Key: []byte("K")}}); err != nil {
		t.Fatal(err)
	}
	if n := counter(t, reg, "ledger_dlt_messages_total", map[string]string{"origin_topic": consume.UnknownOrigin}); n != 1 {
		t.Errorf("count of unknown origin = %v, want 1", n)
	}
	if line := findLog(t, logs, "record sent to the DLT"); line["origin"] != consume.UnknownOrigin || line["cause"] != consume.UnknownOrigin {
		t.Errorf("log = %v", line)
	}
}

// checkBalances compares every account's balance with want.
func (e *env) checkBalances(t *testing.T, want map[string]int64) {
	t.Helper()
	got := map[string]int64{}
	for _, a := range ledgertest.ReadState(t, e.db).Accounts {
		got[a.ID] = a.Balance
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("balances mismatch (-want +got):\n%s", diff)
	}
}

// counter returns the value of the counter name with exactly labels.
func counter(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// findLog returns the first JSON line of logs whose msg is msg.
func findLog(t testing.TB, logs *logtest.Buffer, msg string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no log line %q", msg)
	return nil
}
