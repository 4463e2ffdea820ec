package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// While the handler's database is unreachable, its records wait it out
// (waitsOut); once the database is back, they are handled.
func testWaitsOutDatabaseOutage(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	dsn, proxy := netfault.PostgresURL(t, pgtest.NewDSN(t))
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE handled (v text PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	proxy.Cut() // the database "stops"
	waitsOut(t, pc, f, pool, "during a database outage", proxy.Restore)
}

// While the handler's database refuses writes as a standby does (SQLSTATE
// 25006: the pool reached a standby, or an old primary fenced read-only),
// its records wait as in an outage (waitsOut); once the pool reaches a
// server that takes writes (the promoted standby), they are handled.
func testWaitsOutReadOnlyDatabase(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	dsn := pgtest.NewDSN(t)
	setup, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = setup.Exec(context.Background(), `CREATE TABLE handled (v text PRIMARY KEY)`)
	_ = setup.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pool, promote := pgtest.StandbyPool(t, cfg)
	waitsOut(t, pc, f, pool, "while the database refused writes", promote)
}

// waitsOut writes a and b to f's topic, handles them by inserting into the
// table handled through pool, which cannot take writes until back is
// called, and checks the promise of a database outage: the records are
// neither dead-lettered nor forwarded to a retry topic, however long it
// lasts (well past the policy's attempts), b waits behind a, and no offset
// is committed; after back, both are handled and committed, and nothing
// is dead-lettered. during says when, in failure messages.
func waitsOut(t *testing.T, pc policyCase, f *fixture, pool *pgxpool.Pool, during string, back func()) {
	t.Helper()
	f.produce(t, "a", "b")
	rec := &recorder{}
	f.run(t, pc, func(ctx context.Context, m broker.Record) error {
		rec.record(string(m.Value))
		_, err := pool.Exec(ctx, `INSERT INTO handled (v) VALUES ($1) ON CONFLICT DO NOTHING`, string(m.Value))
		return err
	})
	// Far more tries than the policy allows a failing record.
	poll.True(t, 60*time.Second, "the record tried "+during, func() bool { return rec.count("a") >= 3*pc.attempts })
	if end := dltEnd(t, f); end != 0 {
		t.Fatalf("%d records dead-lettered %s", end, during)
	}
	if rt, ok := pc.policy.(consumer.RetryTopics); ok {
		for _, d := range rt.Delays {
			if end := lastOffset(t, f, broker.RetryTopic(f.topic, d)); end != 0 {
				t.Fatalf("%d records forwarded to %s %s", end, broker.RetryTopic(f.topic, d), during)
			}
		}
	}
	if n := rec.count("b"); n != 0 {
		t.Fatalf("b handled %d times while a waited: the partition must hold", n)
	}
	if off := committed(t, f); off > 0 {
		t.Fatalf("offset %d committed before any record was handled", off)
	}
	back()
	poll.True(t, 30*time.Second, "both records handled once the database takes writes", func() bool {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM handled`).Scan(&n)
		return n == 2
	})
	poll.True(t, 30*time.Second, "offsets committed after handling", func() bool { return committed(t, f) == 2 })
	if end := dltEnd(t, f); end != 0 {
		t.Errorf("%d records dead-lettered", end)
	}
}

func lastOffset(t *testing.T, f *fixture, topic string) int64 {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", f.kcfg.Brokers[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// committed returns the group's committed offset of partition 0 of the
// main topic (-1: none).
func committed(t *testing.T, f *fixture) int64 {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(f.kcfg.Brokers...)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: f.group, Topics: map[string][]int{f.topic: {0}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Topics[f.topic] {
		if p.Partition == 0 {
			return p.CommittedOffset
		}
	}
	return -1
}

// A record on a retry topic whose due time lies far beyond the policy's
// largest delay (a skewed clock, a forged header) does not stall its retry
// partition: it goes to the DLT of the retry topic's main topic as poison,
// whatever its original-topic header says (a forged or foreign record may
// have none, or name a topic that has no DLT), and the records behind it
// go on.
func TestRetryRecordDueTooFarAheadIsPoison(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		origin func(main string) string // the original-topic header; "" sends none
	}{
		{"origin header names the main topic", func(main string) string { return main }},
		{"no origin header", func(string) string { return "" }},
		{"origin header names a topic without a DLT", func(string) string { return "no-such-topic" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pc := policies[1]
			rt := pc.policy.(consumer.RetryTopics)
			f := newFixture(t, pc)
			retryTopic := broker.RetryTopic(f.topic, rt.Delays[0])
			due := func(at time.Time) []byte { return big.NewInt(at.UnixMilli()).Bytes() }
			rec := func(v string, at time.Time) kafka.Message {
				m := kafka.Message{Topic: retryTopic, Key: []byte("CC-001"), Value: []byte(v), Headers: []kafka.Header{
					{Key: events.HeaderEventID, Value: []byte("id-" + v)},
					{Key: dlt.HeaderRetryBackoffUntil, Value: due(at)},
				}}
				if o := tc.origin(f.topic); o != "" {
					m.Headers = append(m.Headers, kafka.Header{Key: dlt.HeaderDLTOriginalTopic, Value: []byte(o)})
				}
				return m
			}
			if err := f.writer.WriteMessages(context.Background(),
				rec("forged", time.Now().Add(time.Hour)), rec("honest", time.Now().Add(100*time.Millisecond))); err != nil {
				t.Fatal(err)
			}
			handled := &recorder{}
			f.run(t, pc, func(_ context.Context, m broker.Record) error { handled.record(string(m.Value)); return nil })
			dead := readDLT(t, f, 1)[0]
			if string(dead.Value) != "forged" || !strings.Contains(dlt.ExceptionMessage(dead), "ahead") {
				t.Errorf("DLT record %q (%s), want the forged one with its cause", dead.Value, dlt.ExceptionMessage(dead))
			}
			poll.True(t, 30*time.Second, "the honest retry handled", func() bool { return handled.count("honest") == 1 })
			if n := handled.count("forged"); n != 0 {
				t.Errorf("the forged record was handled %d times", n)
			}
		})
	}
}

// An attempt whose dependency never answers (a database that hangs) is cut
// off at AttemptTimeout and the record tried again, as after any outage,
// without counting as an attempt; with no such bound in reach, the record
// is not handled while the first attempt waits.
func TestAnAttemptThatHangsIsCutOffAndTriedAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		handled bool
		within  time.Duration
	}{
		{"bounded", 300 * time.Millisecond, true, 15 * time.Second},
		{"bound out of reach", time.Hour, false, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pc := policyCase{name: "attempt", policy: consumer.Blocking{Backoff: backoff.Exponential{Initial: 10 * time.Millisecond, Multiplier: 1, Max: 10 * time.Millisecond}, Retries: 0}}
			f := newFixture(t, pc)
			f.produce(t, "v1")
			var mu sync.Mutex
			var attempts []error
			handled, release := make(chan struct{}), make(chan struct{})
			h := func(ctx context.Context, _ broker.Record) error {
				mu.Lock()
				n := len(attempts)
				attempts = append(attempts, nil)
				mu.Unlock()
				if n == 0 {
					// The first attempt hangs until cut off (or, once the
					// test has seen it hang, released).
					err := errors.New("released")
					select {
					case <-ctx.Done():
						err = fmt.Errorf("query: %w", ctx.Err())
					case <-release:
					}
					mu.Lock()
					attempts[0] = err
					mu.Unlock()
					return err
				}
				close(handled)
				return nil
			}
			m := startMember(t, consumer.Config{
				Broker: f.kcfg, Group: f.group, Topics: []string{f.topic}, Handler: each(h), Policy: pc.policy,
				Publisher: f.writer, AttemptTimeout: tc.timeout,
			})
			select {
			case <-handled:
				if !tc.handled {
					t.Fatal("handled while the first attempt should still hang")
				}
			case <-time.After(tc.within):
				if tc.handled {
					mu.Lock()
					defer mu.Unlock()
					t.Fatalf("not handled within %v; attempts: %v", tc.within, attempts)
				}
			}
			close(release)
			m.stop(t)
			if tc.handled {
				// Retries: 0, yet a second attempt came: the cut-off one
				// counted as an outage, not as the record's failure.
				mu.Lock()
				defer mu.Unlock()
				if len(attempts) != 2 || !errors.Is(attempts[0], context.DeadlineExceeded) {
					t.Errorf("attempts %v; want a first one cut off by its deadline, then a second", attempts)
				}
			}
		})
	}
}
