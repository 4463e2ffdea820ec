//go:build debezium

package debezium

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// The three ways from the outbox to the topic, in the order each benchmark
// runs them, on the same servers in the same run.
var modes = []string{"polling", "logical", "debezium"}

// arrivals consumes a topic from its start and records when each event
// (by its evento-id header) was first readable there: the same "ack" for
// the relays and for Debezium, whose broker acknowledgements this test
// cannot see.
type arrivals struct {
	mu sync.Mutex
	at map[string]time.Time
}

func watch(b *testing.B, topic string) *arrivals {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkatest.Brokers(b)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	a := &arrivals{at: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			a.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				for _, h := range r.Headers {
					if h.Key == events.HeaderEventID {
						if _, seen := a.at[string(h.Value)]; !seen {
							a.at[string(h.Value)] = now
						}
					}
				}
			})
			a.mu.Unlock()
		}
	}()
	b.Cleanup(func() { cancel(); <-done; cl.Close() })
	return a
}

// of returns how many of ids arrived and the first and last arrival.
func (a *arrivals) of(ids []string) (n int, first, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		at, ok := a.at[id]
		if !ok {
			continue
		}
		n++
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return n, first, last
}

func (a *arrivals) wait(b *testing.B, ids []string, within time.Duration) {
	b.Helper()
	poll.Until(b, within, fmt.Sprintf("%d events readable on the topic", len(ids)), func() (bool, string) {
		n, _, _ := a.of(ids)
		return n == len(ids), fmt.Sprintf("%d readable", n)
	})
}

type env struct {
	db     *postgres.DB
	ob     *outbox.Outbox
	topic  string
	writer *kafkatest.Writer
}

// newEnv returns a fresh database and a fresh topic of 12 partitions, as
// the suite's topics have, every partition accepting writes.
func newEnv(b *testing.B) *env {
	b.Helper()
	db := openDB(b)
	w := kafkatest.NewWriter(b, broker.Config{Brokers: kafkatest.Brokers(b)})
	b.Cleanup(func() { _ = w.Close() })
	e := &env{db: db, ob: outbox.New(db), topic: kafkatest.Topic(b, "dbzbench", 12), writer: w}
	msgs := make([]kafka.Message, 16*12)
	for i := range msgs {
		msgs[i] = kafka.Message{Topic: e.topic, Key: []byte("warm-up-" + strconv.Itoa(i)), Value: []byte(`{}`)}
	}
	poll.Until(b, time.Minute, "every partition of "+e.topic+" accepting writes", func() (bool, string) {
		err := w.WriteMessages(context.Background(), msgs...)
		return err == nil, fmt.Sprint(err)
	})
	return e
}

// enqueueBulk commits n events, 1,000 per transaction, over 1,000 keys,
// and returns their ids.
func (e *env) enqueueBulk(b *testing.B, n int) []string {
	b.Helper()
	ids := make([]string, 0, n)
	for done := 0; done < n; {
		k := min(1000, n-done)
		msgs := make([]events.Message, k)
		for i := range msgs {
			id := uuid.New()
			ids = append(ids, id.String())
			msgs[i] = events.Message{ID: id, Topic: e.topic, Key: "CC-" + strconv.Itoa((done+i)%1000), Type: "Bench",
				Payload: []byte(`{"transferenciaId":"00000000-0000-0000-0000-000000000000","valorEmCentavos":30000}`)}
		}
		if err := e.db.InTx(context.Background(), func(tx pgx.Tx) error { return e.ob.Enqueue(context.Background(), tx, msgs...) }); err != nil {
			b.Fatal(err)
		}
		done += k
	}
	return ids
}

// runRelay runs the polling or the logical relay of e until b ends; the
// logical one is streaming when it returns.
func (e *env) runRelay(b *testing.B, mode string, batch int) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := slog.New(slog.DiscardHandler)
	if mode == "logical" {
		dropSlotOnCleanup(b, e.db)
		r := outbox.NewLogicalRelay(e.ob, e.writer, outbox.LogicalConfig{}, outbox.RelayConfig{BatchSize: batch}, log, nil, nil)
		go func() { defer close(done); _ = r.Run(ctx) }()
		b.Cleanup(func() { cancel(); <-done })
		poll.True(b, time.Minute, "the logical relay streams", r.Active)
		return
	}
	cfg := outbox.RelayConfig{BatchSize: batch, Workers: 2, PollInterval: 50 * time.Millisecond}
	go func() { defer close(done); _ = outbox.NewRelay(e.ob, e.writer, cfg, log, nil).Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
}

