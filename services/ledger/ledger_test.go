package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger"
	domain "github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

type service struct {
	url     string
	db      *pgplatform.DB
	topics  events.Topics
	brokers []string
	writer  *kafkatest.Writer
	bearer  string // client-a with every scope
	iss     *authtest.TestIssuer
	store   *postgres.Store
}

// start runs the ledger with its own database and topics until the test
// ends, and checks that it then stops cleanly.
func start(t *testing.T) *service {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the variables of extra added to the
// environment.
func startWith(t *testing.T, extra map[string]string) *service {
	t.Helper()
	return startWithPolicy(t, extra, consumer.Blocking{Backoff: backoff.Exponential{Initial: 50 * time.Millisecond, Multiplier: 2, Max: 200 * time.Millisecond}, Retries: 2})
}

// startWithPolicy is startWith with policy handling failed records.
func startWithPolicy(t *testing.T, extra map[string]string, policy consumer.Policy) *service {
	t.Helper()
	brokers := kafkatest.Brokers(t)
	topics := events.Topics{
		Requested:        "unused",
		Analysed:         kafkatest.Topic(t, "ledger-analisada", 2),
		Settled:          kafkatest.Topic(t, "ledger-liquidada", 1),
		Rejected:         kafkatest.Topic(t, "ledger-rejeitada", 1),
		Reserved:         kafkatest.Topic(t, "ledger-reservada", 1),
		CaptureRequested: kafkatest.Topic(t, "ledger-captura", 2),
		CancelRequested:  kafkatest.Topic(t, "ledger-cancelamento", 2),
		Cancelled:        kafkatest.Topic(t, "ledger-cancelada", 1),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var dlts []broker.TopicSpec
	for _, d := range ledger.DLTs(topics) {
		dlts = append(dlts, broker.TopicSpec{Name: d, Partitions: 2, ReplicationFactor: 1})
	}
	if _, err := broker.CreateTopics(ctx, broker.Config{Brokers: brokers}, dlts); err != nil {
		t.Fatalf("create DLT topics: %v", err)
	}
	dsn := ledgertest.NewDSN(t)
	iss := authtest.New(t)
	env := iss.Env()
	maps.Copy(env, map[string]string{"DATABASE_URL": dsn, "HTTP_ADDR": "127.0.0.1:0", "KAFKA_BROKERS": strings.Join(brokers, ","),
		"OUTBOX_POLL_INTERVAL": "100ms"})
	maps.Copy(env, extra)
	cfg, err := ledger.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Topics = topics
	cfg.Group = kafkatest.Group(t, "ledger")
	cfg.DLTMonitorGroup = kafkatest.Group(t, "ledger-dlt-monitor")
	cfg.CommandsGroup = kafkatest.Group(t, "ledger-comandos")

	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	a, _ := background.Serve(t, "ledger", func(ctx context.Context, listening func(net.Addr)) error {
		return ledger.RunWithPolicy(ctx, cfg, log, listening, policy)
	})
	s := &service{url: "http://" + a.String(), topics: topics, brokers: brokers,
		bearer: iss.Bearer(t, "client-a", authtest.AllScopes...), iss: iss}
	s.db = ledgertest.OpenDB(t, dsn)
	s.store = postgres.New(s.db, outbox.New(s.db))
	s.writer = kafkatest.NewWriter(t, broker.Config{Brokers: brokers})
	t.Cleanup(func() { _ = s.writer.Close() })
	return s
}

func (s *service) call(t *testing.T, method, path, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", s.bearer)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if m == nil {
		m = map[string]any{"raw": string(raw)}
	}
	return res.StatusCode, m
}

// openAccount opens id for ledgertest.Client in the service's database
// and deposits into it. It goes through the store, not HTTP: the HTTP
// writes need an authenticated principal, which the authentication
// middleware gives (its tests cover that path); these tests are about
// settlement.
func (s *service) openAccount(t *testing.T, id string, deposit int64) {
	t.Helper()
	if _, _, err := s.store.CreateAccount(context.Background(), id, "BRL", ledgertest.Client); err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	if deposit > 0 {
		s.deposit(t, id, deposit)
	}
}

func (s *service) deposit(t *testing.T, id string, cents int64) {
	t.Helper()
	if _, _, err := s.store.Deposit(context.Background(), domain.DepositRequest{ID: uuid.New(), AccountID: id, AmountCents: cents, ClientID: ledgertest.Client}); err != nil {
		t.Fatalf("deposit into %s: %v", id, err)
	}
}

func (s *service) balance(t *testing.T, id string) int64 {
	t.Helper()
	st, body := s.call(t, "GET", "/contas/"+id, "")
	if st != http.StatusOK {
		t.Fatalf("GET /contas/%s: %d %v", id, st, body)
	}
	return int64(body["saldoEmCentavos"].(float64))
}

func (s *service) produce(t *testing.T, ms ...kafkago.Message) {
	t.Helper()
	for i := range ms {
		ms[i].Topic = s.topics.Analysed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.writer.WriteMessages(ctx, ms...); err != nil {
		t.Fatal(err)
	}
}

func (s *service) metrics(t *testing.T) string {
	t.Helper()
	st, body := s.call(t, "GET", "/metrics", "")
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	return body["raw"].(string)
}

// read returns the first n records of topic, reading each of its
// partitions directly (no consumer group to join).
func (s *service) read(t *testing.T, topic string, n int) []kafkago.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn, err := kafkago.DialContext(ctx, "tcp", s.brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(topic)
	_ = conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan kafkago.Message)
	for _, p := range parts {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: s.brokers, Topic: topic, Partition: p.ID, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		go func() {
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return
				}
				select {
				case got <- m:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var out []kafkago.Message
	for len(out) < n {
		select {
		case m := <-got:
			out = append(out, m)
		case <-ctx.Done():
			t.Fatalf("read %s: %d of %d records: %v", topic, len(out), n, ctx.Err())
		}
	}
	return out
}

// requestOf is the request event id the analysed record of transfer id
// carries, which its result must carry back.
func requestOf(id uuid.UUID) uuid.UUID { return events.DerivedID("test-request", id) }

// analysed is a TransferenciaAnalisada of ledgertest.Client, signed with
// the transfer authorization key of s's issuer, which s trusts.
func (s *service) analysed(t *testing.T, id uuid.UUID, src, dst string, cents int64) kafkago.Message {
	t.Helper()
	return analysedFor(t, s.iss.TransferKey(), ledgertest.Client, id, src, dst, cents)
}

// analysedFor is a TransferenciaAnalisada of client, signed with key,
// bound to the request requestOf(id).
func analysedFor(t *testing.T, key transfersig.Signer, client string, id uuid.UUID, src, dst string, cents int64) kafkago.Message {
	t.Helper()
	ev := events.Analysed{EventID: events.DerivedID("analisada", id), TransferID: id, SourceAccount: src, DestAccount: dst,
		AmountCents: cents, Currency: "BRL", RiskScore: 10, OccurredAt: time.Now().UTC(), ClientID: client,
		Authorization: key.Sign(transfersig.Claim{TransferID: id, Source: src, Destination: dst, AmountCents: cents,
			Currency: "BRL", Client: client}),
		RequestEventID: requestOf(id)}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return kafkago.Message{Key: []byte(src), Value: b, Headers: []kafkago.Header{
		{Key: events.HeaderEventID, Value: []byte(ev.EventID.String())},
		{Key: events.HeaderEventType, Value: []byte(events.TypeAnalysed)},
		{Key: events.HeaderTraceparent, Value: []byte(traceparent)},
		{Key: events.HeaderCorrelationID, Value: []byte(id.String())},
	}}
}

// TestSameTransferDeliveredTwiceDebitsOnce is the seed's
// LiquidacaoIdempotenciaIT: the same TransferenciaAnalisada sent twice
// through Kafka debits once.
func TestSameTransferDeliveredTwiceDebitsOnce(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.openAccount(t, "CC-001", 100_000)
	s.openAccount(t, "CC-002", 0)

	id := uuid.New()
	record := s.analysed(t, id, "CC-001", "CC-002", 30_000)
	s.produce(t, record)
	s.produce(t, record) // the at-least-once duplicate

	poll.True(t, 60*time.Second, "both deliveries handled", func() bool {
		return strings.Contains(s.metrics(t), `ledger_settlements_total{reason="",result="DUPLICADA"} 1`)
	})
	if got := []int64{s.balance(t, "CC-001"), s.balance(t, "CC-002")}; !cmp.Equal(got, []int64{70_000, 30_000}) {
		t.Errorf("balances = %v, want [70000 30000]", got)
	}
	var postings int
	if err := s.db.QueryRow(context.Background(), `SELECT count(*) FROM posting WHERE entry_type = 'TRANSFER'`).Scan(&postings); err != nil {
		t.Fatal(err)
	}
	if postings != 2 {
		t.Errorf("%d transfer postings, want 2", postings)
	}
	// The ledger's record keeps who asked and the request it answered:
	// what the transfers service compares before an operator's apply.
	var client string
	var request uuid.UUID
	if err := s.db.QueryRow(context.Background(), `SELECT client_id, request_event_id FROM processed_transfer WHERE transfer_id = $1`,
		id).Scan(&client, &request); err != nil {
		t.Fatal(err)
	}
	if client != ledgertest.Client || request != requestOf(id) {
		t.Errorf("processed record: client %q, request %s; want %q, %s", client, request, ledgertest.Client, requestOf(id))
	}

	// The result reaches the liquidada topic through the outbox.
	m := s.read(t, s.topics.Settled, 1)[0]
	var ev events.Settled
	if err := events.Decode(m.Value, &ev); err != nil {
		t.Fatal(err)
	}
	wantID := events.DerivedID("liquidada", id)
	if ev.EventID != wantID || ev.TransferID != id || string(m.Key) != "CC-001" || ev.RequestEventID != requestOf(id) ||
		ev.DestHolder != ledgertest.Client {
		t.Errorf("settled event %+v key %q, want id %s for transfer %s keyed CC-001, bound to request %s, titularDestino %s",
			ev, m.Key, wantID, id, requestOf(id), ledgertest.Client)
	}
	for k, want := range map[string]string{events.HeaderEventID: wantID.String(), events.HeaderEventType: events.TypeSettled,
		events.HeaderCorrelationID: id.String(), events.HeaderTraceparent: traceparent} {
		if got := kafkatest.Header(m, k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	ledgertest.CheckInvariants(t, s.db)
}

// TestRejectionIsPublishedAndRemembered: an insufficient balance rejects,
// the rejection is published, and a redelivery after funding the account
// still does not settle.
func TestRejectionIsPublishedAndRemembered(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.openAccount(t, "CC-001", 100)
	s.openAccount(t, "CC-002", 0)
	id := uuid.New()
	record := s.analysed(t, id, "CC-001", "CC-002", 500)
	s.produce(t, record)

	m := s.read(t, s.topics.Rejected, 1)[0]
	var ev events.Rejected
	if err := events.Decode(m.Value, &ev); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(events.Rejected{EventID: events.DerivedID("rejeitada-ledger", id), TransferID: id,
		Reason: events.ReasonInsufficientFunds, OccurredAt: ev.OccurredAt, RequestEventID: requestOf(id)}, ev); diff != "" {
		t.Errorf("rejected event mismatch (-want +got):\n%s", diff)
	}

	s.deposit(t, "CC-001", 1000)
	s.produce(t, record)
	poll.True(t, 60*time.Second, "the redelivery handled", func() bool {
		return strings.Contains(s.metrics(t), `ledger_settlements_total{reason="",result="DUPLICADA"} 1`)
	})
	if got := []int64{s.balance(t, "CC-001"), s.balance(t, "CC-002")}; !cmp.Equal(got, []int64{1_100, 0}) {
		t.Errorf("balances = %v, want [1100 0]", got)
	}
	ledgertest.CheckInvariants(t, s.db)
}

// TestPoisonRecordReachesTheDLTMonitor: an undecodable record goes to the
// DLT at once and the monitor counts it by origin topic.
func TestPoisonRecordReachesTheDLTMonitor(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.produce(t, kafkago.Message{Key: []byte("CC-001"), Value: []byte("{not json")})
	dead := s.read(t, events.DLT(s.topics.Analysed), 1)[0]
	if o, _ := dlt.ClaimedOrigin(kafkatest.Record(dead)); o.Topic != s.topics.Analysed {
		t.Errorf("DLT origin %q, want %q", o.Topic, s.topics.Analysed)
	}
	want := fmt.Sprintf(`ledger_dlt_messages_total{origin_topic=%q} 1`, s.topics.Analysed)
	poll.True(t, 60*time.Second, want, func() bool { return strings.Contains(s.metrics(t), want) })
	for _, path := range []string{"/healthz", "/readyz"} {
		if st, body := s.call(t, "GET", path, ""); st != http.StatusOK {
			t.Errorf("%s: %d %v", path, st, body)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://db/ledger"}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c ledger.Config)
	}{
		{name: "defaults", env: base, check: func(t *testing.T, c ledger.Config) {
			want := []any{":8081", 50, "ledger", "ledger-dlt-monitor", events.DefaultTopics, consumer.Policy(consumer.BlockingRetries), "ledger"}
			got := []any{c.HTTPAddr, c.BatchMax, c.Group, c.DLTMonitorGroup, c.Topics, ledger.Policy, c.Service}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("defaults mismatch (-want +got):\n%s", diff)
			}
		}},
		{name: "one transaction per transfer", env: map[string]string{"DATABASE_URL": "x", "LEDGER_BATCH_MAX": "1", "HTTP_ADDR": ":9000"},
			check: func(t *testing.T, c ledger.Config) {
				if c.BatchMax != 1 || c.HTTPAddr != ":9000" {
					t.Errorf("BatchMax %d HTTPAddr %q", c.BatchMax, c.HTTPAddr)
				}
			}},
		{name: "expiry sweep", env: map[string]string{"DATABASE_URL": "x", "LEDGER_EXPIRY_INTERVAL": "250ms", "LEDGER_EXPIRY_BATCH": "7"},
			check: func(t *testing.T, c ledger.Config) {
				if c.ExpiryInterval != 250*time.Millisecond || c.ExpiryBatch != 7 || c.CommandsGroup != "ledger-comandos" {
					t.Errorf("ExpiryInterval %s ExpiryBatch %d CommandsGroup %q", c.ExpiryInterval, c.ExpiryBatch, c.CommandsGroup)
				}
			}},
		{name: "expiry default", env: base, check: func(t *testing.T, c ledger.Config) {
			if c.ExpiryInterval != time.Second || c.ExpiryBatch != 100 {
				t.Errorf("ExpiryInterval %s ExpiryBatch %d, want 1s and 100", c.ExpiryInterval, c.ExpiryBatch)
			}
		}},
		{name: "expiry too often", env: map[string]string{"DATABASE_URL": "x", "LEDGER_EXPIRY_INTERVAL": "1ms"}, wantErr: "LEDGER_EXPIRY_INTERVAL"},
		{name: "expiry too rare", env: map[string]string{"DATABASE_URL": "x", "LEDGER_EXPIRY_INTERVAL": "2h"}, wantErr: "LEDGER_EXPIRY_INTERVAL"},
		{name: "expiry not a duration", env: map[string]string{"DATABASE_URL": "x", "LEDGER_EXPIRY_INTERVAL": "soon"}, wantErr: "LEDGER_EXPIRY_INTERVAL"},
		{name: "expiry batch of zero", env: map[string]string{"DATABASE_URL": "x", "LEDGER_EXPIRY_BATCH": "0"}, wantErr: "LEDGER_EXPIRY_BATCH"},
		{name: "expiry batch too large", env: map[string]string{"DATABASE_URL": "x", "LEDGER_EXPIRY_BATCH": "1001"}, wantErr: "LEDGER_EXPIRY_BATCH"},
		{name: "batch of zero", env: map[string]string{"DATABASE_URL": "x", "LEDGER_BATCH_MAX": "0"}, wantErr: "LEDGER_BATCH_MAX"},
		{name: "batch too large", env: map[string]string{"DATABASE_URL": "x", "LEDGER_BATCH_MAX": "1001"}, wantErr: "LEDGER_BATCH_MAX"},
		{name: "batch not a number", env: map[string]string{"DATABASE_URL": "x", "LEDGER_BATCH_MAX": "many"}, wantErr: "LEDGER_BATCH_MAX"},
		{name: "no database", env: map[string]string{}, wantErr: "DATABASE_URL"},
		{name: "no authorization keys", env: map[string]string{"DATABASE_URL": "x", "LEDGER_AUTHORIZATION_JWKS_FILE": ""},
			wantErr: "LEDGER_AUTHORIZATION_JWKS_FILE is required"},
		{name: "no authorization keys with ownership off", env: map[string]string{"DATABASE_URL": "x", "LEDGER_AUTHORIZATION_JWKS_FILE": "",
			"LEDGER_OWNERSHIP": "off"}, check: func(t *testing.T, c ledger.Config) {
			if c.Ownership != domain.OwnershipOff || c.AuthorizationJWKSFile != "" {
				t.Errorf("Ownership %v, AuthorizationJWKSFile %q", c.Ownership, c.AuthorizationJWKSFile)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ledger.ConfigFromEnv(func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return map[string]string{"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example",
					"LEDGER_AUTHORIZATION_JWKS_FILE": "/etc/paysuite/transfer-authorization-jwks.json"}[k]
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestAnotherClientsTransferIsRejected: the service as run rejects, with
// ORIGEM_NAO_AUTORIZADA published like any rejection, a transfer whose
// clienteId is not the source account's titular, and one naming no client
// (LEDGER_OWNERSHIP defaults to on); neither moves money.
func TestAnotherClientsTransferIsRejected(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.openAccount(t, "CC-001", 1_000)
	s.openAccount(t, "CC-002", 0)
	other, anonymous := uuid.New(), uuid.New()
	// Both as the transfers service signs them: what client-b asked, and
	// a request that named no client.
	rOther := analysedFor(t, s.iss.TransferKey(), "client-b", other, "CC-001", "CC-002", 500)
	rAnonymous := analysedFor(t, s.iss.TransferKey(), "", anonymous, "CC-001", "CC-002", 500)
	s.produce(t, rOther, rAnonymous)

	got := map[uuid.UUID]string{}
	for _, m := range s.read(t, s.topics.Rejected, 2) {
		var ev events.Rejected
		if err := events.Decode(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		got[ev.TransferID] = ev.Reason
	}
	want := map[uuid.UUID]string{other: events.ReasonUnauthorizedSource, anonymous: events.ReasonUnauthorizedSource}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejections mismatch (-want +got):\n%s", diff)
	}
	if got := []int64{s.balance(t, "CC-001"), s.balance(t, "CC-002")}; !cmp.Equal(got, []int64{1_000, 0}) {
		t.Errorf("balances = %v, want [1000 0]", got)
	}
	ledgertest.CheckInvariants(t, s.db)
}
