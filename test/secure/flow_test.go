package secure_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestFlowOverSASL runs the four services over SASL_SSL, each as its own
// principal with only the ACLs of `payments topics create --acls`: a
// transfer settles and one is rejected, end to end, and both customers are
// notified. Then a forged TransferenciaAnalisada is refused by the broker
// for every principal but antifraud's, and no money moves.
func TestFlowOverSASL(t *testing.T) {
	s := startSuite(t)
	run := shortID()
	acct := func(name string) string { return "S" + run + "-" + name }
	balances := map[string]int64{acct("A"): 100_000, acct("B"): 0, acct("C"): 1_000, acct("D"): 0, acct("V"): 50_000, acct("X"): 0}
	for id, cents := range balances {
		must(t, http.MethodPost, s.ledger.url+"/contas", "", map[string]string{"id": id, "moeda": "BRL"}, nil, http.StatusCreated)
		if cents > 0 {
			mustAs(t, minter, http.MethodPost, s.ledger.url+"/contas/"+url.PathEscape(id)+"/depositos", uuid.NewString(),
				map[string]int64{"valorEmCentavos": cents}, nil, http.StatusCreated)
		}
	}

	settled := s.transfer(t, acct("A"), acct("B"), 30_000)
	rejected := s.transfer(t, acct("C"), acct("D"), 5_000)
	got := map[string]outcome{settled: s.waitTerminal(t, settled), rejected: s.waitTerminal(t, rejected)}
	want := map[string]outcome{settled: {"LIQUIDADA", ""}, rejected: {"REJEITADA", events.ReasonInsufficientFunds}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("outcomes mismatch (-want +got):\n%s", diff)
	}
	balances[acct("A")] -= 30_000
	balances[acct("B")] += 30_000
	if diff := cmp.Diff(balances, s.balances(t, balances)); diff != "" {
		t.Errorf("balances mismatch (-want +got):\n%s", diff)
	}
	poll.Until(t, 2*time.Minute, "both customers notified", func() (bool, string) {
		var n int
		err := s.notifications.db.QueryRow(context.Background(),
			`SELECT count(*) FROM notification WHERE transfer_id = ANY($1) AND status = 'DELIVERED'`,
			[]uuid.UUID{uuid.MustParse(settled), uuid.MustParse(rejected)}).Scan(&n)
		return err == nil && n == 2, fmt.Sprintf("%d delivered (%v)", n, err)
	})

	t.Run("forged analisada is refused and moves no money", func(t *testing.T) {
		forged := events.Analysed{
			EventID: uuid.New(), TransferID: uuid.New(), SourceAccount: acct("V"), DestAccount: acct("X"),
			AmountCents: 50_000, Currency: "BRL", RiskScore: 0, OccurredAt: time.Now().UTC(),
		}
		value, err := json.Marshal(forged)
		if err != nil {
			t.Fatal(err)
		}
		msg := kafka.Message{
			Topic: events.DefaultTopics.Analysed, Key: []byte(forged.SourceAccount), Value: value,
			Headers: []kafka.Header{
				{Key: events.HeaderEventID, Value: []byte(forged.EventID.String())},
				{Key: events.HeaderEventType, Value: []byte(events.TypeAnalysed)},
			},
		}
		before := endOffsets(t, events.DefaultTopics.Analysed)
		for _, user := range []string{userTransfers, userLedger, userNotifications, userNobody} {
			// Through the suite's own producer: a principal without any ACL
			// on analisada does not even see the topic in its metadata.
			err := produce(sb.Config(user), msg)
			if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
				t.Errorf("%s wrote a forged analisada record: err = %v, want TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION", user, err)
			}
			// A produce request sent straight to the partition's leader,
			// past any client-side check: the broker refuses it.
			for p := range partitions {
				if err := produceRaw(sb.Config(user), events.DefaultTopics.Analysed, p, msg); !errors.Is(err, kafka.TopicAuthorizationFailed) {
					t.Errorf("%s: raw produce to analisada/%d: err = %v, want TOPIC_AUTHORIZATION_FAILED", user, p, err)
				}
			}
		}
		if diff := cmp.Diff(before, endOffsets(t, events.DefaultTopics.Analysed)); diff != "" {
			t.Errorf("analisada grew (-before +after):\n%s", diff)
		}
		// A real transfer after the attempt settles: the pipeline ran past
		// the point where a forged record would have been.
		after := s.transfer(t, acct("A"), acct("B"), 100)
		if got := s.waitTerminal(t, after); got != (outcome{"LIQUIDADA", ""}) {
			t.Fatalf("transfer after the attempt: %+v, want LIQUIDADA", got)
		}
		balances[acct("A")] -= 100
		balances[acct("B")] += 100
		if diff := cmp.Diff(balances, s.balances(t, balances)); diff != "" {
			t.Errorf("balances mismatch (-want +got):\n%s", diff)
		}
		var processed int
		if err := s.ledger.db.QueryRow(context.Background(),
			`SELECT count(*) FROM processed_transfer WHERE transfer_id = $1`, forged.TransferID).Scan(&processed); err != nil {
			t.Fatal(err)
		}
		if processed != 0 {
			t.Errorf("the ledger processed the forged transfer %s", forged.TransferID)
		}
	})
}

