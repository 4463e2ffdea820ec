package observability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// consumerUnderTest is one consumer as the read_committed check drives it:
// the topic and group it reads, a record about a transfer, and whether the
// consumer applied a record about that transfer.
type consumerUnderTest struct {
	topic, group string
	input        func(id uuid.UUID) kafka.Message
	applied      func(id uuid.UUID) (bool, error)
}

// consumedTopics returns, for each service, the topics its consumer reads
// (every consumer of the suite but the ledger's DLT monitor, which reads
// what the ledger's own consumer dead-letters).
func consumedTopics(h *harness) []string {
	switch h.service {
	case "transfers", "notifications":
		return []string{h.topics.Settled, h.topics.Rejected}
	case "ledger":
		return []string{h.topics.Analysed}
	default:
		return []string{h.topics.Requested}
	}
}

// readCommittedConsumers builds, per service, the record each consumed topic
// takes and the trace its consumer leaves once it applied one: the
// transfer's status (transfers, after a POST that creates it), the
// settlement row (ledger), the decision row (antifraud), the notification
// row (notifications).
var readCommittedConsumers = map[string]func(t *testing.T, h *harness, topic string) consumerUnderTest{
	"transfers": func(t *testing.T, h *harness, topic string) consumerUnderTest {
		return consumerUnderTest{
			input: func(id uuid.UUID) kafka.Message {
				h.expectStatus(http.StatusAccepted, http.MethodPost, "/transferencias", map[string]string{
					"Content-Type": "application/json", "Idempotency-Key": id.String(),
				}, `{"contaOrigem":"CC-OBS-1","contaDestino":"CC-OBS-2","valorEmCentavos":100,"moeda":"BRL"}`)
				if topic == h.topics.Rejected {
					return rejected(topic, id, events.ReasonInsufficientFunds)
				}
				return settled(topic, id)
			},
			applied: func(id uuid.UUID) (bool, error) {
				status, _, body := h.do(http.MethodGet, "/transferencias/"+id.String(), nil, "")
				if status != http.StatusOK {
					return false, fmt.Errorf("GET /transferencias/%s = %d %s", id, status, body)
				}
				return !strings.Contains(string(body), `"PENDENTE"`), nil
			},
		}
	},
	"ledger": func(t *testing.T, h *harness, topic string) consumerUnderTest {
		return consumerUnderTest{
			// Accounts nobody opened: a rejection is a settlement too.
			input:   func(id uuid.UUID) kafka.Message { return h.analysed(id, "CC-RC-1", "CC-RC-2", 100) },
			applied: h.rowAbout(`SELECT count(*) FROM processed_transfer WHERE transfer_id = $1`),
		}
	},
	"antifraud": func(t *testing.T, h *harness, topic string) consumerUnderTest {
		return consumerUnderTest{
			input:   func(id uuid.UUID) kafka.Message { return requested(topic, id, "CC-RC-1", "CC-RC-2", 100) },
			applied: h.rowAbout(`SELECT count(*) FROM decision WHERE transfer_id = $1`),
		}
	},
	"notifications": func(t *testing.T, h *harness, topic string) consumerUnderTest {
		return consumerUnderTest{
			input: func(id uuid.UUID) kafka.Message {
				if topic == h.topics.Rejected {
					return rejected(topic, id, events.ReasonInsufficientFunds)
				}
				return settled(topic, id)
			},
			applied: h.rowAbout(`SELECT count(*) FROM notification WHERE transfer_id = $1`),
		}
	},
}

// rowAbout says whether query (counting rows about transfer $1) finds one.
func (h *harness) rowAbout(query string) func(id uuid.UUID) (bool, error) {
	return func(id uuid.UUID) (bool, error) {
		var n int
		err := h.pool.QueryRow(context.Background(), query, id).Scan(&n)
		return n > 0, err
	}
}

