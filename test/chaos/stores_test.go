//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/test/support/poll"
)

// storeFigures are what checkStores counted.
type storeFigures struct {
	doubled, dead, held int
	reservations        int // holds the ledger reserved
	refunds             int // refunds the ledger decided (settled or rejected)
}

// checkStores checks the stores' own invariants by SQL, once every
// transfer is terminal and every group has caught up: one posting pair
// per settled transfer and none per rejected one, no ledger entry without
// its transfer row, the ledger's verdict the transfer's status, no ledger
// transfer still in processing, every balance its postings, every
// currency summing to zero, every entry one debit and one credit of one
// amount, no DEAD outbox row in any service, and no held result left
// unresolved in the transfers database; and those of holds
// (checkHoldStores) and refunds (checkRefundStores). TestChaos and TestChaosCluster
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

	refunds := s.checkRefundStores(ctx, report)

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
		// A hold's marker says RESERVADA whatever became of it: its
		// reservation row is its verdict (checkHoldStores).
		if st, ok := statusByID[id]; ok && st != "PENDENTE" && result != "RESERVADA" && st != result {
			verdicts++
		}
	}
	if err := r.Err(); err != nil {
		s.t.Fatal(err)
	}
	if verdicts > 0 {
		report("%d transfers whose status is not the ledger's verdict", verdicts)
	}

	reservations := s.checkHoldStores(ctx, statusByID, report)

	held := s.unresolvedHeld(ctx)
	if held > 0 {
		report("%d held results (resultado_retido) still unresolved after the drain", held)
	}
	return storeFigures{doubled: doubled, dead: dead, held: held, reservations: reservations, refunds: refunds}
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

// holdStoreChecks are the ledger's invariants of holds (CONTRACTS section
// 9; services/ledger/internal/ledgertest's hold invariants, which this
// package cannot import), each a count of what breaks it.
var holdStoreChecks = []struct{ what, query string }{
	{"accounts whose reserved amount is negative or more than their balance", `
SELECT count(*) FROM account WHERE reserved_cents < 0 OR (NOT funding AND reserved_cents > balance_cents)`},
	{"accounts whose reserved amount is not the sum of their open reservations", `
SELECT count(*) FROM account a
  LEFT JOIN (SELECT source_account, sum(amount_cents) AS total FROM reservation WHERE state = 'open' GROUP BY source_account) o
         ON o.source_account = a.id
 WHERE a.reserved_cents <> coalesce(o.total, 0)`},
	{"reservations without their hold's marker, or captured beyond what they reserved", `
SELECT count(*) FROM reservation r LEFT JOIN processed_transfer m ON m.transfer_id = r.transfer_id
 WHERE m.result IS DISTINCT FROM 'RESERVADA' OR m.amount_cents <> r.amount_cents OR r.captured_cents > r.amount_cents`},
	{"reservations whose postings are not their capture (postings of one not captured, or of another amount)", `
SELECT count(*) FROM reservation r
  LEFT JOIN posting p ON p.entry_type = 'TRANSFER' AND p.entry_id = r.transfer_id AND p.direction = 'D'
 WHERE (r.state = 'captured') <> (p.entry_id IS NOT NULL) OR p.amount_cents IS DISTINCT FROM r.captured_cents`},
	{"reservations not released exactly once (one closing event once closed, none while open)", `
SELECT count(*) FROM reservation r
 WHERE (SELECT count(*) FROM outbox_event e WHERE e.aggregate_id = r.transfer_id::text
           AND e.event_type IN ('TransferenciaLiquidada', 'TransferenciaCancelada'))
       <> CASE r.state WHEN 'open' THEN 0 ELSE 1 END`},
}

// holdStatus is the transfer's status each reservation state gives.
var holdStatus = map[string]string{"open": "RESERVADA", "captured": "LIQUIDADA", "cancelled": "CANCELADA", "expired": "EXPIRADA"}

// checkHoldStores checks the holds in the stores: the ledger's invariants
// (holdStoreChecks), and each transfer's status that of its reservation
// (a hold's status only on a transfer with one). It returns how many
// reservations the ledger holds.
func (s *suite) checkHoldStores(ctx context.Context, statusByID map[uuid.UUID]string, report func(format string, args ...any)) int {
	s.t.Helper()
	for _, c := range holdStoreChecks {
		var n int
		if err := s.ledger.QueryRow(ctx, c.query).Scan(&n); err != nil {
			s.t.Fatalf("holds: %s: %v", c.what, err)
		}
		if n > 0 {
			report("holds: %d %s", n, c.what)
		}
	}
	rows, err := s.ledger.Query(ctx, `SELECT transfer_id, state FROM reservation`)
	if err != nil {
		s.t.Fatal(err)
	}
	states := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			s.t.Fatal(err)
		}
		states[id] = st
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	var mismatched, orphans []string
	for id, st := range states {
		if got, ok := statusByID[id]; ok && got != holdStatus[st] {
			mismatched = append(mismatched, fmt.Sprintf("%s %s with its reservation %s", id, got, st))
		}
	}
	for id, st := range statusByID {
		if _, ok := states[id]; !ok && (st == "RESERVADA" || st == "CANCELADA" || st == "EXPIRADA") {
			orphans = append(orphans, fmt.Sprintf("%s %s", id, st))
		}
	}
	if len(mismatched) > 0 {
		report("holds: %d transfers whose status is not their reservation's, e.g. %s", len(mismatched), mismatched[0])
	}
	if len(orphans) > 0 {
		report("holds: %d transfers with a hold's status and no reservation, e.g. %s", len(orphans), orphans[0])
	}
	return len(states)
}
