package antifraud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// headerPartition makes the test writer put a record on a chosen partition,
// to hand one request to two consumers at once.
const headerPartition = "test-partition"

// harness is one antifraud deployment: its database, its topics and its
// consumer group, on which service instances are started and stopped.
type harness struct {
	tb         testing.TB
	brokers    broker.Config
	topics     events.Topics
	partitions int
	group      string
	dsn        string
	pool       *pgxpool.Pool
	writer     *kafkatest.Writer
	produced   int
}

func newHarness(tb testing.TB, partitions int) *harness {
	tb.Helper()
	brokers := broker.Config{Brokers: kafkatest.Brokers(tb)}
	requested := kafkatest.Topic(tb, "antifraud.solicitada", partitions)
	topics := events.Topics{
		Requested: requested,
		Analysed:  kafkatest.Topic(tb, "antifraud.analisada", 1),
		Settled:   "unused.liquidada",
		Rejected:  kafkatest.Topic(tb, "antifraud.rejeitada", 1),
	}
	createTopic(tb, brokers, events.DLT(requested), partitions)

	dsn := pgtest.NewDSN(tb, migrations.ForService(antifraud.Service)...)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		tb.Fatalf("pool: %v", err)
	}
	tb.Cleanup(pool.Close)

	// The DLT producer keeps a record on the partition it names:
	// produceRaw names one for every record.
	w := kafkatest.NewDLTWriter(tb, brokers)
	tb.Cleanup(func() { _ = w.Close() })
	return &harness{tb: tb, brokers: brokers, topics: topics, partitions: partitions,
		group: kafkatest.Group(tb, "antifraude"), dsn: dsn, pool: pool, writer: w}
}

// createTopic creates a topic with an exact name (a DLT must be named after
// its main topic) and deletes it when the test ends.
func createTopic(tb testing.TB, cfg broker.Config, name string, partitions int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, cfg, []broker.TopicSpec{{Name: name, Partitions: partitions, ReplicationFactor: 1}}); err != nil {
		tb.Fatalf("create topic %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second}
		if _, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{name}}); err != nil {
			tb.Logf("delete topic %s: %v", name, err)
		}
	})
}

// instance is one running antifraud service.
type instance struct {
	addr net.Addr
	task *background.Task
}

// start runs an instance of the service with rules cfg until stop or the
// end of the test.
func (h *harness) start(cfg risk.Config) *instance {
	h.tb.Helper()
	env := map[string]string{
		"HTTP_ADDR":          "127.0.0.1:0",
		"DATABASE_URL":       h.dsn,
		"DATABASE_MAX_CONNS": "5",
		"KAFKA_BROKERS":      strings.Join(h.brokers.Brokers, ","),
	}
	maps.Copy(env, authtest.New(h.tb).Env())
	c, err := antifraud.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		h.tb.Fatalf("config: %v", err)
	}
	c.Topics, c.Group, c.Risk = h.topics, h.group, cfg

	log := slog.New(slog.NewTextHandler(testWriter{h.tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	inst := &instance{}
	inst.addr, inst.task = background.Serve(h.tb, "antifraud", func(ctx context.Context, listening func(net.Addr)) error {
		return antifraud.Run(ctx, c, log, listening)
	})
	poll.Until(h.tb, 30*time.Second, "service ready", func() (bool, string) {
		status, _ := inst.get(h.tb, "/readyz")
		return status == http.StatusOK, strconv.Itoa(status)
	})
	return inst
}

// stop cancels the instance and waits for Run to return nil.
func (i *instance) stop(tb testing.TB) {
	tb.Helper()
	i.task.Stop(tb)
}

func (i *instance) get(tb testing.TB, path string) (int, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+i.addr.String()+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// request is a TransferenciaSolicitada as the transfers service emits it.
func request(account string, amount int64) events.Requested {
	return events.Requested{
		EventID:       uuid.New(),
		TransferID:    uuid.New(),
		SourceAccount: account,
		DestAccount:   "CC-002",
		AmountCents:   amount,
		Currency:      "BRL",
		OccurredAt:    time.Now().UTC().Truncate(time.Millisecond),
	}
}

// produce writes req to the requested topic with the headers the transfers
// service's relay sets (and extra ones).
func (h *harness) produce(req events.Requested, extra map[string]string) {
	h.tb.Helper()
	payload, err := json.Marshal(req)
	if err != nil {
		h.tb.Fatal(err)
	}
	headers := map[string]string{
		events.HeaderEventID:       req.EventID.String(),
		events.HeaderEventType:     events.TypeRequested,
		events.HeaderCorrelationID: req.TransferID.String(),
	}
	for k, v := range extra {
		headers[k] = v
	}
	h.produceRaw(req.SourceAccount, payload, headers)
}

func (h *harness) produceRaw(key string, value []byte, headers map[string]string) {
	h.tb.Helper()
	m := kafka.Message{Topic: h.topics.Requested, Key: []byte(key), Value: value}
	for k, v := range headers {
		m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(v)})
	}
	// The key's partition, as the relays' producer chooses it (murmur2),
	// unless the test names one.
	parts := make([]int, h.partitions)
	for i := range parts {
		parts[i] = i
	}
	m.Partition = (&kafka.Murmur2Balancer{}).Balance(m, parts...)
	if p := kafkatest.Header(m, headerPartition); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			h.tb.Fatalf("%s header %q: %v", headerPartition, p, err)
		}
		m.Partition = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.writer.WriteMessages(ctx, m); err != nil {
		h.tb.Fatalf("produce to %s: %v", h.topics.Requested, err)
	}
	h.produced++
}

