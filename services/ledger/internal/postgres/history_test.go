package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/test/support/poll"
)

// chainRow is a posting with its running balance and stamp.
type chainRow struct {
	id      int64
	account string
	signed  int64
	after   int64
	at      time.Time
}

func chainOf(tb testing.TB, db *pgplatform.DB, account string) []chainRow {
	tb.Helper()
	rows, err := db.Query(context.Background(), `
SELECT id, account_id, CASE direction WHEN 'C' THEN amount_cents ELSE -amount_cents END, balance_after_cents, created_at
FROM posting WHERE account_id = $1 ORDER BY id`, account)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (c chainRow, err error) {
		err = r.Scan(&c.id, &c.account, &c.signed, &c.after, &c.at)
		return c, err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestConcurrentSettlementsKeepOneChain: four workers settle transfers in
// and out of one hot account at once, in batches of several transfers of
// that account (a batch's postings of one account are in one statement),
// while deposits into it and hold captures from it run beside them; the
// running balances of every account form one unbroken chain, in id order,
// ending at its balance, and the stamps never go back.
func TestConcurrentSettlementsKeepOneChain(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	open(t, s, "HOT", "BRL", 1_000_000)
	for i := range 4 {
		open(t, s, fmt.Sprintf("CC-%d", i), "BRL", 1_000_000)
	}
	var holds []ledger.Transfer
	for range 10 {
		h := hold("HOT", "CC-0", 7)
		if rs := settle(t, s, h); rs[0].Outcome != ledger.Reserved {
			t.Fatalf("hold: %v", rs)
		}
		holds = append(holds, h)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for w := range 4 {
		peer := fmt.Sprintf("CC-%d", w)
		wg.Go(func() {
			for i := range 15 {
				batch := []ledger.Transfer{transfer("HOT", peer, int64(1+i), "BRL"), transfer(peer, "HOT", int64(2+i), "BRL"),
					transfer("HOT", peer, 3, "BRL")}
				if _, err := s.Settle(ctx, batch, decide); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, _, err := s.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: "HOT", AmountCents: 5, ClientID: ledgertest.Client}); err != nil {
				fail(err)
				return
			}
		}
	})
	wg.Go(func() {
		for _, h := range holds {
			rs, err := s.CloseReservations(ctx, []ledger.Command{captureOf(h, 4)}, rules.Closer(at))
			if err == nil && rs[0].Outcome != ledger.Settled {
				err = fmt.Errorf("capture: %+v", rs[0])
			}
			if err != nil {
				fail(err)
				return
			}
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	chain := chainOf(t, db, "HOT")
	if want := 1 + 4*15*3 + 20 + 10; len(chain) != want {
		t.Fatalf("HOT has %d postings, want %d", len(chain), want)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestStampsFollowTheLockOrder: a settlement whose transaction began
// first but took the account's lock last is stamped after the one that
// posted before it, so that the stamps follow the running balance and the
// balance at an instant between them is the earlier posting's. The first
// transaction is held at its claim (another transaction holds its
// transfer's marker, uncommitted) while the second begins, locks, posts
// and commits; with the stamp of the transaction's start (now()) the later
// posting would carry the earlier time.
func TestStampsFollowTheLockOrder(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	open(t, s, "CC-A", "BRL", 1000)
	open(t, s, "CC-B", "BRL", 0)
	first, second := transfer("CC-A", "CC-B", 10, "BRL"), transfer("CC-A", "CC-B", 20, "BRL")

	blocker, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	if _, err := blocker.Exec(ctx, `INSERT INTO processed_transfer (transfer_id, result, source_account, dest_account, amount_cents, currency, event_id)
VALUES ($1, 'EM_PROCESSAMENTO', 'CC-A', 'CC-B', 10, 'BRL', gen_random_uuid())`, first.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Settle(ctx, []ledger.Transfer{first}, decide)
		done <- err
	}()
	poll.Until(t, 10*time.Second, "the first settlement waits at its claim", func() (bool, string) {
		var waiting bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
AND wait_event_type = 'Lock' AND query LIKE '%processed_transfer%')`).Scan(&waiting)
		return err == nil && waiting, fmt.Sprintf("waiting %v, %v", waiting, err)
	})
	var firstBegan time.Time
	if err := db.QueryRow(ctx, `SELECT min(xact_start) FROM pg_stat_activity WHERE datname = current_database()
AND wait_event_type = 'Lock'`).Scan(&firstBegan); err != nil {
		t.Fatal(err)
	}
	settle(t, s, second)
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	chain := chainOf(t, db, "CC-A")
	if len(chain) != 3 {
		t.Fatalf("CC-A has %d postings, want 3", len(chain))
	}
	posted2, posted1 := chain[1], chain[2] // the second transfer posted first
	if posted2.signed != -20 || posted1.signed != -10 {
		t.Fatalf("postings in id order: %+v, want the 20 then the 10", chain)
	}
	if !firstBegan.Before(posted2.at) {
		t.Fatalf("the first transaction began at %v, not before the second's posting at %v: the race did not happen", firstBegan, posted2.at)
	}
	if !posted1.at.After(posted2.at) {
		t.Errorf("the later posting is stamped %v, the earlier %v: want later", posted1.at, posted2.at)
	}
	between := posted2.at.Add(posted1.at.Sub(posted2.at) / 2)
	for _, c := range []struct {
		at   time.Time
		want int64
	}{
		{posted2.at, 1000},                      // exclusive: the balance before it
		{posted2.at.Add(time.Microsecond), 980}, // just after it
		{between, 980},
		{posted1.at.Add(time.Microsecond), 970},
		{chain[0].at.Add(-time.Hour), 0},
	} {
		_, got, err := s.BalanceAt(ctx, "CC-A", c.at)
		if err != nil || got != c.want {
			t.Errorf("balance at %v = %d, %v; want %d", c.at, got, err, c.want)
		}
	}
	ledgertest.CheckInvariants(t, db)
}

// TestInvariantsCatchABrokenChain shows that the running-balance
// invariants fail on the faults they are there for, each written by hand
// (the immutability trigger set aside) on a ledger that settled a few
// transfers.
func TestInvariantsCatchABrokenChain(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name, invariant, sql string
	}{
		{"none: the ledger as it settled", "", ``},
		{"a running balance off by one", "each posting's running balance",
			`UPDATE posting SET balance_after_cents = balance_after_cents + 1 WHERE id = (SELECT min(id) FROM posting WHERE account_id = 'CC-002')`},
		{"the last running balance is not the balance", "last posting has the account's balance",
			`UPDATE account SET balance_cents = balance_cents + 1 WHERE id = 'CC-002'`},
		{"a posting stamped before the previous one", "each posting's running balance",
			`UPDATE posting SET created_at = created_at - interval '1 hour' WHERE id = (SELECT max(id) FROM posting WHERE account_id = 'CC-001')`},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s, db := newStore(t)
			open(t, s, "CC-001", "BRL", 100)
			open(t, s, "CC-002", "BRL", 0)
			settle(t, s, transfer("CC-001", "CC-002", 40, "BRL"), transfer("CC-001", "CC-002", 5, "BRL"))
			if f.sql != "" {
				for _, q := range []string{`ALTER TABLE posting DISABLE TRIGGER posting_no_update_delete`, f.sql} {
					if _, err := db.Exec(context.Background(), q); err != nil {
						t.Fatal(err)
					}
				}
			}
			rec := &errorsOf{TB: t}
			ledgertest.CheckInvariants(rec, db)
			caught := false
			for _, e := range rec.errs {
				caught = caught || (f.invariant != "" && strings.Contains(e, f.invariant))
			}
			if want := f.invariant != ""; caught != want || (!want && len(rec.errs) > 0) {
				t.Errorf("invariant %q failed: %v, want %v (failures: %q)", f.invariant, caught, want, rec.errs)
			}
		})
	}
}

// TestStatementReadsOneSnapshot: the statement's balances and postings
// add up, its postings are those stamped in [from, to), oldest first, and
// each of its balances is BalanceAt's.
func TestStatementReadsOneSnapshot(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	open(t, s, "CC-A", "BRL", 1000)
	open(t, s, "CC-B", "BRL", 0)
	for i := range 6 {
		settle(t, s, transfer("CC-A", "CC-B", int64(10+i), "BRL"))
	}
	chain := chainOf(t, db, "CC-A")
	from, to := chain[2].at, chain[5].at // postings 2, 3 and 4
	var (
		opening, closing int64
		got              []int64
	)
	err := s.Statement(ctx, "CC-A", from, to, func(o, c int64) error {
		opening, closing = o, c
		return nil
	}, func(p ledger.Posting) error {
		got = append(got, p.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{chain[2].id, chain[3].id, chain[4].id}
	if fmt.Sprint(got) != fmt.Sprint(want) || opening != chain[1].after || closing != chain[4].after {
		t.Errorf("statement: opening %d closing %d postings %v; want %d %d %v", opening, closing, got, chain[1].after, chain[4].after, want)
	}
	for _, at := range []time.Time{from, to} {
		_, b, err := s.BalanceAt(ctx, "CC-A", at)
		if err != nil || (at.Equal(from) && b != opening) || (at.Equal(to) && b != closing) {
			t.Errorf("balance at %v = %d, %v; the statement says %d .. %d", at, b, err, opening, closing)
		}
	}
	stop := errors.New("stop")
	if err := s.Statement(ctx, "CC-A", from, to, func(int64, int64) error { return nil },
		func(ledger.Posting) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("a writer's error: %v, want it returned", err)
	}
}

// TestStatementStreams: the store hands over a statement's postings as it
// reads them. Over 100,000 postings the live heap (after a full garbage
// collection) when the 99,000th is handed over is within 1 MiB of what it
// was at the 1,000th; the same measure over a writer that keeps every
// posting (a statement held in memory) finds it grown by several MiB.
func TestStatementStreams(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	open(t, s, "DEEP", "BRL", 0)
	const n = 100_000
	if _, err := db.Exec(ctx, `
INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents, balance_after_cents, created_at)
SELECT 'DEPOSIT', md5('deep' || i)::uuid, 'DEEP', 'C', 1, i, '2026-01-01T00:00:00Z'::timestamptz + i * interval '1 ms'
FROM generate_series(1, $1::int) i ORDER BY i`, n); err != nil {
		t.Fatal(err)
	}
	live := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc) //nolint:gosec // a heap's size fits
	}
	// growth reads the statement, keeping every posting when keep, and
	// returns how much the live heap grew from the 1,000th to the 99,000th.
	growth := func(keep bool) int64 {
		var (
			at1k, at99k int64
			seen        int
			kept        []ledger.Posting
		)
		err := s.Statement(ctx, "DEEP", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
			func(int64, int64) error { return nil }, func(p ledger.Posting) error {
				if keep {
					kept = append(kept, p)
				}
				switch seen++; seen {
				case 1_000:
					at1k = live()
				case 99_000:
					at99k = live()
				}
				return nil
			})
		if err != nil || seen != n {
			t.Fatalf("statement: %d postings, %v", seen, err)
		}
		t.Logf("keeping %v: live heap at the 1,000th posting %d B, at the 99,000th %d B (%d kept)", keep, at1k, at99k, len(kept))
		return at99k - at1k
	}
	if g := growth(false); g > 1<<20 {
		t.Errorf("the live heap grew by %d B over 98,000 postings: the statement is held in memory", g)
	}
	if g := growth(true); g <= 1<<20 {
		t.Errorf("keeping every posting grew the live heap by %d B only: the measure cannot tell", g)
	}
}
