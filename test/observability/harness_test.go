package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// harness is one service running on its own database (behind a proxy that
// can be cut), its own topics, and a Kafka dialer that can be cut.
type harness struct {
	t       *testing.T
	service string
	topics  events.Topics
	brokers []string
	group   string
	// probeTopic receives the events the test enqueues straight into the
	// service's outbox.
	probeTopic string

	db     *netfault.Proxy
	kafka  *kafkatest.Dialer
	pool   *pgxpool.Pool     // direct, not through the proxy
	writer *kafkatest.Writer // the test's producer, never cut
	url    string
	bearer string // every request carries this client's token
	minter string // but deposits, which carry this one (contas:depositar only)
	// transferKey signs TransferenciaAnalisada records as the transfers
	// service would; the ledger under test trusts it.
	transferKey transfersig.Signer
}

// start runs service (one of serviceNames) until the test ends, and waits
// until it is ready.
func start(t *testing.T, service string) *harness {
	t.Helper()
	h := &harness{
		t:          t,
		service:    service,
		topics:     kafkatest.SuiteTopics(t, 1),
		brokers:    kafkatest.Brokers(t),
		group:      kafkatest.Group(t, service),
		probeTopic: kafkatest.Topic(t, "observability.probe."+service, 1),
	}
	dsn := pgtest.NewDSN(t, migrations.ForService(service)...)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	h.db = netfault.NewProxy(t, u.Host)
	proxied := *u
	proxied.Host = h.db.Addr()

	h.pool, err = pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(h.pool.Close)
	h.writer = kafkatest.NewWriter(t, broker.Config{Brokers: h.brokers})
	t.Cleanup(func() { _ = h.writer.Close() })
	h.kafka = kafkatest.NewDialer(t)

	env := map[string]string{
		"HTTP_ADDR":            "127.0.0.1:0",
		"DATABASE_URL":         proxied.String(),
		"DATABASE_MAX_CONNS":   "6",
		"KAFKA_BROKERS":        strings.Join(h.brokers, ","),
		"OUTBOX_POLL_INTERVAL": "100ms",
		"OUTBOX_BACKOFF_BASE":  "100ms",
		"OUTBOX_BACKOFF_MAX":   "500ms",
	}
	iss := authtest.New(t)
	maps.Copy(env, iss.Env())
	h.bearer = iss.Bearer(t, "observability", authtest.AllScopes...)
	h.minter = iss.Bearer(t, "observability-tesouraria", authtest.DepositScopes...)
	h.transferKey = iss.TransferKey()
	run := h.runner(func(k string) string { return env[k] })

	lw := &logWriter{t: t}
	log := slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.Cleanup(lw.close) // after the service has stopped: cleanups run last first
	addr, _ := background.Serve(t, service, func(ctx context.Context, listening func(net.Addr)) error {
		return run(ctx, log, listening)
	})
	h.url = "http://" + addr.String()
	poll.Until(t, 30*time.Second, service+" ready", func() (bool, string) {
		status, _, body := h.do(http.MethodGet, "/readyz", nil, "")
		return status == http.StatusOK, string(body)
	})
	return h
}

// runner builds the service's configuration from env plus the harness's
// topics, group and dialer, and returns its Run.
func (h *harness) runner(getenv func(string) string) func(context.Context, *slog.Logger, func(net.Addr)) error {
	h.t.Helper()
	fail := func(err error) {
		h.t.Helper()
		if err != nil {
			h.t.Fatalf("%s: config: %v", h.service, err)
		}
	}
	const stats = 100 * time.Millisecond
	switch h.service {
	case "transfers":
		cfg, err := transfers.ConfigFromEnv(getenv)
		fail(err)
		cfg.Topics, cfg.ProjectionGroup = h.topics, h.group
		cfg.Kafka.Dial, cfg.Relay.StatsInterval = h.kafka.DialContext, stats
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return transfers.Run(ctx, cfg, log, l)
		}
	case "ledger":
		cfg, err := ledger.ConfigFromEnv(getenv)
		fail(err)
		cfg.Topics, cfg.Group, cfg.DLTMonitorGroup = h.topics, h.group, h.group+"-dlt-monitor"
		cfg.CommandsGroup = h.group + "-comandos"
		cfg.RefundsGroup = h.group + "-estornos"
		cfg.Kafka.Dial, cfg.Relay.StatsInterval = h.kafka.DialContext, stats
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return ledger.Run(ctx, cfg, log, l)
		}
	case "antifraud":
		cfg, err := antifraud.ConfigFromEnv(getenv)
		fail(err)
		cfg.Topics, cfg.Group = h.topics, h.group
		cfg.Kafka.Dial, cfg.Relay.StatsInterval = h.kafka.DialContext, stats
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return antifraud.Run(ctx, cfg, log, l)
		}
	case "notifications":
		cfg, err := notifications.ConfigFromEnv(getenv)
		fail(err)
		cfg.Topics, cfg.Group = h.topics, h.group
		cfg.Kafka.Dial, cfg.Relay.StatsInterval = h.kafka.DialContext, stats
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return notifications.Run(ctx, cfg, log, l)
		}
	}
	h.t.Fatalf("unknown service %q", h.service)
	return nil
}

// consumed is the main topic the service consumes.
func (h *harness) consumed() string {
	switch h.service {
	case "transfers", "notifications":
		return h.topics.Settled
	case "ledger":
		return h.topics.Analysed
	default:
		return h.topics.Requested
	}
}

