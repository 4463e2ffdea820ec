package transfers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// With every connection of the service's pool taken by a POST stuck in its
// transaction (the table it inserts into is locked), the relay still
// publishes, on its pool of its own, and admission control still reads the
// outbox backlog, on its connection of its own, and sheds: a new POST is
// answered 503 overloaded at once. Through the service's pool, the relay
// would publish nothing and the refresh would wait for the stuck POST's
// connection until its request timeout, shedding nothing meanwhile.
func TestAdmissionReadsTheBacklogWithThePoolTaken(t *testing.T) {
	t.Parallel()
	s := startOn(t, pgtest.NewDSN(t, migrations.ForService(transfers.Service)...), func(c *transfers.Config) {
		c.DBMaxConns = 1
		c.RequestTimeout = 30 * time.Second
		c.AdmissionMaxAge = 2 * time.Second
		c.AdmissionRefresh = 100 * time.Millisecond
	})
	ctx := context.Background()
	other, release, stuck := stuckPost(t, s, "transferencia")
	// An event committed now is published by the relay.
	sent := uuid.New()
	if _, err := other.Exec(ctx, `INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, occurred_at)
VALUES ($1, 'transfer', $2, $3, 'sent', 'test', '{}', now())`, sent, sent.String(), s.topics.Requested); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the relay to publish with the pool taken", func() (bool, string) {
		var status string
		err := other.QueryRow(ctx, "SELECT status FROM outbox_event WHERE id = $1", sent).Scan(&status)
		return err == nil && status == "PUBLISHED", fmt.Sprint(status, err)
	})
	// An event older than the bound, waiting for a retry an hour away: the
	// backlog stays older than the bound.
	id := uuid.New()
	if _, err := other.Exec(ctx, `INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, occurred_at, enqueued_at, attempts, next_attempt_at)
VALUES ($1, 'transfer', $2, $3, 'k', 'test', '{}', now(), now() - interval '1 minute', 1, now() + interval '1 hour')`, id, id.String(), s.topics.Requested); err != nil {
		t.Fatal(err)
	}
	// Within a fraction of the first POST's 30 s: the pool's one
	// connection stays taken all along.
	poll.Until(t, 5*time.Second, "admission control to shed", func() (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/metrics", nil)
		if err != nil {
			return false, err.Error()
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return err == nil && strings.Contains(string(b), "\ntransfers_admission_shedding 1\n"), "not shedding"
	})
	// While shedding, the client's fair share still admits a request a
	// second, which waits for the pool like the first: of three at once,
	// the others are answered 503 overloaded without waiting.
	answers := make(chan string, 3)
	for range 3 {
		go func() {
			st, b, err := s.tryPost(uuid.NewString())
			var p struct{ Type string }
			_ = json.Unmarshal(b, &p)
			if err == nil && st == http.StatusServiceUnavailable && p.Type == httpapi.TypeURI(errkind.Overloaded) {
				answers <- ""
				return
			}
			answers <- fmt.Sprintf("%d %s %v", st, b, err)
		}()
	}
	select {
	case a := <-answers:
		if a != "" {
			t.Errorf("the first answer while shedding: %s, want 503 overloaded", a)
		}
	case <-time.After(5 * time.Second):
		t.Error("no POST answered within 5 s while shedding: want 503 overloaded at once")
	}
	release()
	<-answers
	<-answers
	<-stuck
}

// stuckPost takes the service's pool, of one connection, with a POST stuck
// in its transaction: it locks table IN SHARE MODE (the POST's insert
// waits, every read goes through), sends the POST and waits until its
// backend waits for the lock. It returns a connection of the test's own,
// release, which rolls the lock back, and the POST's status once answered.
func stuckPost(t *testing.T, s *service, table string) (other *pgx.Conn, release func(), stuck <-chan int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	lock, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(ctx) }) // released by the test; this covers a failed one
	if _, err := lock.Exec(ctx, "LOCK TABLE "+table+" IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	go func() {
		st, _, _ := s.tryPost(uuid.NewString())
		answered <- st
	}()
	other, err = pgx.Connect(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(ctx) })
	poll.Until(t, 10*time.Second, "the POST to wait for the lock", func() (bool, string) {
		var n int
		err := other.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n >= 1, "no backend waiting for a lock"
	})
	release = func() {
		if err := lock.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return other, release, answered
}

// tryPost sends a POST /transferencias of 100 from conta-a to conta-b
// under key, from any goroutine (send).
func (s *service) tryPost(key string) (int, []byte, error) {
	status, _, b, err := s.send(http.MethodPost, "/transferencias",
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}, body("conta-a", "conta-b", 100))
	return status, b, err
}

// With every connection of the service's pool taken by a POST stuck in its
// transaction (the outbox table it inserts into is locked), the projection
// still applies a result, on its pool of its own: the transfer posted
// before is LIQUIDADA within seconds. Through the service's pool, the
// result would wait for the stuck POST's connection until its request
// timeout, and admission control, told what settles, would read the flow
// as falling behind.
func TestProjectionSettlesWithThePoolTaken(t *testing.T) {
	t.Parallel()
	s := startOn(t, pgtest.NewDSN(t, migrations.ForService(transfers.Service)...), func(c *transfers.Config) {
		c.DBMaxConns = 1
		c.RequestTimeout = 30 * time.Second
	})
	settled := uuid.NewString()
	s.post(t, settled, body("CC-001", "CC-002", 100), nil)
	ctx := context.Background()
	// The lock on the outbox lets the projection's writes, which touch no
	// outbox row, through.
	other, release, stuck := stuckPost(t, s, "outbox_event")
	w := kafkatest.NewWriter(t, broker.Config{Brokers: s.brokers})
	defer w.Close()
	id := uuid.MustParse(settled)
	produce(t, w, s.topics.Settled, events.TypeSettled, events.Settled{EventID: events.DerivedID(events.KindSettled, id), TransferID: id, OccurredAt: time.Now().UTC()})
	// Within a fraction of the stuck POST's 30 s: the pool's one
	// connection stays taken all along. Read on a connection of the test's
	// own: a GET would wait for the pool too.
	poll.Until(t, 10*time.Second, "the projection to settle with the pool taken", func() (bool, string) {
		var status string
		err := other.QueryRow(ctx, "SELECT status FROM transferencia WHERE id = $1", id).Scan(&status)
		return err == nil && status == "LIQUIDADA", fmt.Sprint(status, err)
	})
	release()
	if st := <-stuck; st != http.StatusAccepted {
		t.Errorf("the POST stuck behind the lock, once released: %d, want 202", st)
	}
}
