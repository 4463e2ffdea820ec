package notifications_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

const testSecret = "test-webhook-secret-0123456789" //nolint:gosec // a test's secret

// routedSecret is the secret of the destination of a routed account.
func routedSecret(account string) string { return "routed-secret-of-" + account }

// request is one webhook request as the receiver saw it.
type request struct {
	At      time.Time
	Path    string
	EventID string
	Header  http.Header
	Body    []byte
	Status  int
}

// receiver is a real HTTP server standing for a customer's endpoint. Its
// answer to each request comes from respond, given the event id and how
// many requests for that event came before (0 for the first).
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []request
	respond  func(eventID string, previous int) int
}

func newReceiver(tb testing.TB) *receiver {
	tb.Helper()
	r := &receiver{respond: func(string, int) int { return http.StatusOK }}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		at := time.Now()
		id := req.Header.Get("X-Paysuite-Event-Id")
		r.mu.Lock()
		previous := 0
		for _, q := range r.requests {
			if q.EventID == id {
				previous++
			}
		}
		status := r.respond(id, previous)
		r.requests = append(r.requests, request{At: at, Path: req.URL.Path, EventID: id, Header: req.Header.Clone(), Body: body, Status: status})
		r.mu.Unlock()
		if status == hangUp {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		w.WriteHeader(status)
	}))
	tb.Cleanup(r.srv.Close)
	return r
}

// hangUp, as an answer, closes the connection without a response: the
// sender sees a transport error.
const hangUp = -1

// setRespond replaces the answer function.
func (r *receiver) setRespond(f func(eventID string, previous int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.respond = f
}

// of returns the requests for eventID, in arrival order.
func (r *receiver) of(eventID string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.requests {
		if q.EventID == eventID {
			out = append(out, q)
		}
	}
	return out
}

func (r *receiver) all() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.requests...)
}

// harness is a running notifications service on its own database, topics
// and consumer group, sending webhooks to a receiver.
type harness struct {
	tb      testing.TB
	cfg     notifications.Config
	brokers broker.Config
	topics  events.Topics
	recv    *receiver
	pool    *pgxpool.Pool
	writer  *kafkatest.Writer
}

type options struct {
	// urls are per-account paths on the receiver (account -> path).
	urls map[string]string
}