// validInput returns a well-formed record of the consumed topic, about a new
// transfer.
func (h *harness) validInput() kafka.Message {
	id := uuid.New()
	switch h.service {
	case "transfers", "notifications":
		return settled(h.topics.Settled, id)
	case "ledger":
		return h.analysed(id, "CC-OBS-1", "CC-OBS-2", 100)
	default:
		return requested(h.topics.Requested, id, "CC-OBS-1", "CC-OBS-2", 100)
	}
}

func requested(topic string, id uuid.UUID, from, to string, cents int64) kafka.Message {
	ev := uuid.New()
	return record(topic, from, events.TypeRequested, ev, events.Requested{EventID: ev, TransferID: id,
		SourceAccount: from, DestAccount: to, AmountCents: cents, Currency: "BRL", OccurredAt: time.Now().UTC()})
}

// analysed is a TransferenciaAnalisada on the harness's analisada topic,
// signed with its transfer key.
func (h *harness) analysed(id uuid.UUID, from, to string, cents int64) kafka.Message {
	ev := uuid.New()
	// The client is the one the harness's token names, so the accounts it
	// opened (their titular) are its own to debit.
	const client = "observability"
	return record(h.topics.Analysed, from, events.TypeAnalysed, ev, events.Analysed{EventID: ev, TransferID: id, ClientID: client,
		SourceAccount: from, DestAccount: to, AmountCents: cents, Currency: "BRL", RiskScore: 10, OccurredAt: time.Now().UTC(),
		Authorization: h.transferKey.Sign(transfersig.Claim{TransferID: id, Source: from, Destination: to, AmountCents: cents,
			Currency: "BRL", Client: client})})
}

// settled is the ledger's TransferenciaLiquidada of id, with its derived
// event id (the projection refuses any other).
func settled(topic string, id uuid.UUID) kafka.Message {
	eventID := events.DerivedID(events.KindSettled, id)
	return record(topic, "CC-OBS-1", events.TypeSettled, eventID,
		events.Settled{EventID: eventID, TransferID: id, OccurredAt: time.Now().UTC()})
}

func rejected(topic string, id uuid.UUID, reason string) kafka.Message {
	ev := events.DerivedID(events.KindRejectedLedger, id)
	return record(topic, "CC-OBS-1", events.TypeRejected, ev,
		events.Rejected{EventID: ev, TransferID: id, Reason: reason, OccurredAt: time.Now().UTC()})
}

// record is an event record as the suite's producers write it.
func record(topic, key, eventType string, eventID uuid.UUID, payload any) kafka.Message {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err) // the payloads are the events package's own structs
	}
	return kafka.Message{Topic: topic, Key: []byte(key), Value: b, Headers: []kafka.Header{
		{Key: events.HeaderEventID, Value: []byte(eventID.String())},
		{Key: events.HeaderEventType, Value: []byte(eventType)},
	}}
}

// poison is a record no consumer can decode: it goes to the DLT at once.
func poison(topic string) kafka.Message {
	return kafka.Message{Topic: topic, Key: []byte("CC-OBS-1"), Value: []byte("{not json"), Headers: []kafka.Header{
		{Key: events.HeaderEventID, Value: []byte(uuid.NewString())},
	}}
}

// produce writes records with the test's own writer (never cut).
func (h *harness) produce(msgs ...kafka.Message) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.writer.WriteMessages(ctx, msgs...); err != nil {
		h.t.Fatalf("produce: %v", err)
	}
}

// enqueue writes an event straight into the service's outbox, as its
// business transactions do, addressed to the probe topic.
func (h *harness) enqueue() uuid.UUID {
	h.t.Helper()
	id := uuid.New()
	db := postgres.Wrap(h.pool)
	err := db.InTx(context.Background(), func(tx pgx.Tx) error {
		return outbox.New(db).Enqueue(context.Background(), tx, events.Message{
			ID: id, AggregateType: "observability", AggregateID: id.String(),
			Topic: h.probeTopic, Key: "probe", Type: "ObservabilityProbe", Payload: []byte(`{"probe":true}`),
		})
	})
	if err != nil {
		h.t.Fatalf("enqueue into the %s outbox: %v", h.service, err)
	}
	return id
}

// do sends an HTTP request to the service.
func (h *harness) do(method, path string, hdr map[string]string, body string) (int, http.Header, []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.url+path, bytes.NewReader([]byte(body)))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", h.bearer)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.StatusCode, res.Header, b
}

// expectStatus sends a request and fails the test unless it gets want.
//
// A 503 overloaded (admission control) is asked again, as a client
// would, for up to wait: the outage step leaves transfers
// that never settle here (no ledger runs), and admission sheds until the
// rate it admits climbs back.
func (h *harness) expectStatus(want int, method, path string, hdr map[string]string, body string) http.Header {
	h.t.Helper()
	var (
		status int
		header http.Header
		b      []byte
	)
	poll.Until(h.t, wait, "an answer other than 503 overloaded", func() (bool, string) {
		status, header, b = h.do(method, path, hdr, body)
		overloaded := status != want && status == http.StatusServiceUnavailable && bytes.Contains(b, []byte("/overloaded"))
		return !overloaded, string(b)
	})
	if status != want {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, status, b, want)
	}
	return header
}

// logWriter sends service logs to the test log until the service stopped.
type logWriter struct {
	t      *testing.T
	mu     sync.Mutex
	closed bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *logWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
