//go:build cluster

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/outage"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/poll"
)

// openPair creates database app on the pair, a table t and a pool on the
// pair's multi-host URL.
func openPair(t *testing.T, p *cluster.Pair) *postgres.DB {
	t.Helper()
	p.CreateDB("app")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, p.URL("app", "cluster-test"), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func insert(db *postgres.DB, id int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	_, err := db.Exec(ctx, `INSERT INTO t (id) VALUES ($1)`, id)
	return err
}

// serverPort is the port of the server a pooled connection landed on.
func serverPort(t *testing.T, db *postgres.DB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var port int
	if err := db.QueryRow(ctx, `SELECT inet_server_port()`).Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

func count(t *testing.T, dsn string, where string) int {
	t.Helper()
	n, err := countErr(dsn, where)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countErr counts the rows of t matching where on the server of dsn.
func countErr(dsn string, where string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(ctx) }()
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM t WHERE `+where).Scan(&n)
	return n, err
}

// writeOnServer inserts id through a connection to server s alone.
func writeOnServer(s *cluster.PG, id int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("app", ""))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, `INSERT INTO t (id) VALUES ($1)`, id)
	return err
}

// status is the status the HTTP layer answers for err.
func status(err error) int {
	rec := httptest.NewRecorder()
	httpapi.WriteError(rec, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/transferencias", nil), slog.New(slog.NewTextHandler(io.Discard, nil)), err)
	return rec.Code
}

// A pool on the multi-host URL reaches the primary; after kill -9 of the
// primary and the standby's promotion the same pool, not restarted,
// reaches the new primary with every synchronously committed row; a write
// on the old primary, fenced as a standby, is refused with 25006, an
// outage (503).
func TestPairSyncFailover(t *testing.T) {
	p := cluster.StartPair(t, "", cluster.Sync)
	db := openPair(t, p)
	if got := serverPort(t, db); got != p.Primary().Port() {
		t.Fatalf("the pool landed on port %d, want the primary's %d", got, p.Primary().Port())
	}
	for id := 1; id <= 100; id++ {
		if err := insert(db, id, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	killed := time.Now()
	p.KillPrimary()
	took := p.Promote()
	// A write the client saw fail during the failover (an outage) may have
	// committed all the same (a commit that waited for the synchronous
	// standby and was cancelled by the client's timeout): its retry then
	// finds the row, as the services' idempotency keys and inbox do.
	var firstErr error
	poll.Until(t, time.Minute, "a write through the pool on the new primary", func() (bool, string) {
		err := insert(db, 101, 5*time.Second)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		committed := err == nil || (firstErr != nil && postgres.Code(err) == postgres.CodeUniqueViolation)
		return committed, fmt.Sprint(err)
	})
	if firstErr != nil {
		t.Logf("a write during the failover failed: %v", firstErr)
	}
	t.Logf("FIGURE PostgreSQL promotion (pg_ctl promote until out of recovery): %v; kill -9 to the first write through the same pool: %v",
		took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if firstErr != nil && !outage.Unavailable(firstErr) {
		t.Errorf("a write during the failover failed with %v, which is not an outage", firstErr)
	}
	if got := serverPort(t, db); got != p.Primary().Port() {
		t.Errorf("after the promotion the pool is on port %d, want the new primary's %d", got, p.Primary().Port())
	}
	if n := count(t, p.Primary().DSN("app", ""), "id <= 100"); n != 100 {
		t.Errorf("the promoted standby has %d of the 100 rows committed before the crash", n)
	}

	p.FenceOld()
	err := writeOnServer(p.Standby(), 1000)
	if postgres.Code(err) != "25006" || !outage.Unavailable(err) || status(err) != http.StatusServiceUnavailable {
		t.Errorf("a write on the fenced old primary: %v (SQLSTATE %q, outage %v, HTTP %d); want 25006, an outage, 503",
			err, postgres.Code(err), outage.Unavailable(err), status(err))
	}
}

// With the synchronous standby stopped a commit waits; a context timeout
// ends the client's wait with an outage (503), but the row is already
// committed on the primary: it becomes visible once the standby is back,
// and a retry of the same insert finds it (it must be neither lost nor
// applied twice: the services' idempotency keys and inbox see to that).
// pgx ends the call by closing its connection after a cancel request
// (pgconn's asyncClose): the backend ends its wait for the standby with a
// warning, the row committed and visible on the primary alone (a relay may
// publish what it wrote before the standby has it), and the backend exits,
// its connection slot free. The standby streams the row once it is back.
func TestPairSyncStandbyStopped(t *testing.T) {
	p := cluster.StartPair(t, "", cluster.Sync)
	db := openPair(t, p)
	if err := insert(db, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.StopStandby()
	began := time.Now()
	err := insert(db, 2, 2*time.Second)
	t.Logf("commit with the synchronous standby stopped: %v after %v", err, time.Since(began).Round(time.Millisecond))
	if err == nil || !outage.Unavailable(err) || status(err) != http.StatusServiceUnavailable {
		t.Fatalf("commit with the synchronous standby stopped: %v (outage %v, HTTP %d); want an outage answered 503",
			err, outage.Unavailable(err), status(err))
	}
	// The backend is still waiting for the standby, its commit record on
	// the primary's disk.
	var waiting int
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.Primary().DSN("app", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	visible := count(t, p.Primary().DSN("app", ""), "id = 2")
	t.Logf("backends waiting for the synchronous standby: %d; the timed-out row visible before the standby is back: %d",
		waiting, visible)
	if waiting != 0 || visible != 1 {
		t.Errorf("after the cut-off commit: %d backends wait for the standby, the row is visible %d times; want 0 and 1 (pgx's cancel request ends the wait)",
			waiting, visible)
	}
	if log := p.Primary().LogTail(); !strings.Contains(log, "canceling wait for synchronous replication due to user request") {
		t.Errorf("the primary's log does not show the wait cancelled by pgx's cancel request:\n%s", log)
	}

	p.StartStandby()
	p.WaitStreaming()
	poll.Until(t, 30*time.Second, "the timed-out commit visible", func() (bool, string) {
		n := count(t, p.Primary().DSN("app", ""), "id = 2")
		return n == 1, fmt.Sprintf("%d rows", n)
	})
	if err := insert(db, 2, 5*time.Second); postgres.Code(err) != postgres.CodeUniqueViolation {
		t.Errorf("retrying the timed-out insert: %v; want a unique violation (the first one committed)", err)
	}
	if err := insert(db, 3, 5*time.Second); err != nil {
		t.Errorf("a commit once the standby is back: %v", err)
	}
}

// Asynchronous replication with the standby held behind (its replication
// connection cut): a row committed and acknowledged on the primary is
// lost when the primary crashes and the standby is promoted. The test
// must observe that loss: it is why the suite requires a synchronous
// standby.
func TestPairAsyncLosesCommits(t *testing.T) {
	p := cluster.StartPair(t, "", cluster.Async)
	db := openPair(t, p)
	for id := 1; id <= 50; id++ {
		if err := insert(db, id, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, "the standby caught up", func() (bool, string) {
		n, err := countErr(p.Standby().DSN("app", ""), "true")
		return err == nil && n == 50, fmt.Sprintf("%d rows on the standby, %v", n, err)
	})
	p.CutReplication()
	if err := insert(db, 51, 5*time.Second); err != nil {
		t.Fatalf("an asynchronous commit with replication cut: %v; want it acknowledged at once", err)
	}
	p.KillPrimary()
	p.Promote()
	poll.Until(t, time.Minute, "a write through the pool on the new primary", func() (bool, string) {
		err := insert(db, 52, 5*time.Second)
		return err == nil, fmt.Sprint(err)
	})
	lost := 1 - count(t, p.Primary().DSN("app", ""), "id = 51")
	kept := count(t, p.Primary().DSN("app", ""), "id <= 50")
	t.Logf("FIGURE asynchronous failover: %d acknowledged commit(s) lost, %d of 50 replicated ones kept", lost, kept)
	if lost != 1 {
		t.Error("the commit acknowledged after replication was cut survived the failover: the loss scenario did not happen")
	}
	if kept != 50 {
		t.Errorf("the promoted standby has %d of the 50 replicated rows", kept)
	}
}

// A primary that hangs (SIGSTOP) while the standby is promoted and then
// resumes (SIGCONT) still thinks it is the primary: unfenced, it takes a
// write on a connection it held, and a fresh connection on the multi-host
// URL lands on it (it is the first host and read-write), so writes split
// between two primaries. FenceOld (kill it, restart it as a standby of the
// new primary) prevents both: its writes are refused with 25006 and the
// multi-host URL reaches the new primary.
func TestPairFencing(t *testing.T) {
	p := cluster.StartPair(t, "", cluster.Async)
	db := openPair(t, p)
	if err := insert(db, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	old := p.Primary()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held, err := pgx.Connect(ctx, old.DSN("app", "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close(context.Background()) }()

	p.StopPrimary()
	p.Promote()
	p.ContOld()
	if _, err := held.Exec(ctx, `INSERT INTO t (id) VALUES (2)`); err != nil {
		t.Fatalf("unfenced old primary refused a write: %v (the split brain this test shows did not happen)", err)
	}
	fresh, err := postgres.Open(ctx, p.URL("app", "fresh"), 1)
	if err != nil {
		t.Fatal(err)
	}
	onOld := serverPort(t, fresh) == old.Port()
	fresh.Close()
	t.Logf("unfenced: a write on the old primary succeeded (row 2 on it, %d on the new primary); a fresh multi-host connection landed on the old primary: %v",
		count(t, p.Primary().DSN("app", ""), "id = 2"), onOld)
	if !onOld {
		t.Error("a fresh connection did not land on the unfenced old primary (first host, read-write): the scenario did not show the split")
	}

	p.FenceOld()
	if _, err := held.Exec(ctx, `INSERT INTO t (id) VALUES (3)`); err == nil || !outage.Unavailable(err) {
		t.Errorf("a held connection to the fenced old primary: %v; want an outage", err)
	}
	err = writeOnServer(old, 4)
	if postgres.Code(err) != "25006" || !outage.Unavailable(err) {
		t.Errorf("a write on the fenced old primary: %v; want 25006, an outage", err)
	}
	// The pool's connections to the old primary died with the fencing;
	// the next ones land on the new primary.
	poll.Until(t, time.Minute, "a write through the pool after fencing", func() (bool, string) {
		err := insert(db, 5, 5*time.Second)
		return err == nil, fmt.Sprint(err)
	})
	if got := serverPort(t, db); got != p.Primary().Port() {
		t.Errorf("the pool is on port %d after fencing, want the new primary's %d", got, p.Primary().Port())
	}
}