// settle waits until the group committed every record produced so far and
// the outbox has nothing left to publish: from then on the output topics
// hold everything the service will ever write for those records, and exact
// counts can be asserted.
func (h *harness) settle() {
	h.tb.Helper()
	c := &kafka.Client{Addr: kafka.TCP(h.brokers.Brokers...), Timeout: 10 * time.Second}
	parts := make([]int, h.partitions)
	for i := range parts {
		parts[i] = i
	}
	poll.Until(h.tb, 60*time.Second, fmt.Sprintf("%d records committed and the outbox drained", h.produced), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: h.group, Topics: map[string][]int{h.topics.Requested: parts}})
		if err != nil {
			return false, err.Error()
		}
		var committed int64
		for _, p := range resp.Topics[h.topics.Requested] {
			if p.CommittedOffset > 0 {
				committed += p.CommittedOffset
			}
		}
		var pending int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM outbox_event WHERE status <> 'PUBLISHED'`).Scan(&pending); err != nil {
			return false, err.Error()
		}
		return committed == int64(h.produced) && pending == 0, fmt.Sprintf("committed %d, unpublished %d", committed, pending)
	})
}

// list reads every record of topic.
func (h *harness) list(topic string) []dlt.Record {
	h.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := dlt.List(ctx, h.brokers, dlt.Filter{Topic: topic})
	if err != nil {
		h.tb.Fatalf("list %s: %v", topic, err)
	}
	return recs
}

// decision is a row of the decision table.
type decision struct {
	Outcome string
	Score   int
	Rules   []string
	EventID uuid.UUID
}

func (h *harness) decisions() map[uuid.UUID]decision {
	h.tb.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT transfer_id, outcome, score, rules, event_id FROM decision`)
	if err != nil {
		h.tb.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]decision{}
	for rows.Next() {
		var id uuid.UUID
		var d decision
		if err := rows.Scan(&id, &d.Outcome, &d.Score, &d.Rules, &d.EventID); err != nil {
			h.tb.Fatal(err)
		}
		out[id] = d
	}
	if err := rows.Err(); err != nil {
		h.tb.Fatal(err)
	}
	return out
}

// headers returns a record's headers as a map (last value wins).
func headers(r dlt.Record) map[string]string {
	out := map[string]string{}
	for _, h := range r.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

// testWriter sends the service's log to the test log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