// TestConsumersReadCommitted is the read_committed check, once, against
// every consumer of the suite: each service runs on its own database and
// topics, a record in an aborted Kafka transaction and then one in a
// committed transaction reach each topic its consumer reads, and the
// committed one must be applied, the aborted one never, the group's offset
// must move past both transaction markers, and nothing may be
// dead-lettered. It is not parallel with the package's other tests: four
// more services at once would slow TestServiceObservability's, whose
// transfers service sheds requests when its flow runs late.
func TestConsumersReadCommitted(t *testing.T) {
	for _, service := range serviceNames {
		t.Run(service, func(t *testing.T) {
			t.Parallel()
			h := start(t, service)
			parent := t
			for _, topic := range consumedTopics(h) {
				t.Run(topic, func(t *testing.T) {
					h.t = t
					defer func() { h.t = parent }()
					c := readCommittedConsumers[service](t, h, topic)
					c.topic, c.group = topic, h.group
					if err := readsCommittedOnly(t, c); err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					dead, err := dlt.List(ctx, broker.Config{Brokers: h.brokers}, dlt.Filter{Topic: events.DLT(topic)})
					if err != nil {
						t.Fatal(err)
					}
					if len(dead) != 0 {
						t.Errorf("%d records dead-lettered, want none: %+v", len(dead), dead)
					}
				})
			}
		})
	}
}

// readsCommittedOnly writes a record about one transfer in an aborted
// transaction, then a record about another in a committed transaction, on
// partition 0 of c.topic, and returns an error unless c applies the
// committed one, never the aborted one, and its group commits past both
// transaction markers. The consumer handles a partition in order, so once
// the committed record (the later offset) is applied, the aborted one was
// either skipped or applied before it.
func readsCommittedOnly(tb testing.TB, c consumerUnderTest) error {
	tb.Helper()
	aborted, committed := uuid.New(), uuid.New()
	prod := kafkatest.NewProducer(tb)
	abortedRecord, committedRecord := c.input(aborted), c.input(committed)
	prod.Aborted(abortedRecord)
	prod.Committed(committedRecord)

	var lookErr error
	look := func(id uuid.UUID) bool {
		ok, err := c.applied(id)
		if err != nil {
			lookErr = err
		}
		return ok
	}
	if !poll.Wait(wait, poll.Interval, func() bool { return look(committed) }) {
		return fmt.Errorf("the record of the committed transaction was not applied within %v (last error: %v)", wait, lookErr)
	}
	abortedApplied := func() error {
		ok, err := c.applied(aborted)
		if err != nil {
			return err
		}
		if ok {
			return errors.New("the record of an aborted transaction was applied: the consumer reads uncommitted records")
		}
		return nil
	}
	if err := abortedApplied(); err != nil {
		return err
	}
	var last kafkatest.Offsets
	if !poll.Wait(wait, poll.Interval, func() bool {
		last = kafkatest.GroupOffsets(tb, c.group, c.topic, 0)
		return last.Committed == last.End
	}) {
		return fmt.Errorf("the group did not commit past the transaction markers within %v: %+v", wait, last)
	}
	return abortedApplied()
}

// The check catches a consumer that reads uncommitted records: a consumer
// group reading with kafka-go at read_uncommitted, applying each record
// it gets, fails it.
func TestReadsCommittedOnlyCatchesAReadUncommittedConsumer(t *testing.T) {
	t.Parallel()
	topic := kafkatest.Topic(t, "observability.uncommitted", 1)
	group := kafkatest.Group(t, "observability-uncommitted")
	var mu sync.Mutex
	seen := map[string]bool{}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(t), GroupID: group, Topic: topic,
		IsolationLevel: kafka.ReadUncommitted, MaxWait: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			seen[string(m.Key)] = true
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = r.Close()
	})
	err := readsCommittedOnly(t, consumerUnderTest{
		topic: topic, group: group,
		input: func(id uuid.UUID) kafka.Message {
			return kafka.Message{Topic: topic, Key: []byte(id.String()), Value: []byte("{}")}
		},
		applied: func(id uuid.UUID) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return seen[id.String()], nil
		},
	})
	if err == nil || !strings.Contains(err.Error(), "aborted transaction was applied") {
		t.Fatalf("readsCommittedOnly = %v, want the aborted record reported as applied", err)
	}
}