func start(tb testing.TB, opts options) *harness {
	tb.Helper()
	brokers := broker.Config{Brokers: kafkatest.Brokers(tb)}
	settled := kafkatest.Topic(tb, "notif.liquidada", 1)
	rejected := kafkatest.Topic(tb, "notif.rejeitada", 1)
	reserved := kafkatest.Topic(tb, "notif.reservada", 1)
	cancelled := kafkatest.Topic(tb, "notif.cancelada", 1)
	refundSettled := kafkatest.Topic(tb, "notif.estorno.liquidado", 1)
	refundRejected := kafkatest.Topic(tb, "notif.estorno.rejeitado", 1)
	createDerivedTopics(tb, brokers, settled, rejected, reserved, cancelled, refundSettled, refundRejected)
	topics := events.Topics{Requested: "unused.solicitada", Analysed: "unused.analisada", Settled: settled, Rejected: rejected,
		Reserved: reserved, Cancelled: cancelled, RefundSettled: refundSettled, RefundRejected: refundRejected}

	recv := newReceiver(tb)
	dsn := pgtest.NewDSN(tb, migrations.ForService(notifications.Service)...)
	env := map[string]string{
		"HTTP_ADDR":           "127.0.0.1:0",
		"DATABASE_URL":        dsn,
		"DATABASE_MAX_CONNS":  "10",
		"KAFKA_BROKERS":       strings.Join(brokers.Brokers, ","),
		"NOTIFY_CHANNEL":      "webhook",
		"WEBHOOK_DEFAULT_URL": recv.srv.URL + "/hook",
		"WEBHOOK_SECRET":      testSecret,
		"WEBHOOK_TIMEOUT":     "2s",
		"WEBHOOK_ALLOW_HTTP":  "true", // the test receivers listen on plain HTTP
	}
	maps.Copy(env, authtest.New(tb).Env())
	// Each routed account is a destination of its own, with its own secret.
	var names []string
	for account, path := range opts.urls {
		name := fmt.Sprintf("D%d", len(names))
		names = append(names, name)
		env["WEBHOOK_"+name+"_URL"] = recv.srv.URL + path
		env["WEBHOOK_"+name+"_ACCOUNTS"] = account
		env["WEBHOOK_"+name+"_SECRET"] = routedSecret(account)
	}
	env["WEBHOOK_DESTINATIONS"] = strings.Join(names, ",")
	cfg, err := notifications.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	cfg.Topics = topics
	cfg.Group = kafkatest.Group(tb, "notificacoes")

	log := slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	addr, _ := background.Serve(tb, "notifications", func(ctx context.Context, listening func(net.Addr)) error {
		return notifications.Run(ctx, cfg, log, listening)
	})
	poll.Until(tb, 30*time.Second, "service ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr.String() + "/readyz") //nolint:noctx // test
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		tb.Fatalf("pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	w := kafkatest.NewWriter(tb, brokers)
	tb.Cleanup(func() { _ = w.Close() })
	return &harness{tb: tb, cfg: cfg, brokers: brokers, topics: topics, recv: recv, pool: pool, writer: w}
}

// createDerivedTopics creates the retry topics and DLTs of the main topics
// (one partition each) and deletes them when the test ends.
func createDerivedTopics(tb testing.TB, cfg broker.Config, mains ...string) {
	tb.Helper()
	var specs []broker.TopicSpec
	var names []string
	for _, main := range mains {
		for _, d := range broker.RetryDelays {
			names = append(names, broker.RetryTopic(main, d))
		}
		names = append(names, events.DLT(main))
	}
	for _, n := range names {
		specs = append(specs, broker.TopicSpec{Name: n, Partitions: 1, ReplicationFactor: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, cfg, specs); err != nil {
		tb.Fatalf("create derived topics: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second}
		if _, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: names}); err != nil {
			tb.Logf("delete derived topics: %v", err)
		}
	})
}

// event is a result event as published.
type event struct {
	ID         uuid.UUID
	TransferID uuid.UUID
	Key        string
	Topic      string
	Type       string
	Reason     string
	OccurredAt time.Time
	Headers    map[string]string
	// AmountCents and ExpiresAt: of a reservation (ExpiresAt too), a
	// capture or a settled refund.
	AmountCents int64
	ExpiresAt   time.Time
	// RefundID is a refund result's refund.
	RefundID uuid.UUID
}

func (h *harness) settled(key string) event {
	return h.newEvent(h.topics.Settled, events.TypeSettled, key, "")
}

func (h *harness) rejected(key, reason string) event {
	return h.newEvent(h.topics.Rejected, events.TypeRejected, key, reason)
}

// reserved is a hold's reservation of cents until an hour from now.
func (h *harness) reserved(key string, cents int64) event {
	e := h.newEvent(h.topics.Reserved, events.TypeReserved, key, "")
	e.AmountCents, e.ExpiresAt = cents, e.OccurredAt.Add(time.Hour)
	return e
}

// cancelled is a hold's release, with reason ReasonCancelledByClient or
// ReasonExpired.
func (h *harness) cancelled(key, reason string) event {
	return h.newEvent(h.topics.Cancelled, events.TypeCancelled, key, reason)
}

// refundSettled is a refund of cents settled by the ledger.
func (h *harness) refundSettled(key string, cents int64) event {
	e := h.newEvent(h.topics.RefundSettled, events.TypeRefundSettled, key, "")
	e.AmountCents = cents
	return e
}

// refundRejected is a refund the ledger refused for reason.
func (h *harness) refundRejected(key, reason string) event {
	return h.newEvent(h.topics.RefundRejected, events.TypeRefundRejected, key, reason)
}

func (h *harness) newEvent(topic, typ, key, reason string) event {
	transfer := uuid.New()
	// The id the ledger derives for this transfer and type: the handler
	// refuses any other (events.CheckResultID).
	kind := map[string]string{events.TypeSettled: events.KindSettled, events.TypeRejected: events.KindRejectedLedger,
		events.TypeReserved: events.KindReserved, events.TypeCancelled: events.KindCancelled}[typ]
	id := events.DerivedID(kind, transfer)
	var refund uuid.UUID
	if typ == events.TypeRefundSettled || typ == events.TypeRefundRejected {
		// A refund's result id is derived from the refund's id
		// (events.CheckRefundResultID).
		refund = uuid.New()
		id = events.DerivedID(map[string]string{events.TypeRefundSettled: events.KindRefundSettled,
			events.TypeRefundRejected: events.KindRefundRejected}[typ], refund)
	}
	return event{
		ID: id, TransferID: transfer, RefundID: refund, Key: key, Topic: topic, Type: typ, Reason: reason,
		OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		Headers: map[string]string{
			events.HeaderEventID:       id.String(),
			events.HeaderEventType:     typ,
			events.HeaderCorrelationID: transfer.String(),
			events.HeaderTraceparent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		},
	}
}

func (e event) payload() []byte {
	var v any = events.Settled{EventID: e.ID, TransferID: e.TransferID, AmountCents: e.AmountCents, OccurredAt: e.OccurredAt}
	switch e.Type {
	case events.TypeRejected:
		v = events.Rejected{EventID: e.ID, TransferID: e.TransferID, Reason: e.Reason, OccurredAt: e.OccurredAt}
	case events.TypeReserved:
		v = events.Reserved{EventID: e.ID, TransferID: e.TransferID, AmountCents: e.AmountCents, ExpiresAt: e.ExpiresAt, OccurredAt: e.OccurredAt}
	case events.TypeCancelled:
		v = events.Cancelled{EventID: e.ID, TransferID: e.TransferID, Reason: e.Reason, OccurredAt: e.OccurredAt}
	case events.TypeRefundSettled:
		v = events.RefundSettled{EventID: e.ID, RefundID: e.RefundID, TransferID: e.TransferID, AmountCents: e.AmountCents, OccurredAt: e.OccurredAt}
	case events.TypeRefundRejected:
		v = events.RefundRejected{EventID: e.ID, RefundID: e.RefundID, TransferID: e.TransferID, Reason: e.Reason, OccurredAt: e.OccurredAt}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// publish writes e (with its payload) to its topic.
func (h *harness) publish(e event) {
	h.tb.Helper()
	h.publishRaw(e.Topic, e.Key, e.payload(), e.Headers)
}

func (h *harness) publishRaw(topic, key string, value []byte, headers map[string]string) {
	h.tb.Helper()
	m := kafka.Message{Topic: topic, Key: []byte(key), Value: value}
	for k, v := range headers {
		m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.writer.WriteMessages(ctx, m); err != nil {
		h.tb.Fatalf("publish to %s: %v", topic, err)
	}
}

// barrier publishes a fresh event after everything published so far on the
// same topic and key (hence partition), and waits for its webhook: once it
// arrived, the records before it were handled.
func (h *harness) barrier(topic, key string) {
	h.tb.Helper()
	var e event
	switch topic {
	case h.topics.Rejected:
		e = h.rejected(key, events.ReasonInsufficientFunds)
	case h.topics.Reserved:
		e = h.reserved(key, 1)
	case h.topics.Cancelled:
		e = h.cancelled(key, events.ReasonCancelledByClient)
	case h.topics.RefundSettled:
		e = h.refundSettled(key, 1)
	case h.topics.RefundRejected:
		e = h.refundRejected(key, events.ReasonExceedsRefundable)
	default:
		e = h.settled(key)
	}
	h.publish(e)
	h.waitRequests(e.ID.String(), 1, 30*time.Second)
}

// waitRequests waits until the receiver saw at least n requests for
// eventID and returns them.
func (h *harness) waitRequests(eventID string, n int, timeout time.Duration) []request {
	h.tb.Helper()
	var got []request
	poll.Until(h.tb, timeout, fmt.Sprintf("%d webhook(s) for %s", n, eventID), func() (bool, string) {
		got = h.recv.of(eventID)
		return len(got) >= n, fmt.Sprintf("%d requests", len(got))
	})
	return got
}

// list reads a topic with the DLT tooling.
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

// waitDLT waits until the DLT of topic holds n records and returns them.
func (h *harness) waitDLT(topic string, n int, timeout time.Duration) []dlt.Record {
	h.tb.Helper()
	var recs []dlt.Record
	poll.Until(h.tb, timeout, fmt.Sprintf("%d record(s) on %s", n, events.DLT(topic)), func() (bool, string) {
		recs = h.list(events.DLT(topic))
		return len(recs) >= n, fmt.Sprintf("%d records", len(recs))
	})
	return recs
}

// logEntry is a row of the notification log.
type logEntry struct {
	Status    string
	Attempts  int
	Channel   string
	Delivered bool
	LastError string
}

func (h *harness) logEntry(eventID uuid.UUID) (logEntry, error) {
	var (
		e         logEntry
		delivered *time.Time
		lastError *string
	)
	err := h.pool.QueryRow(context.Background(),
		`SELECT status, attempts, channel, delivered_at, last_error FROM notification WHERE event_id = $1`, eventID).
		Scan(&e.Status, &e.Attempts, &e.Channel, &delivered, &lastError)
	e.Delivered = delivered != nil
	if lastError != nil {
		e.LastError = *lastError
	}
	return e, err
}

// waitLog waits until the log entry of eventID satisfies ok.
func (h *harness) waitLog(eventID uuid.UUID, what string, ok func(logEntry) bool) logEntry {
	h.tb.Helper()
	var e logEntry
	poll.Until(h.tb, 30*time.Second, "log entry "+what, func() (bool, string) {
		var err error
		e, err = h.logEntry(eventID)
		if err != nil {
			return false, err.Error()
		}
		return ok(e), fmt.Sprintf("%+v", e)
	})
	return e
}

// testWriter sends the service's log to the test log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var errNoHeader = errors.New("header missing")

// header returns the value of the last header named key of r.
func header(r dlt.Record, key string) (string, error) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value), nil
		}
	}
	return "", fmt.Errorf("%w: %s", errNoHeader, key)
}

// toRecord turns a listed record back into a broker.Record, for the
// dlt package's header readers.
func toRecord(r dlt.Record) broker.Record {
	return broker.Record{Topic: r.Topic, Partition: int32(r.Partition), Offset: r.Offset, Time: r.Time, Key: r.Key, Value: r.Value, Headers: r.Headers} //nolint:gosec // a partition number
}

func fmtV(v any) string     { return fmt.Sprintf("%v", v) }
func fmtPlusV(v any) string { return fmt.Sprintf("%+v", v) }
func fmtGoV(v any) string   { return fmt.Sprintf("%#v", v) }
