package transfers_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// outboxIDRE finds the event id of an outbox row in test_decoding's text.
var outboxIDRE = regexp.MustCompile(`table public\.outbox_event: INSERT: id\[uuid\]:'([0-9a-f-]{36})'`)

// TestResultBeforeVisibility reproduces, on a PostgreSQL server of the
// test's own and the real broker, a settlement result that the projection
// consumes before the transfer it was decided for is visible, and shows the
// transfer reaches LIQUIDADA with no operator.
//
// How the result comes first, deterministically: the server's
// synchronous_standby_names names a standby that does not exist, so every
// commit on it is written and flushed locally but waits, invisible to other
// transactions, for an acknowledgement that never comes, as when the
// synchronous standby is down. The POST's transaction is in that wait; its
// TransferenciaSolicitada is already in the WAL, where logical decoding
// (what a logical relay reads) finds its event id. The ledger's result,
// bound to that request, goes to the broker; the running projection reads
// it, finds no visible transfer, and holds it (its own commit waits too:
// the test sees that statement waiting). Then the standby name is cleared:
// every waiting commit completes, and the re-apply task, not an operator,
// applies the held result once it sees the transfer with that request.
//
// Why this and not a timing race: nothing here depends on how fast a
// thread runs; each step waits for the state the next one needs (the
// probe commit, the POST's commit, the projection's statement seen waiting
// in pg_stat_activity). The server is the test's own (test/cluster), so
// stalling its commits stalls no other test.
func TestResultBeforeVisibility(t *testing.T) {
	t.Parallel()
	pgs := cluster.StartPG(t, "visibility", "-c", "wal_level=logical")
	pgs.CreateDB("transfers")
	s := startOn(t, pgs.DSN("transfers", ""), func(c *transfers.Config) {
		c.RequestTimeout = time.Minute // the POST waits for the commit
		c.HeldReapplyWindow = time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgs.DSN("transfers", "visibility-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The admin session's own commits never wait for a standby.
	exec(`SET synchronous_commit = local`)
	exec(`SELECT pg_create_logical_replication_slot('visibility', 'test_decoding')`)
	exec(`CREATE TABLE visibility_probe (n int)`)
	released := false
	release := func() {
		if !released {
			released = true
			exec(`ALTER SYSTEM RESET synchronous_standby_names`)
			exec(`SELECT pg_reload_conf()`)
		}
	}
	defer release()
	exec(`ALTER SYSTEM SET synchronous_standby_names = 'nobody'`)
	exec(`SELECT pg_reload_conf()`)
	// A probe commit that writes shows the standby name is in force (the
	// checkpointer publishes it to the backends some time after the
	// reload): it waits.
	probe, err := pgx.Connect(ctx, pgs.DSN("transfers", "visibility-probe"))
	if err != nil {
		t.Fatal(err)
	}
	// probing is the probe's INSERT left waiting for the standby: the
	// probe is closed only once the standby name is reset and that INSERT
	// returned (a pgx connection is not safe for concurrent use).
	var probing chan error
	defer func() {
		release()
		if probing != nil {
			if err := <-probing; err != nil {
				t.Logf("the probe's INSERT: %v", err)
			}
		}
		_ = probe.Close(context.Background())
	}()
	poll.Until(t, time.Minute, "a commit waiting for the missing standby", func() (bool, string) {
		done := make(chan error, 1)
		go func() { _, err := probe.Exec(ctx, `INSERT INTO visibility_probe VALUES (1)`); done <- err }()
		select {
		case err := <-done:
			return false, fmt.Sprintf("the probe committed at once (%v)", err)
		case <-time.After(time.Second):
		}
		probing = done
		return true, ""
	})
	poll.Until(t, time.Minute, "the probe waiting in SyncRep", func() (bool, string) {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = 'visibility-probe' AND wait_event = 'SyncRep'`).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
	// committed finds a committed change in the WAL, as a logical relay
	// reads it: test_decoding shows only committed transactions, visible
	// or not yet.
	committed := func(what string, match func(string) bool) {
		t.Helper()
		poll.Until(t, time.Minute, what, func() (bool, string) {
			rows, err := admin.Query(ctx, `SELECT data FROM pg_logical_slot_peek_changes('visibility', NULL, NULL)`)
			if err != nil {
				return false, err.Error()
			}
			data, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return false, err.Error()
			}
			for _, d := range data {
				if match(d) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("not among %d changes", len(data))
		})
	}

	// The POST: its commit waits, invisible.
	id := uuid.New()
	posted := make(chan int, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/transferencias", strings.NewReader(body("CC-001", "CC-002", 700)))
		if err != nil {
			posted <- 0
			return
		}
		req.Header.Set("Authorization", s.bearer)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", id.String())
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			posted <- 0
			return
		}
		_ = res.Body.Close()
		posted <- res.StatusCode
	}()
	var requestEvent uuid.UUID
	committed("the POST's event committed", func(d string) bool {
		if m := outboxIDRE.FindStringSubmatch(d); m != nil && strings.Contains(d, id.String()) {
			requestEvent = uuid.MustParse(m[1])
			return true
		}
		return false
	})
	var visible int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM transferencia WHERE id = $1`, id).Scan(&visible); err != nil || visible != 0 {
		t.Fatalf("transfer visible before its commit completed: %d, %v", visible, err)
	}

	// The ledger's result, bound to that request, reaches the projection
	// first.
	w := kafkatest.NewWriter(t, broker.Config{Brokers: s.brokers})
	defer w.Close()
	produce(t, w, s.topics.Settled, events.TypeSettled, events.Settled{EventID: events.DerivedID(events.KindSettled, id),
		TransferID: id, OccurredAt: time.Now().UTC(), RequestEventID: requestEvent})
	resultID := events.DerivedID(events.KindSettled, id)
	committed("the result held by the projection", func(d string) bool {
		return strings.HasPrefix(d, "table public.resultado_retido: INSERT: evento_id[uuid]:'"+resultID.String()+"'")
	})
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM transferencia WHERE id = $1`, id).Scan(&visible); err != nil || visible != 0 {
		t.Fatalf("transfer visible before the release: %d, %v", visible, err)
	}

	release()
	select {
	case code := <-posted:
		if code != http.StatusAccepted {
			t.Fatalf("POST = %d, want 202 once its commit completed", code)
		}
	case <-ctx.Done():
		t.Fatal("the POST did not return")
	}
	poll.Until(t, time.Minute, "the transfer LIQUIDADA with no operator", func() (bool, string) {
		st := s.status(t, id.String())["status"]
		return st == "LIQUIDADA", fmt.Sprintf("status %v", st)
	})
	var resolution, by string
	if err := admin.QueryRow(ctx, `SELECT coalesce(resolucao, ''), coalesce(resolvido_por, '') FROM resultado_retido WHERE evento_id = $1`,
		resultID).Scan(&resolution, &by); err != nil {
		t.Fatalf("the result was not held (it did not come before visibility): %v", err)
	}
	if resolution != "APLICADO" || by != postgres.ReappliedBy {
		t.Errorf("held result resolved %q by %q, want APLICADO by %s", resolution, by, postgres.ReappliedBy)
	}
}
