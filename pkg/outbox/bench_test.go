package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// seedRelay is the relay of seeds/003 (OutboxRelay.publicarPendentes), kept
// as the benchmark baseline: every 200 ms (fixed delay), one transaction
// selects 100 unpublished rows FOR UPDATE SKIP LOCKED, sends them, waits for
// the acks while holding the transaction, marks them published and commits.
type seedRelay struct {
	db  *postgres.DB
	pub broker.Publisher
}

func (s *seedRelay) run(ctx context.Context) {
	for ctx.Err() == nil {
		_ = s.db.InTx(ctx, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				SELECT id, topic, key, event_type, payload FROM outbox_event
				 WHERE status = 'PENDING' ORDER BY enqueued_at LIMIT 100 FOR UPDATE SKIP LOCKED`)
			if err != nil {
				return err
			}
			var ids []uuid.UUID
			var msgs []broker.Record
			for rows.Next() {
				var id uuid.UUID
				var topic, key, typ string
				var payload []byte
				if err := rows.Scan(&id, &topic, &key, &typ, &payload); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
				msgs = append(msgs, broker.Record{Topic: topic, Key: []byte(key), Value: payload, Headers: []broker.Header{
					{Key: events.HeaderEventID, Value: []byte(id.String())}, {Key: events.HeaderEventType, Value: []byte(typ)}}})
			}
			if err := rows.Err(); err != nil || len(ids) == 0 {
				return err
			}
			if err := s.pub.Publish(ctx, msgs...); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE outbox_event SET status = 'PUBLISHED', published_at = now() WHERE id = ANY($1)`, ids)
			return err
		})
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ackClock wraps a publisher and records when each event was first
// acknowledged. A call that fails for some records only (broker.PublishErrors:
// a fresh topic's leaders still moving, say) still acknowledged the others,
// and the relay marks those published and never sends them again.
type ackClock struct {
	next broker.Publisher
	mu   sync.Mutex
	at   map[string]time.Time
}

func (a *ackClock) Publish(ctx context.Context, msgs ...broker.Record) error {
	err := a.next.Publish(ctx, msgs...)
	now := time.Now()
	var werrs broker.PublishErrors
	partial := errors.As(err, &werrs) && len(werrs) == len(msgs)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, m := range msgs {
		if err == nil || (partial && werrs[i] == nil) {
			id := kafkatest.Header(m, events.HeaderEventID)
			if _, seen := a.at[id]; !seen {
				a.at[id] = now
			}
		}
	}
	return err
}

func (a *ackClock) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

type benchEnv struct {
	db     *postgres.DB
	ob     *outbox.Outbox
	topic  string
	writer broker.Publisher
}

// The producers BenchmarkProducerChoice compares: kafka-go's Writer
// (kafkaGoWriter) and franz-go's producer (broker.NewProducer), the suite's.
const (
	kafkaGo = "kafka-go"
	franzGo = "franz-go"
)

// newBenchEnv returns a fresh database and a fresh topic of partitions
// partitions (the suite's topics have 12), with the suite's producer.
func newBenchEnv(b *testing.B, partitions int) *benchEnv {
	return newBenchEnvWith(b, partitions, franzGo)
}