type outcome struct{ Status, Reason string }

func (s *suite) transfer(tb testing.TB, from, to string, cents int64) string {
	tb.Helper()
	key := uuid.NewString()
	must(tb, http.MethodPost, s.transfers.url+"/transferencias", key,
		map[string]any{"contaOrigem": from, "contaDestino": to, "valorEmCentavos": cents, "moeda": "BRL"}, nil, http.StatusAccepted)
	return key
}

func (s *suite) waitTerminal(tb testing.TB, id string) outcome {
	tb.Helper()
	var o outcome
	poll.Until(tb, 2*time.Minute, "transfer "+id+" terminal", func() (bool, string) {
		var tr struct {
			Status string `json:"status"`
			Reason string `json:"motivo"`
		}
		status, body, err := call(context.Background(), http.MethodGet, s.transfers.url+"/transferencias/"+id, "", nil)
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &tr) != nil {
			return false, fmt.Sprintf("%d %s %v", status, body, err)
		}
		o = outcome{tr.Status, tr.Reason}
		return tr.Status != "PENDENTE", tr.Status
	})
	return o
}

func (s *suite) balances(tb testing.TB, accounts map[string]int64) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	for id := range accounts {
		var a struct {
			Balance int64 `json:"saldoEmCentavos"`
		}
		must(tb, http.MethodGet, s.ledger.url+"/contas/"+url.PathEscape(id), "", nil, &a, http.StatusOK)
		out[id] = a.Balance
	}
	return out
}

// produce writes msgs with the suite's producer (broker.NewProducer) and
// the credential of cfg, and returns the broker's answer for them
// (broker.PublishErrors unwrapped).
func produce(cfg broker.Config, msgs ...kafka.Message) error {
	p, err := broker.NewProducer(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]broker.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = kafkatest.Record(m)
	}
	err = p.Publish(ctx, recs...)
	var perrs broker.PublishErrors
	if errors.As(err, &perrs) {
		return errors.Join(perrs...)
	}
	return err
}

// produceRaw sends msg in one produce request to partition of topic on the
// (single) broker, with the credential of cfg and no metadata lookup, so
// that only the broker's authorizer stands between the record and the log.
func produceRaw(cfg broker.Config, topic string, partition int, msg kafka.Message) error {
	host, port, err := net.SplitHostPort(cfg.Brokers[0])
	if err != nil {
		return err
	}
	portN, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := cfg.Dialer().DialPartition(ctx, "tcp", cfg.Brokers[0], kafka.Partition{
		Topic: topic, ID: partition, Leader: kafka.Broker{Host: host, Port: portN, ID: 1},
	})
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		return err
	}
	if err := conn.SetRequiredAcks(-1); err != nil {
		return err
	}
	_, err = conn.WriteMessages(kafka.Message{Key: msg.Key, Value: msg.Value, Headers: msg.Headers})
	return err
}

// endOffsets reads the end offset of each partition of topic as admin.
func endOffsets(tb testing.TB, topic string) map[int]int64 {
	tb.Helper()
	cfg := sb.Config(kafkatest.SecuredAdmin)
	tr := cfg.Transport()
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 15 * time.Second}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	resp, err := c.ListOffsets(context.Background(), req)
	if err != nil {
		tb.Fatalf("list offsets of %s: %v", topic, err)
	}
	out := map[int]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			tb.Fatalf("list offsets of %s/%d: %v", topic, po.Partition, po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	return out
}

func shortID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
