package postgres_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/test/support/pgtest"
)

// backfillPostings is how many postings TestRunningBalanceBackfill writes
// before it migrates: small in CI; -backfill.postings=1000000 measures the
// migration on a million (docs/figures.md, History).
var backfillPostings = flag.Int("backfill.postings", 20000, "postings written before the running-balance migration (TestRunningBalanceBackfill)")

// runningBalanceVersion is the ledger migration that adds and fills the
// running balance (migrations/ledger/00007_running_balance.sql).
const runningBalanceVersion = 7

// TestRunningBalanceBackfill builds a ledger as the release before the
// running balance left it (migrations up to 00006), with postings written
// by generate_series over 100 accounts, one of them hot (a quarter of all
// postings, so that it spans several batches), then applies 00007 while
// writers of the older release keep posting (no running balance given,
// created_at left to its default), and checks every invariant: each
// posting's running balance the previous one's plus or minus its amount,
// the last one the account's balance, created_at never going back.
func TestRunningBalanceBackfill(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t)
	db := ledgertest.OpenDB(t, dsn)
	sqlDB := db.SQL()
	defer sqlDB.Close()
	if err := migrations.Apply(ctx, sqlDB, migrations.Platform); err != nil {
		t.Fatal(err)
	}
	set := ledgertest.Sets[len(ledgertest.Sets)-1]
	if err := migrations.ApplyTo(ctx, sqlDB, set, runningBalanceVersion-1); err != nil {
		t.Fatal(err)
	}
	n := *backfillPostings / 2 // entries, two postings each
	start := time.Now()
	for i, q := range seedHistorySQL {
		args := []any{}
		if i == 2 {
			args = append(args, n)
		}
		if _, err := db.Exec(ctx, q, args...); err != nil {
			t.Fatalf("seed %d entries: %v", n, err)
		}
	}
	t.Logf("seeded %d postings in %v", 2*n, time.Since(start).Round(time.Millisecond))
	if _, err := db.Exec(ctx, "VACUUM ANALYZE posting"); err != nil {
		t.Fatal(err)
	}

	// Writers of the older release: a transfer of 1 cent between two
	// customer accounts, locked in id order, posted without a running
	// balance, in a loop until the migration is done.
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wrote int
		errs  []error
	)
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := 4*((2*i+w)%25) + 1 // an account the seed deposited into
				src, dst := fmt.Sprintf("C%03d", a), fmt.Sprintf("C%03d", a+1)
				err := db.InTx(ctx, func(tx pgx.Tx) error { return oldReleaseTransfer(ctx, tx, src, dst) })
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					wrote++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	start = time.Now()
	err := migrations.ApplyTo(ctx, sqlDB, set, runningBalanceVersion)
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("older release's writes during the migration: %v", err)
	}
	t.Logf("running-balance migration over %d postings: %v (%d transfers of the older release written meanwhile)",
		2*n, took.Round(time.Millisecond), wrote)
	if wrote == 0 {
		t.Error("no transfer of the older release was written during the migration")
	}
	var nulls int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM posting WHERE balance_after_cents IS NULL").Scan(&nulls); err != nil || nulls != 0 {
		t.Fatalf("postings without a running balance: %d, %v", nulls, err)
	}
	if err := migrations.Apply(ctx, sqlDB, ledgertest.Sets...); err != nil {
		t.Fatal(err)
	}
	ledgertest.CheckInvariants(t, db)
}

// seedHistorySQL writes $1 entries as the release before the running
// balance did: deposits into 100 accounts first (the funding account
// debited), then 1-cent moves between them, a quarter of all entries
// touching the hot account C000; balances are their postings' sum. Every
// entry is typed DEPOSIT, whose invariants need no processed marker.
var seedHistorySQL = []string{`
INSERT INTO account (id, currency, holder) SELECT format('C%s', lpad(g::text, 3, '0')), 'BRL', 'client-a' FROM generate_series(0, 99) g`,
	`INSERT INTO account (id, currency, funding) VALUES ('__FUNDING__BRL', 'BRL', true)`, `
WITH e AS (
    SELECT i, md5(i::text)::uuid AS entry_id,
           CASE WHEN i % 4 = 0 THEN 0 ELSE i % 100 END AS a,
           i <= $1 / 10 AS deposit
    FROM generate_series(1, $1::int) i
)
INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents, created_at)
SELECT 'DEPOSIT', e.entry_id, s.account_id, s.direction,
       CASE WHEN e.deposit THEN 1000000 ELSE 1 END, now() - interval '1 day' + e.i * interval '1 ms'
FROM e CROSS JOIN LATERAL (VALUES
    (1, CASE WHEN e.deposit THEN '__FUNDING__BRL' ELSE format('C%s', lpad(e.a::text, 3, '0')) END, 'D'),
    (2, CASE WHEN e.deposit THEN format('C%s', lpad(e.a::text, 3, '0')) ELSE format('C%s', lpad(((e.a + 1) % 100)::text, 3, '0')) END, 'C')
) AS s(k, account_id, direction)
ORDER BY e.i, s.k`, `
UPDATE account a SET balance_cents = p.net
FROM (SELECT account_id, sum(CASE direction WHEN 'C' THEN amount_cents ELSE -amount_cents END) AS net FROM posting GROUP BY account_id) p
WHERE a.id = p.account_id`}

// oldReleaseTransfer posts two 1-cent transfers from src to dst as the
// release before the running balance does: accounts locked in id order,
// postings without balance_after_cents, balances updated after them.
func oldReleaseTransfer(ctx context.Context, tx pgx.Tx, src, dst string) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM account WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, []string{src, dst}); err != nil {
		return err
	}
	// Two entries in one statement, as a batch writes them: the fill
	// trigger of the second posting of an account must see the first.
	if _, err := tx.Exec(ctx, `WITH e AS (SELECT n, gen_random_uuid() AS id FROM generate_series(1, 2) n)
INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents)
SELECT 'DEPOSIT', e.id, x.account_id, x.direction, 1 FROM e, (VALUES (1, $1::text, 'D'), (2, $2::text, 'C')) AS x(k, account_id, direction)
ORDER BY e.n, x.k`, src, dst); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE account SET balance_cents = balance_cents + CASE id WHEN $1 THEN -2 ELSE 2 END WHERE id IN ($1, $2)`, src, dst)
	return err
}