// newBenchEnvWith is newBenchEnv with the producer named.
func newBenchEnvWith(b *testing.B, partitions int, producer string) *benchEnv {
	b.Helper()
	// The test servers commit asynchronously (synchronous_commit=off), which
	// makes tests fast; production commits synchronously, the default. A
	// walsender sends only WAL flushed to disk, so on the test servers the
	// logical relay would see a commit only when the WAL writer flushes it
	// (wal_writer_delay, 200 ms): a cost of the test set-up, not of the
	// relay. The benchmarks' sessions commit as production does.
	db, err := postgres.Open(context.Background(), pgtest.NewDSN(b, migrations.Platform)+"&synchronous_commit=on", 30)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	kcfg := broker.Config{Brokers: kafkatest.Brokers(b)}
	var w broker.Publisher
	switch producer {
	case kafkaGo:
		kw := newKafkaGoWriter(kcfg)
		b.Cleanup(func() { _ = kw.w.Close() })
		w = kw
	case franzGo:
		p, err := broker.NewProducer(kcfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		w = p
	default:
		b.Fatalf("unknown producer %q", producer)
	}
	e := &benchEnv{db: db, ob: outbox.New(db), topic: kafkatest.Topic(b, "bench", partitions), writer: w}
	e.warmUp(b, partitions)
	return e
}

// warmUp writes to every partition of the fresh topic until the broker
// accepts a write to each: right after creation, a partition whose leader
// is in the metadata may still refuse records (NotLeaderForPartition) for a
// moment, and the relay retries those after its backoff (500 ms and more),
// so the latency benchmark would measure topic creation, not the relay.
func (e *benchEnv) warmUp(b *testing.B, partitions int) {
	b.Helper()
	msgs := make([]broker.Record, 16*partitions)
	for i := range msgs {
		msgs[i] = broker.Record{Topic: e.topic, Key: []byte("warm-up-" + strconv.Itoa(i)), Value: []byte(`{}`)}
	}
	poll.Until(b, time.Minute, "every partition of "+e.topic+" accepting writes", func() (bool, string) {
		err := e.writer.Publish(context.Background(), msgs...)
		return err == nil, fmt.Sprint(err)
	})
}

// enqueueBulk commits n events, 1,000 per transaction, over keys keys in
// round robin.
func (e *benchEnv) enqueueBulk(b *testing.B, n, keys int) {
	b.Helper()
	for done := 0; done < n; {
		k := min(1000, n-done)
		msgs := make([]events.Message, k)
		for i := range msgs {
			msgs[i] = events.Message{Topic: e.topic, Key: "CC-" + strconv.Itoa((done+i)%keys), Type: "Bench",
				Payload: []byte(`{"transferenciaId":"00000000-0000-0000-0000-000000000000","valorEmCentavos":30000}`)}
		}
		if err := e.db.InTx(context.Background(), func(tx pgx.Tx) error { return e.ob.Enqueue(context.Background(), tx, msgs...) }); err != nil {
			b.Fatal(err)
		}
		done += k
	}
}

// drain runs start until every one of n events was acknowledged and
// returns the elapsed time.
func drain(b *testing.B, clock *ackClock, n int, start func(ctx context.Context)) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	go start(ctx)
	poll.Until(b, 10*time.Minute, fmt.Sprintf("%d events acknowledged", n), func() (bool, string) {
		return clock.count() >= n, fmt.Sprintf("%d acknowledged", clock.count())
	})
	return time.Since(t0)
}

// BenchmarkRelayThroughput measures events/s from enqueued to acknowledged,
// for this relay at batch sizes 100 and 1,000 and for the seed-003 relay,
// on the same servers in the same run. Run with -benchtime=Nx: N events.
//
// The events go over 1,000 keys (source accounts), and, in the last case,
// over 100,000. With 1,000 keys a batch of 1,000 holds every key, so the
// relay's second worker finds every key held (per-key order) and the two
// never overlap; with more keys than a batch they do.
func BenchmarkRelayThroughput(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	var seedRate float64
	pollingRate := map[int]float64{} // by keys: batch1000's rate
	for _, tc := range []struct {
		name  string
		batch int
		seed  bool
		keys  int
	}{
		{"seed003", 100, true, 1000},
		{"batch100", 100, false, 1000},
		{"batch1000", 1000, false, 1000},
		{"batch1000-keys100k", 1000, false, 100_000},
		{"logical", 1000, false, 1000},
		{"logical-keys100k", 1000, false, 100_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := max(b.N, 1000)
			if tc.seed {
				n = min(n, 5000) // the seed relay moves ~450 events/s
			}
			e := newBenchEnv(b, 12)
			logical := strings.HasPrefix(tc.name, "logical")
			if logical {
				e.slotReady(b) // the backlog then waits in the slot, as it waits in the table for the others
			}
			e.enqueueBulk(b, n, tc.keys)
			clock := &ackClock{next: e.writer, at: map[string]time.Time{}}
			b.ResetTimer()
			elapsed := drain(b, clock, n, func(ctx context.Context) {
				if tc.seed {
					(&seedRelay{db: e.db, pub: clock}).run(ctx)
					return
				}
				if logical {
					_ = outbox.NewLogicalRelay(e.ob, clock, outbox.LogicalConfig{}, outbox.RelayConfig{BatchSize: tc.batch}, log, nil, nil).Run(ctx)
					return
				}
				cfg := outbox.RelayConfig{BatchSize: tc.batch, Workers: 2, PollInterval: 50 * time.Millisecond}
				_ = outbox.NewRelay(e.ob, clock, cfg, log, nil).Run(ctx)
			})
			b.StopTimer()
			rate := float64(n) / elapsed.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(0, "ns/op")
			if tc.seed {
				seedRate = rate
			} else if seedRate > 0 {
				b.ReportMetric(rate/seedRate, "x_seed")
			}
			if !logical {
				pollingRate[tc.keys] = rate
			} else if p := pollingRate[tc.keys]; p > 0 {
				b.ReportMetric(rate/p, "x_polling")
			}
		})
	}
}

