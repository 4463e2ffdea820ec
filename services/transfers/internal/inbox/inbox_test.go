package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/services/transfers/internal/inbox"
	"github.com/paysuite/payments/test/background"
	"github.com/paysuite/payments/test/kafkatest"
	"github.com/paysuite/payments/test/pgtest"
	"github.com/paysuite/payments/test/poll"
)

func newDB(t *testing.T) *postgres.DB {
	t.Helper()
	db := postgres.Wrap(pgtest.NewPool(t, migrations.Platform))
	if _, err := db.Exec(context.Background(), `CREATE TABLE effect (event_id uuid NOT NULL, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func effects(t *testing.T, db *postgres.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM effect`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProcessOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	dups := inbox.NewDuplicatesCounter(nil)
	ib := inbox.New(db, "test", dups)
	id := uuid.New()
	apply := func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO effect VALUES ($1, 1)`, id)
		return err
	}
	// 20 concurrent deliveries of one event: one applies, 19 are duplicates.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var applied, duplicates int
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dup, err := ib.Process(context.Background(), id, apply)
			if err != nil {
				t.Errorf("Process: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if dup {
				duplicates++
			} else {
				applied++
			}
		}()
	}
	wg.Wait()
	if applied != 1 || duplicates != 19 || effects(t, db) != 1 {
		t.Fatalf("applied=%d duplicates=%d effects=%d; want 1, 19, 1", applied, duplicates, effects(t, db))
	}
}

func TestProcessFailureRecordsNothing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ib := inbox.New(db, "test", nil)
	id := uuid.New()
	boom := errors.New("boom")
	_, err := ib.Process(context.Background(), id, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `INSERT INTO effect VALUES ($1, 1)`, id); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	// Not remembered: the redelivery applies.
	dup, err := ib.Process(context.Background(), id, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO effect VALUES ($1, 2)`, id)
		return err
	})
	if err != nil || dup || effects(t, db) != 1 {
		t.Fatalf("after failure: dup=%v err=%v effects=%d; want false, nil, 1", dup, err, effects(t, db))
	}
}

// 4. A consumer receives the same event id twice (through the real broker)
// and applies its effect once.
func TestDuplicateDeliveryThroughKafka(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "inbox", 1)
	w := kafkatest.NewWriter(t, kcfg)
	defer w.Close()
	id := uuid.New()
	rec := kafka.Message{Topic: topic, Key: []byte("CC-001"), Value: []byte(`{}`),
		Headers: []kafka.Header{{Key: events.HeaderEventID, Value: []byte(id.String())}}}
	last := kafka.Message{Topic: topic, Key: []byte("CC-001"), Value: []byte(`{}`),
		Headers: []kafka.Header{{Key: events.HeaderEventID, Value: []byte(uuid.NewString())}}}
	if err := w.WriteMessages(context.Background(), rec, rec, last); err != nil {
		t.Fatal(err)
	}
	ib := inbox.New(db, "test-consumer", nil)
	var mu sync.Mutex
	deliveries := 0
	task := background.Go(t, "consumer", func(ctx context.Context) error {
		return consumer.Run(ctx, consumer.Config{
			Broker: kcfg, Group: kafkatest.Group(t, "inbox"), Topics: []string{topic}, Publisher: w,
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(ctx context.Context, m broker.Record) error {
				mu.Lock()
				deliveries++
				mu.Unlock()
				eid, err := uuid.Parse(kafkatest.Header(m, events.HeaderEventID))
				if err != nil {
					return consumer.Permanent(err)
				}
				_, err = ib.Process(ctx, eid, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, 1)`, eid)
					return err
				})
				return err
			},
		})
	})
	poll.Until(t, 60*time.Second, "three deliveries", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return deliveries >= 3, fmt.Sprintf("%d deliveries", deliveries)
	})
	task.Stop(t)
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM effect WHERE event_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 || effects(t, db) != 2 {
		t.Fatalf("effects of the duplicated event = %d (total %d); want 1 (total 2)", n, effects(t, db))
	}
}

// Cleanup deletes processed-event rows older than the retention, of every
// consumer, in batches; newer rows stay, so their redeliveries are still
// duplicates.
func TestCleanup(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `
		INSERT INTO inbox_event (consumer, event_id, processed_at)
		SELECT c, gen_random_uuid(), now() - (d || ' days')::interval
		  FROM unnest(ARRAY['a', 'b']) c, unnest(ARRAY[1, 13, 15, 20, 30]) d`); err != nil {
		t.Fatal(err)
	}
	n, err := inbox.Cleanup(ctx, db, transfers.DefaultInboxRetention, 2)
	if err != nil || n != 6 {
		t.Fatalf("Cleanup = %d, %v; want 6", n, err)
	}
	var left []string
	rows, err := db.Query(ctx, `SELECT consumer || ':' || round(EXTRACT(EPOCH FROM now() - processed_at) / 86400) FROM inbox_event ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a:1", "a:13", "b:1", "b:13"}, left); diff != "" {
		t.Errorf("rows left (-want +got):\n%s", diff)
	}
}
