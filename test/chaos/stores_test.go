//go:build chaos

package chaos

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/test/support/poll"
)

// storeFigures are what checkStores counted.
type storeFigures struct {
	doubled, dead, held int
}

// checkStores checks the stores' own invariants by SQL, once every
// transfer is terminal and every group has caught up: one posting pair
// per settled transfer and none per rejected one, no ledger entry without
// its transfer row, the ledger's verdict the transfer's status, no ledger
// transfer still in processing, every balance its postings, every
// currency summing to zero, every entry one debit and one credit of one
// amount, no DEAD outbox row in any service, and no held result left
// unresolved in the transfers database. TestChaos and TestChaosCluster
// both run it; report is how a broken one is told (the test's errorf, or
// a log line where a loss is expected).
func (s *suite) checkStores(ctx context.Context, report func(format string, args ...any)) storeFigures {
	s.t.Helper()
	// None doubled: one posting pair per settled transfer, none per
	// rejected one, and the ledger's own record agrees.
	var doubled, missingPostings, rejectedWithPostings int
	var statusByID = map[uuid.UUID]string{}
	r, err := s.transfer.Query(ctx, `SELECT id, status FROM transferencia`)
	if err != nil {
		s.t.Fatal(err)
	}
	for r.Next() {
		var id uuid.UUID
		var st string
		if err := r.Scan(&id, &st); err != nil {
			s.t.Fatal(err)
		}
		statusByID[id] = st
	}
	if err := r.Err(); err != nil {
		s.t.Fatal(err)
	}
	postings := map[uuid.UUID]int{}
	r, err = s.ledger.Query(ctx, `SELECT entry_id, count(*) FROM posting WHERE entry_type = 'TRANSFER' GROUP BY entry_id`)
	if err != nil {
		s.t.Fatal(err)
	}
	for r.Next() {
		var id uuid.UUID
		var n int
		if err := r.Scan(&id, &n); err != nil {
			s.t.Fatal(err)
		}
		postings[id] = n
	}
	if err := r.Err(); err != nil {
		s.t.Fatal(err)
	}
	for id, st := range statusByID {
		n := postings[id]
		switch {
		case st == "LIQUIDADA" && n > 2:
			doubled++
		case st == "LIQUIDADA" && n < 2:
			missingPostings++
		case st == "REJEITADA" && n > 0:
			rejectedWithPostings++
		}
		delete(postings, id)
	}
	if doubled+missingPostings+rejectedWithPostings > 0 {
		report("postings: %d settled transfers with more than one pair, %d settled without their pair, %d rejected with postings",
			doubled, missingPostings, rejectedWithPostings)
	}
	if len(postings) > 0 {
		report("%d transfer entries in the ledger with no transfer row", len(postings))
	}
	var mismatched int
	if err := s.ledger.QueryRow(ctx, `SELECT count(*) FROM processed_transfer WHERE result = 'EM_PROCESSAMENTO'`).Scan(&mismatched); err != nil {
		s.t.Fatal(err)
	}
	if mismatched > 0 {
		report("%d ledger transfers still EM_PROCESSAMENTO", mismatched)
	}

	// Balances equal postings, per-currency sums zero, entries balanced.
	var badBalances, badSums, badEntries int
	if err := s.ledger.QueryRow(ctx, `
SELECT count(*) FROM (
  SELECT a.id FROM account a LEFT JOIN posting p ON p.account_id = a.id
   GROUP BY a.id, a.balance_cents
  HAVING a.balance_cents <> coalesce(sum(CASE p.direction WHEN 'C' THEN p.amount_cents ELSE -p.amount_cents END), 0)) x`).Scan(&badBalances); err != nil {
		s.t.Fatal(err)
	}
	if err := s.ledger.QueryRow(ctx, `SELECT count(*) FROM (SELECT currency FROM account GROUP BY currency HAVING sum(balance_cents) <> 0) x`).Scan(&badSums); err != nil {
		s.t.Fatal(err)
	}
	if err := s.ledger.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM posting GROUP BY entry_type, entry_id
  HAVING count(*) <> 2 OR count(*) FILTER (WHERE direction = 'D') <> 1 OR count(DISTINCT amount_cents) <> 1) x`).Scan(&badEntries); err != nil {
		s.t.Fatal(err)
	}
	if badBalances+badSums+badEntries > 0 {
		report("ledger: %d balances differ from their postings, %d currencies do not sum to zero, %d unbalanced entries",
			badBalances, badSums, badEntries)
	}

	// No DEAD outbox row in any service.
	dead := 0
	for _, db := range []*pgxpool.Pool{s.transfer, s.ledger, s.notify, s.pool(s.dsn("antifraud", "chaos-test"))} {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM outbox_event WHERE status = 'DEAD'`).Scan(&n); err != nil {
			s.t.Fatal(err)
		}
		dead += n
	}
	if dead > 0 {
		report("%d DEAD outbox rows", dead)
	}

	// The ledger's verdict is the transfer's status: a transfer LIQUIDADA
	// in one and REJEITADA in the other had its money and its answer part.
	var verdicts int
	r, err = s.ledger.Query(ctx, `SELECT transfer_id, result FROM processed_transfer WHERE result <> 'EM_PROCESSAMENTO'`)
	if err != nil {
		s.t.Fatal(err)
	}
	for r.Next() {
		var id uuid.UUID
		var result string
		if err := r.Scan(&id, &result); err != nil {
			s.t.Fatal(err)
		}
		if st, ok := statusByID[id]; ok && st != "PENDENTE" && st != result {
			verdicts++
		}
	}
	if err := r.Err(); err != nil {
		s.t.Fatal(err)
	}
	if verdicts > 0 {
		report("%d transfers whose status is not the ledger's verdict", verdicts)
	}

	held := s.unresolvedHeld(ctx)
	if held > 0 {
		report("%d held results (resultado_retido) still unresolved after the drain", held)
	}
	return storeFigures{doubled: doubled, dead: dead, held: held}
}

// unresolvedHeld counts the transfers database's held results
// (resultado_retido) not resolved, waiting up to heldWithin for the
// automatic re-apply to resolve those that match a transfer.
func (s *suite) unresolvedHeld(ctx context.Context) int {
	s.t.Helper()
	var n int
	var err error
	poll.Wait(heldWithin, time.Second, func() bool {
		err = s.transfer.QueryRow(ctx, `SELECT count(*) FROM resultado_retido WHERE resolucao IS NULL`).Scan(&n)
		return err == nil && n == 0
	})
	if err != nil {
		s.t.Fatalf("held results: %v", err)
	}
	return n
}

// heldWithin bounds the wait for held results to resolve by themselves.
const heldWithin = time.Minute