// logicalSlotReady creates the logical relay's slot (a relay run until it
// streams, publishing nothing) and stops it, so that events enqueued next
// wait in the slot, as they wait in the table for the polling relay.
func (e *env) logicalSlotReady(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := outbox.NewLogicalRelay(e.ob, nullPublisher{}, outbox.LogicalConfig{}, outbox.RelayConfig{}, slog.New(slog.DiscardHandler), nil, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	poll.True(b, time.Minute, "the logical relay streams", r.Active)
	cancel()
	<-done
}

type nullPublisher struct{}

func (nullPublisher) Publish(context.Context, ...broker.Record) error { return nil }

func dropSlotOnCleanup(b *testing.B, db *postgres.DB) {
	slot := outbox.SlotFor(db.Config().ConnConfig.Database, "paysuite_outbox")
	b.Cleanup(func() {
		poll.True(b, 30*time.Second, "the slot dropped", func() bool {
			_, err := db.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
			return err == nil
		})
	})
}

// debeziumWarm starts Connect on e and passes 10,000 events through it
// first: the worker's JIT warms up before the clock starts, as a deployed
// worker's has.
func (e *env) debeziumWarm(b *testing.B, arr *arrivals) *connectWorker {
	b.Helper()
	w := startConnect(b, e.db, nil)
	arr.wait(b, e.enqueueBulk(b, 10_000), 5*time.Minute)
	return w
}

// BenchmarkDebeziumThroughput measures events/s draining a backlog of N
// events (-benchtime=Nx; 1,000 keys, 1,000 per transaction) for the polling
// relay (batch 1,000, 2 workers), the logical relay (batch 1,000) and
// Debezium, in that order, on the same servers. Every case is timed the
// same way, from the first to the last of the N events readable on the
// topic, so that neither a relay's nor the Connect worker's start counts.
// The backlog waits in the table (polling), in the slot of a stopped relay
// (logical) or of a stopped connector (debezium; Connect's REST stop and
// resume, after a warm-up).
func BenchmarkDebeziumThroughput(b *testing.B) {
	rates := map[string]float64{}
	for _, mode := range modes {
		b.Run(mode, func(b *testing.B) {
			n := max(b.N, 1000)
			e := newEnv(b)
			arr := watch(b, e.topic)
			var w *connectWorker
			switch mode {
			case "logical":
				e.logicalSlotReady(b)
			case "debezium":
				w = e.debeziumWarm(b, arr)
				w.stopConnector()
			}
			ids := e.enqueueBulk(b, n)
			b.ResetTimer()
			if w != nil {
				w.resumeConnector()
			} else {
				e.runRelay(b, mode, 1000)
			}
			arr.wait(b, ids, 10*time.Minute)
			b.StopTimer()
			_, first, last := arr.of(ids)
			rate := float64(n-1) / last.Sub(first).Seconds()
			rates[mode] = rate
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(0, "ns/op")
			if mode == "debezium" {
				for _, m := range []string{"polling", "logical"} {
					if r := rates[m]; r > 0 {
						b.ReportMetric(r/rate, m+"/debezium")
					}
				}
			}
		})
	}
}

// BenchmarkDebeziumLatency offers 2,000 events/s (one event per
// transaction, from 24 producers, 1,000 keys) for a second of warm-up and
// then N events (-benchtime=Nx), and reports over the N the p50 and p99 of
// enqueue-commit to the event being readable on the topic (12 partitions),
// for the polling relay
// (batch 500, 2 workers), the logical relay (batch 500) and Debezium (after
// a warm-up), in that order, on the same servers.
func BenchmarkDebeziumLatency(b *testing.B) {
	const rate = 2000
	p99s := map[string]float64{}
	for _, mode := range modes {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b)
			arr := watch(b, e.topic)
			if mode == "debezium" {
				e.debeziumWarm(b, arr)
			} else {
				e.runRelay(b, mode, 500)
			}
			n := max(b.N, 2000)
			// The first second of offered load warms the relay, the
			// producers' connections and the broker up: its events are
			// sent, not measured.
			const warm = rate
			total := n + warm
			committed := make(map[string]time.Time, n)
			var mu sync.Mutex
			var wg sync.WaitGroup
			const producers = 24
			b.ResetTimer()
			start := time.Now()
			for p := range producers {
				wg.Go(func() {
					interval := time.Second * producers / rate
					next := start.Add(time.Duration(p) * interval / producers)
					for i := p; i < total; i += producers {
						if d := time.Until(next); d > 0 {
							// Pacing the offered load, not waiting for a result.
							time.Sleep(d)
						}
						next = next.Add(interval)
						id := uuid.New()
						err := e.db.InTx(context.Background(), func(tx pgx.Tx) error {
							return e.ob.Enqueue(context.Background(), tx, events.Message{ID: id, Topic: e.topic,
								Key: "CC-" + strconv.Itoa(i%1000), Type: "Bench", Payload: []byte(`{"n":1}`)})
						})
						if err != nil {
							b.Error(err)
							return
						}
						if i < warm {
							continue
						}
						mu.Lock()
						committed[id.String()] = time.Now()
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			offered := float64(total) / time.Since(start).Seconds()
			ids := make([]string, 0, n)
			for id := range committed {
				ids = append(ids, id)
			}
			arr.wait(b, ids, 5*time.Minute)
			b.StopTimer()
			arr.mu.Lock()
			lat := make([]float64, 0, n)
			for id, c := range committed {
				lat = append(lat, float64(max(arr.at[id].Sub(c), 0))/float64(time.Millisecond))
			}
			arr.mu.Unlock()
			sort.Float64s(lat)
			p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
			p99s[mode] = p99
			b.ReportMetric(offered, "offered/s")
			b.ReportMetric(p50, "p50_ms")
			b.ReportMetric(p99, "p99_ms")
			b.ReportMetric(0, "ns/op")
			if mode == "debezium" {
				for _, m := range []string{"polling", "logical"} {
					if p := p99s[m]; p > 0 {
						b.ReportMetric(p99/p, "p99_debezium/"+m)
					}
				}
			}
		})
	}
}
