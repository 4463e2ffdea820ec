package transfers_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// service is a running transfers service on its own database and topics.
type service struct {
	url     string
	brokers []string
	topics  events.Topics
	group   string
	dsn     string
	// iss signs the tokens; requests without an Authorization header of
	// their own carry bearer (client-a, every scope).
	iss    *authtest.TestIssuer
	bearer string
}

// start runs the service with Run until the test ends, then checks it
// shut down cleanly.
func start(t *testing.T) *service {
	t.Helper()
	return startOn(t, pgtest.NewDSN(t, migrations.ForService(transfers.Service)...), nil)
}

// startOn is start on the database dsn (migrated at start), with cfg
// changed by tweak when not nil.
func startOn(t *testing.T, dsn string, tweak func(*transfers.Config)) *service {
	t.Helper()
	brokers := kafkatest.Brokers(t)
	topics := events.Topics{
		Requested: kafkatest.Topic(t, "solicitada", 1),
		Analysed:  "unused-analisada-" + uuid.NewString(),
		Settled:   kafkatest.Topic(t, "liquidada", 1),
		Rejected:  kafkatest.Topic(t, "rejeitada", 1),
		Reserved:  kafkatest.Topic(t, "reservada", 1),
		Cancelled: kafkatest.Topic(t, "cancelada", 1),
		// The commands' topics: written by the relay, read by no one here.
		CaptureRequested: kafkatest.Topic(t, "captura-solicitada", 1),
		CancelRequested:  kafkatest.Topic(t, "cancelamento-solicitado", 1),
		// Refunds: requests written by the relay, results read.
		RefundRequested: kafkatest.Topic(t, "estorno-solicitado", 1),
		RefundSettled:   kafkatest.Topic(t, "estorno-liquidado", 1),
		RefundRejected:  kafkatest.Topic(t, "estorno-rejeitado", 1),
	}
	dlts(t, brokers, topics.Settled, topics.Rejected, topics.Reserved, topics.Cancelled, topics.RefundSettled, topics.RefundRejected)
	iss := authtest.New(t)
	cfg := transfers.Config{
		Config: platform.Config{
			Service:        transfers.Service,
			HTTPAddr:       "127.0.0.1:0",
			DatabaseURL:    dsn,
			DBMaxConns:     8,
			Kafka:          broker.Config{Brokers: brokers},
			Relay:          outbox.RelayConfig{PollInterval: 100 * time.Millisecond},
			MigrateOnStart: true,
			Auth:           iss.Config(),
		},
		Topics:               topics,
		ProjectionGroup:      kafkatest.Group(t, "transferencias-projecao"),
		ClaimTimeout:         10 * time.Second,
		AuthorizationKeyFile: iss.Env()["TRANSFERS_AUTHORIZATION_KEY_FILE"],
		HeldReapplyWindow:    transfers.DefaultHeldReapplyWindow,
		LedgerURL:            transfers.DefaultLedgerURL,
		InboxRetention:       transfers.DefaultInboxRetention,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	a, _ := background.Serve(t, "transfers", func(ctx context.Context, listening func(net.Addr)) error {
		return transfers.Run(ctx, cfg, slog.New(slog.DiscardHandler), listening)
	})
	return &service{url: "http://" + a.String(), brokers: brokers, topics: topics, group: cfg.ProjectionGroup, dsn: cfg.DatabaseURL,
		iss: iss, bearer: iss.Bearer(t, "client-a", authtest.AllScopes...)}
}

// dlts creates the dead-letter topics of the given topics (their names are
// fixed by the topic names, so kafkatest.Topic cannot make them).
func dlts(t *testing.T, brokers []string, topics ...string) {
	t.Helper()
	var specs []broker.TopicSpec
	var names []string
	for _, tp := range topics {
		specs = append(specs, broker.TopicSpec{Name: events.DLT(tp), Partitions: 1, ReplicationFactor: 1})
		names = append(names, events.DLT(tp))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, broker.Config{Brokers: brokers}, specs); err != nil {
		t.Fatalf("create DLTs: %v", err)
	}
	t.Cleanup(func() {
		c := &kafkago.Client{Addr: kafkago.TCP(brokers...), Timeout: 30 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.DeleteTopics(ctx, &kafkago.DeleteTopicsRequest{Topics: names}); err != nil {
			t.Logf("delete DLTs: %v", err)
		}
	})
}

func (s *service) do(t *testing.T, method, path string, hdr map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	status, h, b, err := s.send(method, path, hdr, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, h, b
}

// send is do for any goroutine: the transport's error is returned, not
// failed on.
func (s *service) send(method, path string, hdr map[string]string, body string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, s.url+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", s.bearer)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b, err
}

func (s *service) post(t *testing.T, key, body string, extra map[string]string) (int, http.Header) {
	t.Helper()
	hdr := map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}
	for k, v := range extra {
		hdr[k] = v
	}
	status, h, b := s.do(t, http.MethodPost, "/transferencias", hdr, body)
	if status != http.StatusAccepted {
		t.Fatalf("POST = %d %s", status, b)
	}
	return status, h
}

func (s *service) status(t *testing.T, id string) map[string]any {
	t.Helper()
	code, _, b := s.do(t, http.MethodGet, "/transferencias/"+id, nil, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", id, code, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func body(origem, destino string, valor int64) string {
	b, _ := json.Marshal(map[string]any{"contaOrigem": origem, "contaDestino": destino, "valorEmCentavos": valor, "moeda": "BRL"})
	return string(b)
}

// TestPostPublishesOneRequestedEvent: each POST (and its replays) puts
// exactly one TransferenciaSolicitada on the topic, keyed by contaOrigem,
// with the contract's headers (traceparent only when the request had one)
// and payload.
func TestPostPublishesOneRequestedEvent(t *testing.T) {
	t.Parallel()
	s := start(t)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, untraced := uuid.NewString(), uuid.NewString()
	bodies := map[string]string{traced: body("CC-104", "CC-220", 30000), untraced: body("CC-555", "CC-042", 5000)}
	s.post(t, traced, bodies[traced], map[string]string{"traceparent": traceparent})
	s.post(t, untraced, bodies[untraced], nil)
	for key, b := range bodies {
		if _, h := s.post(t, key, b, nil); h.Get("Idempotent-Replayed") != "true" {
			t.Fatal("second POST is not a replay")
		}
	}

	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: s.brokers, Topic: s.topics.Requested, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := []struct {
		id, source, dest string
		amount           float64
		traceparent      string
	}{
		{traced, "CC-104", "CC-220", 30000, traceparent},
		{untraced, "CC-555", "CC-042", 5000, ""},
	}
	// The relay keeps order per key, not across keys: match each record
	// to its transfer by key.
	got := map[string]kafkago.Message{}
	for range want {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s: %v", s.topics.Requested, err)
		}
		if _, dup := got[string(m.Key)]; dup {
			t.Fatalf("two records with key %q", m.Key)
		}
		got[string(m.Key)] = m
	}
	for _, w := range want {
		m, ok := got[w.source]
		if !ok {
			t.Errorf("no record keyed by the source account %s; keys: %v", w.source, slices.Sorted(maps.Keys(got)))
			continue
		}
		var payload map[string]any
		if err := json.Unmarshal(m.Value, &payload); err != nil {
			t.Fatal(err)
		}
		eventID, _ := payload["eventoId"].(string)
		if _, err := uuid.Parse(eventID); err != nil {
			t.Errorf("eventoId %q is not a UUID", eventID)
		}
		occurred, _ := payload["ocorridoEm"].(string)
		if ts, err := time.Parse(time.RFC3339Nano, occurred); err != nil || ts.Location() != time.UTC {
			t.Errorf("ocorridoEm %q is not RFC 3339 UTC", occurred)
		}
		delete(payload, "eventoId")
		delete(payload, "ocorridoEm")
		// The authorization verifies with the service's key, over what
		// the record says.
		var ev events.Requested
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		claim := transfersig.Claim{TransferID: ev.TransferID, Source: ev.SourceAccount, Destination: ev.DestAccount,
			AmountCents: ev.AmountCents, Currency: ev.Currency, Client: ev.ClientID}
		if ev.Authorization == nil || ev.Authorization.KeyID != s.iss.TransferKey().KeyID() {
			t.Errorf("autorizacao %+v, want one by key %s", ev.Authorization, s.iss.TransferKey().KeyID())
		} else if err := verifierOf(t, s.iss.TransferKey()).Verify(claim, ev.Authorization); err != nil {
			t.Errorf("autorizacao does not verify: %v", err)
		}
		delete(payload, "autorizacao")
		wantPayload := map[string]any{"transferenciaId": w.id, "contaOrigem": w.source, "contaDestino": w.dest,
			"valorEmCentavos": w.amount, "moeda": "BRL", "clienteId": "client-a"}
		if diff := cmp.Diff(wantPayload, payload); diff != "" {
			t.Errorf("payload mismatch (-want +got):\n%s", diff)
		}
		headers := map[string]string{}
		for _, h := range m.Headers {
			headers[h.Key] = string(h.Value)
		}
		wantHeaders := map[string]string{
			events.HeaderEventID:       eventID,
			events.HeaderEventType:     events.TypeRequested,
			events.HeaderCorrelationID: w.id,
		}
		if w.traceparent != "" {
			wantHeaders[events.HeaderTraceparent] = w.traceparent
		}
		if diff := cmp.Diff(wantHeaders, headers); diff != "" {
			t.Errorf("headers mismatch (-want +got):\n%s", diff)
		}
	}

	// Exactly one per transfer: the outbox holds two events, both
	// published, and the partition holds two records.
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	poll.True(t, 30*time.Second, "the outbox to drain", func() bool {
		var total, unpublished int
		err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status <> 'PUBLISHED') FROM outbox_event`).Scan(&total, &unpublished)
		if err != nil {
			t.Fatal(err)
		}
		if total != 2 {
			t.Fatalf("%d outbox events, want 2", total)
		}
		return unpublished == 0
	})
	client := &kafkago.Client{Addr: kafkago.TCP(s.brokers...), Timeout: 10 * time.Second}
	if n := published(t, client, s.topics.Requested); n != 2 {
		t.Errorf("%d records on %s, want exactly 2", n, s.topics.Requested)
	}
}

// published returns the end offset of partition 0 of topic: how many
// records were ever written to it.
func published(t *testing.T, c *kafkago.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: {kafkago.LastOffsetOf(0)}}})
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	parts := res.Topics[topic]
	if len(parts) != 1 || parts[0].Error != nil {
		t.Fatalf("list offsets of %s: %+v", topic, parts)
	}
	return parts[0].LastOffset
}

func produce(t *testing.T, w *kafkatest.Writer, topic, eventType string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.WriteMessages(ctx, kafkago.Message{Topic: topic, Key: []byte("CC-001"), Value: b, Headers: []kafkago.Header{
		{Key: events.HeaderEventType, Value: []byte(eventType)},
	}})
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// TestProjectionThroughKafka: a TransferenciaLiquidada read from Kafka
// settles a transfer; the same event again and a later
// TransferenciaRejeitada change nothing; a rejection rejects another one;
// a poison record goes to the DLT without holding the partition.
func TestProjectionThroughKafka(t *testing.T) {
	t.Parallel()
	s := start(t)
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for i, id := range []string{a, b, c} {
		s.post(t, id, body("CC-001", "CC-002", int64(100+i)), nil)
	}
	w := kafkatest.NewWriter(t, broker.Config{Brokers: s.brokers})
	defer w.Close()
	settledA := events.Settled{EventID: events.DerivedID(events.KindSettled, uuid.MustParse(a)), TransferID: uuid.MustParse(a), OccurredAt: time.Now().UTC()}

	produce(t, w, s.topics.Settled, events.TypeSettled, settledA)
	poll.True(t, 30*time.Second, "transfer A to be LIQUIDADA", func() bool { return s.status(t, a)["status"] == "LIQUIDADA" })
	before := s.status(t, a)

	// The same event again, a poison record, a late rejection of A; then B
	// and C as fences: once they changed, everything before them on their
	// partitions was handled.
	produce(t, w, s.topics.Settled, events.TypeSettled, settledA)
	poison := map[string]any{"eventoId": uuid.NewString(), "ocorridoEm": "2026-01-01T00:00:00Z"} // no transferenciaId
	produce(t, w, s.topics.Settled, events.TypeSettled, poison)
	produce(t, w, s.topics.Rejected, events.TypeRejected, events.Rejected{EventID: events.DerivedID(events.KindRejectedLedger, uuid.MustParse(a)), TransferID: uuid.MustParse(a),
		Reason: events.ReasonInsufficientFunds, OccurredAt: time.Now().UTC()})
	produce(t, w, s.topics.Settled, events.TypeSettled, events.Settled{EventID: events.DerivedID(events.KindSettled, uuid.MustParse(b)), TransferID: uuid.MustParse(b), OccurredAt: time.Now().UTC()})
	produce(t, w, s.topics.Rejected, events.TypeRejected, events.Rejected{EventID: events.DerivedID(events.KindRejectedAntifraud, uuid.MustParse(c)), TransferID: uuid.MustParse(c),
		Reason: events.ReasonBlockedByAntifraud, OccurredAt: time.Now().UTC()})

	poll.True(t, 30*time.Second, "transfer B to be LIQUIDADA", func() bool { return s.status(t, b)["status"] == "LIQUIDADA" })
	poll.True(t, 30*time.Second, "transfer C to be REJEITADA", func() bool { return s.status(t, c)["status"] == "REJEITADA" })
	if diff := cmp.Diff(before, s.status(t, a)); diff != "" {
		t.Errorf("transfer A changed after its settlement (-before +after):\n%s", diff)
	}
	if got := s.status(t, c)["motivo"]; got != events.ReasonBlockedByAntifraud {
		t.Errorf("C motivo = %v, want %s", got, events.ReasonBlockedByAntifraud)
	}

	// The poison record is on the DLT, with Spring's origin headers.
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: s.brokers, Topic: events.DLT(s.topics.Settled), Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("read DLT: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(m.Value, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(poison, got); diff != "" {
		t.Errorf("DLT record mismatch (-want +got):\n%s", diff)
	}
	if g := kafkatest.Header(m, dlt.HeaderDLTOriginalGroup); g != s.group {
		t.Errorf("DLT original group = %q, want %q", g, s.group)
	}
	if g := kafkatest.Header(m, dlt.HeaderDLTOriginalTopic); g != s.topics.Settled {
		t.Errorf("DLT original topic = %q, want %q", g, s.topics.Settled)
	}
}

// TestHealth: the service reports itself alive and ready.
func TestHealth(t *testing.T) {
	t.Parallel()
	s := start(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, b := s.do(t, http.MethodGet, path, nil, ""); code != http.StatusOK {
			t.Errorf("GET %s = %d %s", path, code, b)
		}
	}
	code, _, b := s.do(t, http.MethodGet, "/openapi.yaml", nil, "")
	if code != http.StatusOK || !bytes.Equal(b, transfers.OpenAPI) {
		t.Errorf("GET /openapi.yaml = %d, want the embedded document", code)
	}
}

// TestConfigFromEnv: defaults, and every problem reported at once.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := transfers.ConfigFromEnv(env(map[string]string{"DATABASE_URL": "postgres://x/y",
		"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example",
		"TRANSFERS_AUTHORIZATION_KEY_FILE": "/etc/paysuite/transfer-authorization-key.jwk"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.Topics != events.DefaultTopics || cfg.ProjectionGroup != "transferencias-projecao" ||
		cfg.ClaimTimeout != 30*time.Second || !cfg.MigrateOnStart || cfg.Service != "transfers" ||
		cfg.AuthorizationKeyFile != "/etc/paysuite/transfer-authorization-key.jwk" ||
		cfg.Auth != (auth.Config{JWKSFile: "/etc/paysuite/jwks.json", Issuer: "https://issuer.example", Audience: "paysuite", RateRPS: 50, RateBurst: 100,
			MaxTokenLifetime: auth.DefaultMaxTokenLifetime, TokenCacheSize: auth.DefaultTokenCacheSize}) {
		t.Errorf("defaults = %+v", cfg)
	}
	_, err = transfers.ConfigFromEnv(env(map[string]string{"IDEMPOTENCY_CLAIM_TIMEOUT": "10ms", "DATABASE_MAX_CONNS": "x"}))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"DATABASE_URL", "IDEMPOTENCY_CLAIM_TIMEOUT", "DATABASE_MAX_CONNS", "AUTH_JWKS_URL or AUTH_JWKS_FILE", "AUTH_ISSUER",
		"TRANSFERS_AUTHORIZATION_KEY_FILE"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if errors.Unwrap(err) == nil {
		t.Errorf("error %v wraps nothing", err)
	}
}

// verifierOf is the ledger's side of key: a verifier holding its public
// key.
func verifierOf(tb testing.TB, key transfersig.Signer) *transfersig.Verifier {
	tb.Helper()
	v, err := transfersig.NewVerifier(map[string]ed25519.PublicKey{key.KeyID(): key.Public()})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestHoldThroughKafka: a hold's whole life on the transfers side, through
// the real broker: the POST's solicitada carries captura and expiraEm; the
// ledger's reservada (read from Kafka) makes it RESERVADA; the capture is
// accepted and its CapturaSolicitada is published on the capture topic,
// keyed by contaOrigem; the capture's liquidada makes it LIQUIDADA with
// what it settled. Another hold's cancelada, arriving before its
// reservada, makes it CANCELADA, and the late reservada changes nothing.
func TestHoldThroughKafka(t *testing.T) {
	t.Parallel()
	s := start(t)
	held, cancelled := uuid.NewString(), uuid.NewString()
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	hold := func(id string) {
		b, _ := json.Marshal(map[string]any{"contaOrigem": "CC-001", "contaDestino": "CC-002", "valorEmCentavos": 5000, "moeda": "BRL",
			"captura": "MANUAL", "expiraEm": expires.Format(time.RFC3339)})
		s.post(t, id, string(b), nil)
	}
	hold(held)
	hold(cancelled)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	requests := kafkago.NewReader(kafkago.ReaderConfig{Brokers: s.brokers, Topic: s.topics.Requested, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer requests.Close()
	requested := map[uuid.UUID]events.Requested{}
	for range 2 {
		m, err := requests.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s: %v", s.topics.Requested, err)
		}
		var ev events.Requested
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		requested[ev.TransferID] = ev
	}
	for _, id := range []string{held, cancelled} {
		if ev := requested[uuid.MustParse(id)]; ev.Capture != events.CaptureManual || !ev.ExpiresAt.Equal(expires) {
			t.Errorf("solicitada of %s: captura %q expiraEm %v, want MANUAL %v", id, ev.Capture, ev.ExpiresAt, expires)
		}
	}
	w := kafkatest.NewWriter(t, broker.Config{Brokers: s.brokers})
	defer w.Close()
	reserved := func(id string) events.Reserved {
		tid := uuid.MustParse(id)
		return events.Reserved{EventID: events.DerivedID(events.KindReserved, tid), TransferID: tid, AmountCents: 5000,
			ExpiresAt: expires, OccurredAt: time.Now().UTC(), RequestEventID: requested[tid].EventID}
	}
	produce(t, w, s.topics.Reserved, events.TypeReserved, reserved(held))
	poll.True(t, 30*time.Second, "the hold to be RESERVADA", func() bool { return s.status(t, held)["status"] == "RESERVADA" })

	code, _, b := s.do(t, http.MethodPost, "/transferencias/"+held+"/captura",
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": uuid.NewString()}, `{"valorEmCentavos":1200}`)
	if code != http.StatusAccepted {
		t.Fatalf("capture = %d %s", code, b)
	}
	commands := kafkago.NewReader(kafkago.ReaderConfig{Brokers: s.brokers, Topic: s.topics.CaptureRequested, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer commands.Close()
	m, err := commands.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("read %s: %v", s.topics.CaptureRequested, err)
	}
	var capture events.CaptureRequested
	if err := json.Unmarshal(m.Value, &capture); err != nil {
		t.Fatal(err)
	}
	if string(m.Key) != "CC-001" || kafkatest.Header(m, events.HeaderEventType) != events.TypeCaptureRequested ||
		capture.TransferID.String() != held || capture.AmountCents != 1200 || capture.ClientID != "client-a" {
		t.Errorf("capture record key %q type %q %+v", m.Key, kafkatest.Header(m, events.HeaderEventType), capture)
	}

	tid := uuid.MustParse(held)
	produce(t, w, s.topics.Settled, events.TypeSettled, events.Settled{EventID: events.DerivedID(events.KindSettled, tid), TransferID: tid,
		OccurredAt: time.Now().UTC(), RequestEventID: requested[tid].EventID, AmountCents: 1200})
	poll.True(t, 30*time.Second, "the hold to be LIQUIDADA", func() bool { return s.status(t, held)["status"] == "LIQUIDADA" })
	if got := s.status(t, held); got["valorLiquidadoEmCentavos"] != float64(1200) || got["captura"] != "MANUAL" ||
		got["expiraEm"] != expires.Format(time.RFC3339Nano) {
		t.Errorf("captured hold reads %v", got)
	}

	cid := uuid.MustParse(cancelled)
	produce(t, w, s.topics.Cancelled, events.TypeCancelled, events.Cancelled{EventID: events.DerivedID(events.KindCancelled, cid), TransferID: cid,
		Reason: events.ReasonCancelledByClient, OccurredAt: time.Now().UTC(), RequestEventID: requested[cid].EventID})
	poll.True(t, 30*time.Second, "the other hold to be CANCELADA", func() bool { return s.status(t, cancelled)["status"] == "CANCELADA" })
	produce(t, w, s.topics.Reserved, events.TypeReserved, reserved(cancelled))
	// The late reservada was consumed once its inbox row exists.
	var n int
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	poll.True(t, 30*time.Second, "the late reservada to be consumed", func() bool {
		err := conn.QueryRow(ctx, `SELECT count(*) FROM inbox_event WHERE event_id = $1`, events.DerivedID(events.KindReserved, cid)).Scan(&n)
		return err == nil && n == 1
	})
	if got := s.status(t, cancelled)["status"]; got != "CANCELADA" {
		t.Errorf("after the late reservada: %v, want CANCELADA", got)
	}
}