// slotReady creates the database's logical slot (a logical relay run until
// it streams) and stops the relay, so that events enqueued next wait in the
// slot.
func (e *benchEnv) slotReady(b *testing.B) {
	b.Helper()
	dropSlotOf(b, e.db)
	ctx, cancel := context.WithCancel(context.Background())
	r := outbox.NewLogicalRelay(e.ob, nullPublisher{}, outbox.LogicalConfig{}, outbox.RelayConfig{}, slog.New(slog.DiscardHandler), nil, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	poll.True(b, time.Minute, "the logical relay streams", r.Active)
	cancel()
	<-done
}

// BenchmarkRelayLatency offers 2,000 events/s (one event per transaction,
// from 24 producers) for a second of warm-up and then the benchmark's
// duration, and reports, over the events after the warm-up, the p50 and
// p99 of enqueue-commit to broker acknowledgement, for this relay and for
// the seed-003 relay, on a topic of 12 partitions as the suite's are.
//
// relay-1partition is a diagnostic: the same relay on a topic of one
// partition. The kafka-go Writer sends one produce request per partition
// of a call, so a send of a few dozen records over 12 partitions costs 12
// requests; the difference between the two cases is that cost.
func BenchmarkRelayLatency(b *testing.B) {
	var seedP99 float64
	for _, tc := range []struct {
		name       string
		partitions int
	}{{"seed003", 12}, {"relay", 12}, {"relay-1partition", 1}, {"logical", 12}} {
		b.Run(tc.name, func(b *testing.B) {
			p99 := relayLatency(b, newBenchEnv(b, tc.partitions), strings.TrimSuffix(tc.name, "-1partition"))
			if tc.name == "seed003" {
				seedP99 = p99
			} else if seedP99 > 0 {
				b.ReportMetric(seedP99/p99, "x_seed_p99")
			}
		})
	}
}

// relayLatency runs BenchmarkRelayLatency's measurement on e for relay
// ("seed003", "relay" or "logical") and returns the p99 in milliseconds.
func relayLatency(b *testing.B, e *benchEnv, relay string) float64 {
	log := slog.New(slog.DiscardHandler)
	const rate = 2000
	clock := &ackClock{next: e.writer, at: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	switch relay {
	case "logical":
		dropSlotOf(b, e.db)
		r := outbox.NewLogicalRelay(e.ob, clock, outbox.LogicalConfig{}, outbox.RelayConfig{BatchSize: 500}, log, nil, nil)
		relayDone := make(chan struct{})
		go func() { defer close(relayDone); _ = r.Run(ctx) }()
		b.Cleanup(func() { cancel(); <-relayDone })
		poll.True(b, time.Minute, "the logical relay streams", r.Active)
	case "seed003":
		go (&seedRelay{db: e.db, pub: clock}).run(ctx)
	default:
		cfg := outbox.RelayConfig{BatchSize: 500, Workers: 2}
		go func() { _ = outbox.NewRelay(e.ob, clock, cfg, log, nil).Run(ctx) }()
	}
	n := max(b.N, 2000)
	// The first second of offered load warms the relay, the
	// producers' connections and the broker up: its events are
	// sent, not measured.
	const warm = rate
	total := n + warm
	duration := time.Duration(float64(total) / rate * float64(time.Second))
	committed := make(map[string]time.Time, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	const producers = 24
	b.ResetTimer()
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			interval := time.Second * producers / rate
			next := start.Add(time.Duration(p) * interval / producers)
			for i := p; i < total; i += producers {
				if d := time.Until(next); d > 0 {
					// Pacing the offered load, not waiting for a result.
					time.Sleep(d)
				}
				next = next.Add(interval)
				id := uuid.New()
				err := e.db.InTx(ctx, func(tx pgx.Tx) error {
					return e.ob.Enqueue(ctx, tx, events.Message{ID: id, Topic: e.topic, Key: "CC-" + strconv.Itoa(i%1000),
						Type: "Bench", Payload: []byte(`{"n":1}`)})
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
		}()
	}
	wg.Wait()
	offered := float64(total) / time.Since(start).Seconds()
	poll.Until(b, duration+time.Minute, fmt.Sprintf("%d events acknowledged", total), func() (bool, string) {
		return clock.count() >= total, fmt.Sprintf("%d acknowledged", clock.count())
	})
	b.StopTimer()
	clock.mu.Lock()
	var lat []float64
	for id, c := range committed {
		if a, ok := clock.at[id]; ok {
			lat = append(lat, float64(max(a.Sub(c), 0))/float64(time.Millisecond))
		}
	}
	clock.mu.Unlock()
	if len(lat) < n {
		b.Fatalf("%d of %d events acknowledged", len(lat), n)
	}
	sort.Float64s(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(offered, "offered/s")
	b.ReportMetric(p50, "p50_ms")
	b.ReportMetric(p99, "p99_ms")
	b.ReportMetric(0, "ns/op")
	return p99
}

// nullPublisher is not a broker: it acknowledges every record at once
// without sending it. BenchmarkRelayCeilings uses it to measure the relay's
// database side alone.
type nullPublisher struct{}

func (nullPublisher) Publish(context.Context, ...broker.Record) error { return nil }

// BenchmarkRelayCeilings splits the relay's throughput into its two halves,
// each measured alone on the same servers: "database" runs the relay (batch
// 1,000, 2 workers, 100,000 keys) with a publisher that acknowledges without
// sending (claim, lease and mark, no Kafka); "broker" sends the same records
// through the same kafka-go Writer from 2 goroutines, 1,000 per call, with no
// database. On a machine where both share the CPUs, the relay cannot beat
// either, and is bounded by about 1/(1/database + 1/broker).
func BenchmarkRelayCeilings(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	b.Run("database", func(b *testing.B) {
		n := max(b.N, 1000)
		e := newBenchEnv(b, 12)
		e.enqueueBulk(b, n, 100_000)
		clock := &ackClock{next: nullPublisher{}, at: map[string]time.Time{}}
		b.ResetTimer()
		elapsed := drain(b, clock, n, func(ctx context.Context) {
			cfg := outbox.RelayConfig{BatchSize: 1000, Workers: 2, PollInterval: 50 * time.Millisecond}
			_ = outbox.NewRelay(e.ob, clock, cfg, log, nil).Run(ctx)
		})
		b.StopTimer()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
		b.ReportMetric(0, "ns/op")
	})
	for _, senders := range []int{2, 1} {
		name := "broker"
		if senders == 1 {
			// The logical relay's broker half: one sender, a call after
			// the other.
			name = "broker-1sender"
		}
		b.Run(name, func(b *testing.B) { brokerCeiling(b, senders) })
	}
}

func brokerCeiling(b *testing.B, senders int) {
	brokerCeilingOf(b, newBenchEnv(b, 12), senders, max(b.N, 1000))
}

// brokerCeilingOf is the broker half of BenchmarkRelayCeilings on e's
// writer: n records from senders goroutines; it returns the events/s.
func brokerCeilingOf(b *testing.B, e *benchEnv, senders, n int) float64 {
	{
		msgs := make([]broker.Record, n)
		for i := range msgs {
			id := uuid.NewString()
			msgs[i] = broker.Record{Topic: e.topic, Key: []byte("CC-" + strconv.Itoa(i%100_000)),
				Value: []byte(`{"transferenciaId":"00000000-0000-0000-0000-000000000000","valorEmCentavos":30000}`),
				Headers: []broker.Header{{Key: events.HeaderEventID, Value: []byte(id)}, {Key: events.HeaderEventType, Value: []byte("Bench")},
					{Key: events.HeaderCorrelationID, Value: []byte(id)}}}
		}
		// The topic's leaders settle before the clock starts.
		if err := e.writer.Publish(context.Background(), msgs[:1]...); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, senders)
		for w := range senders {
			wg.Go(func() {
				for i := w * 1000; i < n; i += 1000 * senders {
					if err := e.writer.Publish(context.Background(), msgs[i:min(i+1000, n)]...); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		rate := float64(n) / elapsed.Seconds()
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(0, "ns/op")
		return rate
	}
}

// BenchmarkProducerChoice measures, on the same servers in one run, the two
// figures the suite's producer is chosen by, for kafka-go's Writer and for
// franz-go's producer: the relay's broker half (BenchmarkRelayCeilings's
// "broker", 10 x N records, 1,000 a call, from one sender as the logical relay
// sends and from two as the polling relay's workers do) and the
// enqueue-to-ack latency at 2,000 events/s on 12 partitions
// (BenchmarkRelayLatency) for both relays. franz-go's figures carry their
// ratio to kafka-go's (x_kafkago; for latency, kafka-go's p99 over
// franz-go's, so above 1 is better either way).
func BenchmarkProducerChoice(b *testing.B) {
	base := map[string]float64{}
	for _, tc := range []struct {
		name    string
		senders int    // broker half
		relay   string // latency
	}{{"broker-1sender", 1, ""}, {"broker-2senders", 2, ""}, {"latency-relay", 0, "relay"}, {"latency-logical", 0, "logical"}} {
		for _, producer := range []string{kafkaGo, franzGo} {
			b.Run(tc.name+"/"+producer, func(b *testing.B) {
				e := newBenchEnvWith(b, 12, producer)
				var x float64
				if tc.relay == "" {
					rate := brokerCeilingOf(b, e, tc.senders, 10*max(b.N, 1000))
					if producer == kafkaGo {
						base[tc.name] = rate
					} else if base[tc.name] > 0 {
						x = rate / base[tc.name]
					}
				} else {
					p99 := relayLatency(b, e, tc.relay)
					if producer == kafkaGo {
						base[tc.name] = p99
					} else if p99 > 0 {
						x = base[tc.name] / p99
					}
				}
				if x > 0 {
					b.ReportMetric(x, "x_kafkago")
				}
			})
		}
	}
}

// kafkaGoWriter is kafka-go's Writer with the settings the relays had on it,
// as a broker.Publisher: BenchmarkProducerChoice's baseline.
type kafkaGoWriter struct{ w *kafka.Writer }

func newKafkaGoWriter(cfg broker.Config) *kafkaGoWriter {
	return &kafkaGoWriter{&kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...), Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 2 * time.Millisecond, BatchSize: outbox.DefaultBatchSize, BatchBytes: 16 << 20,
		MaxAttempts: 3, WriteBackoffMin: 50 * time.Millisecond, WriteBackoffMax: 500 * time.Millisecond,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, Transport: cfg.Transport(),
	}}
}

func (k *kafkaGoWriter) Publish(ctx context.Context, recs ...broker.Record) error {
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafka.Message{Topic: r.Topic, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	err := k.w.WriteMessages(ctx, msgs...)
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		return broker.PublishErrors(werrs)
	}
	return err
}
