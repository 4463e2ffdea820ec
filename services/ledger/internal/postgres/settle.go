package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// The settlement statements take arrays, so that one transfer and a batch of
// fifty cost the same number of round trips. UUIDs go as [16]byte, which pgx
// encodes natively (uuid.UUID would go through driver.Valuer and text).
const (
	// claimSQL inserts the processed markers in transfer-id order: two
	// batches sharing transfers wait for each other's markers in one order
	// and cannot deadlock on them. A marker that exists (a redelivery, or
	// one committed by a concurrent delivery we waited for) is not
	// returned. A transfer's request event id is stored NULL when its
	// record carried none (the nil UUID).
	claimSQL = `
INSERT INTO processed_transfer (transfer_id, result, source_account, dest_account, amount_cents, currency, event_id, client_id,
                                request_event_id)
SELECT u.id, 'EM_PROCESSAMENTO', u.src, u.dst, u.amount, u.currency, u.event_id, NULLIF(u.client, ''),
       NULLIF(u.request_event_id, '00000000-0000-0000-0000-000000000000')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::uuid[], $7::text[], $8::uuid[])
     AS u(id, src, dst, amount, currency, event_id, client, request_event_id)
ORDER BY u.id
ON CONFLICT (transfer_id) DO NOTHING
RETURNING transfer_id`

	// postingsAndBalances are the first two CTEs of writeSQL and of the
	// closing of reservations: the postings ($1-$4) with the running
	// balance after each ($5, moves.add), and the balances and
	// reservations of each account moved ($6-$8), as the domain left them.
	// Every posting of the statement is stamped with one reading of the
	// database clock, taken in this statement, after the transaction took
	// the accounts' locks: per account, a later posting (a later holder of
	// the lock) is never stamped before an earlier one, so created_at
	// follows the running balance's order (GET /contas/{id}/saldo?em=).
	// The accounts are found by "= ANY", which can only probe the primary
	// key, not by a join with the unnested arrays alone: with statistics
	// taken while the table was small, the planner answers the join by
	// hashing every row, sequential scans off or not.
	postingsAndBalances = `
WITH postings AS (
    INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents, balance_after_cents, created_at)
    SELECT 'TRANSFER', p.entry_id, p.account_id, p.direction, p.amount, p.after, (SELECT clock_timestamp())
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) WITH ORDINALITY
         AS p(entry_id, account_id, direction, amount, after, n)
    ORDER BY p.n
), balances AS (
    UPDATE account AS a SET balance_cents = b.balance, reserved_cents = b.reserved
    FROM unnest($6::text[], $7::bigint[], $8::bigint[]) AS b(id, balance, reserved)
    WHERE a.id = ANY($6::text[]) AND a.id = b.id
)`

	// writeSQL writes the postings, the balances, the reservations of the
	// holds ($12-$17) and the results ($9-$11, the markers found by
	// "= ANY" as the accounts are) in one statement: they do not read
	// each other's rows, so data-modifying CTEs apply them together, and
	// a batch costs one statement whatever its size.
	writeSQL = postingsAndBalances + `, reservations AS (
    INSERT INTO reservation (transfer_id, source_account, dest_account, currency, amount_cents, expires_at)
    SELECT * FROM unnest($12::uuid[], $13::text[], $14::text[], $15::text[], $16::bigint[], $17::timestamptz[])
)
UPDATE processed_transfer AS m
SET result = ($10::text[])[array_position($9::uuid[], m.transfer_id)],
    reason = NULLIF(($11::text[])[array_position($9::uuid[], m.transfer_id)], ''),
    result_event_id = ($18::uuid[])[array_position($9::uuid[], m.transfer_id)]
WHERE m.transfer_id = ANY($9::uuid[])`
)

// Settle implements ledger.Store: one transaction for all of ts.
//
// Round trips: begin; claim markers and lock accounts (pipelined, the
// claim runs first); enqueue the result events and write postings,
// balances and results (pipelined, the writes in one statement); commit.
// Transfers whose marker was already there are Duplicates; their accounts
// are locked anyway (the claim and the lock share a round trip), which
// costs nothing but a brief wait.
func (s *Store) Settle(ctx context.Context, ts []ledger.Transfer, decide ledger.Decider) ([]ledger.Result, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	var results []ledger.Result
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		results, err = s.settle(ctx, tx, ts, decide)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// settle is the body of the settlement transaction. It builds all of its
// state afresh, since InTx may run it again.
func (s *Store) settle(ctx context.Context, tx pgx.Tx, ts []ledger.Transfer, decide ledger.Decider) ([]ledger.Result, error) {
	// The first occurrence of a transfer in ts claims it; a later one is a
	// duplicate, as its redelivery after a commit would be.
	first := make(map[uuid.UUID]int, len(ts))
	var (
		ids, eventIDs    [][16]byte
		requestEventIDs  [][16]byte
		srcs, dsts, curs []string
		clients          []string
		amounts          []int64
		accountIDs       []string
		seenAccount      = map[string]bool{}
		addAccount       = func(id string) {
			if !seenAccount[id] {
				seenAccount[id] = true
				accountIDs = append(accountIDs, id)
			}
		}
	)
	for i, t := range ts {
		if _, dup := first[t.ID]; dup {
			continue
		}
		first[t.ID] = i
		ids = append(ids, [16]byte(t.ID))
		eventIDs = append(eventIDs, [16]byte(t.EventID))
		requestEventIDs = append(requestEventIDs, [16]byte(t.RequestEventID))
		srcs, dsts, curs = append(srcs, t.Source), append(dsts, t.Dest), append(curs, t.Currency)
		amounts = append(amounts, t.AmountCents)
		clients = append(clients, t.ClientID)
		addAccount(t.Source)
		addAccount(t.Dest)
	}

	// Every statement of a settlement touches a few rows by key, the
	// writes included (writeSQL's key-only shapes): on their generic plans,
	// made with sequential scans off, they are planned once per connection
	// and find each row by its primary key whatever the statistics say,
	// where a plan made from statistics taken while processed_transfer was
	// small would read the whole table to find a batch's markers.
	b := &pgx.Batch{}
	b.Queue(postgres.GenericPlanSQL)
	b.Queue(claimSQL, ids, srcs, dsts, amounts, curs, eventIDs, clients, requestEventIDs)
	b.Queue(lockAccountsSQL, accountIDs)
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	if err != nil {
		err = fmt.Errorf("settlement plan setting: %w", err)
	}
	var claimed map[uuid.UUID]bool
	if err == nil {
		claimed, err = readClaimed(br)
	}
	var accounts map[string]*ledger.Account
	if err == nil {
		accounts, err = readLocked(br.Query())
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("claim and lock: %w", cerr)
	}
	if err != nil {
		return nil, err
	}

	results := make([]ledger.Result, len(ts))
	var (
		m                  = newMoves(accounts)
		rIDs, rEventIDs    [][16]byte
		rResults, rReasons []string
		holds              reservationRows
	)
	for i, t := range ts {
		if first[t.ID] != i || !claimed[t.ID] {
			results[i] = ledger.Result{TransferID: t.ID, Outcome: ledger.Duplicate}
			continue
		}
		d, err := decide(accounts[t.Source], accounts[t.Dest], t)
		if err != nil {
			return nil, err
		}
		results[i] = d.Result
		m.add(t.ID, d.Entries, d.Event)
		if d.Reservation != nil {
			holds.add(d.Reservation)
			m.moved[t.Source] = true
		}
		rIDs, rEventIDs = append(rIDs, [16]byte(t.ID)), append(rEventIDs, [16]byte(d.Event.ID))
		rResults, rReasons = append(rResults, string(d.Outcome)), append(rReasons, d.Reason)
	}
	if len(m.events) == 0 {
		return results, nil // every transfer was a duplicate
	}
	if err := s.write(ctx, tx, accounts, m, "postings and results", writeSQL, rIDs, rResults, rReasons,
		holds.ids, holds.sources, holds.dests, holds.currencies, holds.amounts, holds.expires, rEventIDs); err != nil {
		return nil, err
	}
	return results, nil
}

// moves are what a transaction's decisions wrote: the postings of their
// entries with the running balance after each, the accounts they moved and
// the events that announce them.
type moves struct {
	entries              [][16]byte
	accounts, directions []string
	amounts, after       []int64
	moved                map[string]bool
	events               []events.Message
	// running is each locked account's posted balance so far in this
	// transaction: as locked, then moved by each entry in order.
	running map[string]int64
}

// newMoves starts the moves of a transaction that locked accounts, before
// any decision changes their balances.
func newMoves(accounts map[string]*ledger.Account) *moves {
	m := &moves{moved: map[string]bool{}, running: make(map[string]int64, len(accounts))}
	for id, a := range accounts {
		m.running[id] = a.BalanceCents
	}
	return m
}

// add records the entries of the entry id (a transfer) and its event. The
// postings are inserted in the order they are added, which for each
// account is the order of its running balance.
func (m *moves) add(id uuid.UUID, entries []ledger.Entry, event events.Message) {
	for _, e := range entries {
		m.entries = append(m.entries, [16]byte(id))
		m.accounts = append(m.accounts, e.AccountID)
		m.directions = append(m.directions, string(e.Direction))
		m.amounts = append(m.amounts, e.AmountCents)
		m.running[e.AccountID] += e.Signed()
		m.after = append(m.after, m.running[e.AccountID])
		m.moved[e.AccountID] = true
	}
	m.events = append(m.events, event)
}

// checkRunning returns an error when a moved account's balance, as the
// decisions left it, is not the running balance of its last posting: the
// two are computed apart (the domain moves balances, add sums entries), and
// a transaction that would write them out of step is refused.
func (m *moves) checkRunning(accounts map[string]*ledger.Account) error {
	for id := range m.moved {
		if a := accounts[id]; a == nil || a.BalanceCents != m.running[id] {
			return fmt.Errorf("account %s: balance %+v, running balance of its postings %d", id, a, m.running[id])
		}
	}
	return nil
}

// write enqueues m's events and runs stmt, a statement that begins with
// postingsAndBalances, with m's postings and the balances it left on
// accounts ($1-$8) and then rest, in one round trip.
func (s *Store) write(ctx context.Context, tx pgx.Tx, accounts map[string]*ledger.Account, m *moves, what, stmt string, rest ...any) error {
	if err := m.checkRunning(accounts); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	wb := &pgx.Batch{}
	if err := s.outbox.Queue(ctx, tx, wb, m.events...); err != nil {
		return err
	}
	bIDs, bBalances, bReserved := balances(accounts, m.moved)
	wb.Queue(stmt, append([]any{m.entries, m.accounts, m.directions, m.amounts, m.after, bIDs, bBalances, bReserved}, rest...)...)
	wr := tx.SendBatch(ctx, wb)
	_, err := wr.Exec()
	if err != nil {
		err = fmt.Errorf("enqueue %d events: %w", len(m.events), err)
	} else if _, err = wr.Exec(); err != nil {
		err = fmt.Errorf("write %s: %w", what, err)
	}
	if cerr := wr.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", what, cerr)
	}
	return err
}

func readClaimed(br pgx.BatchResults) (map[uuid.UUID]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("claim transfers: %w", err)
	}
	defer rows.Close()
	claimed := map[uuid.UUID]bool{}
	for rows.Next() {
		var id [16]byte
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan claimed transfer: %w", err)
		}
		claimed[uuid.UUID(id)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim transfers: %w", err)
	}
	return claimed, nil
}

// readLocked reads the accounts that lockAccountsSQL (or
// lockHoldAccountsSQL) locked, by id.
func readLocked(rows pgx.Rows, err error) (map[string]*ledger.Account, error) {
	if err != nil {
		return nil, fmt.Errorf("lock accounts: %w", err)
	}
	defer rows.Close()
	accounts := map[string]*ledger.Account{}
	for rows.Next() {
		a := &ledger.Account{}
		if err := rows.Scan(&a.ID, &a.Currency, &a.BalanceCents, &a.ReservedCents, &a.Holder, &a.Funding); err != nil {
			return nil, fmt.Errorf("scan account: %w", err)
		}
		accounts[a.ID] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock accounts: %w", err)
	}
	return accounts, nil
}

// balances returns, in account order, the balances and reserved amounts
// the decisions left on the locked accounts that they moved.
func balances(accounts map[string]*ledger.Account, moved map[string]bool) ([]string, []int64, []int64) {
	ids := make([]string, 0, len(moved))
	for id := range moved {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	amounts, reserved := make([]int64, len(ids)), make([]int64, len(ids))
	for i, id := range ids {
		amounts[i], reserved[i] = accounts[id].BalanceCents, accounts[id].ReservedCents
	}
	return ids, amounts, reserved
}

// reservationRows are the columns of the reservations a settlement opens.
type reservationRows struct {
	ids                        [][16]byte
	sources, dests, currencies []string
	amounts                    []int64
	expires                    []time.Time
}

func (h *reservationRows) add(r *ledger.Reservation) {
	h.ids = append(h.ids, [16]byte(r.TransferID))
	h.sources, h.dests, h.currencies = append(h.sources, r.Source), append(h.dests, r.Dest), append(h.currencies, r.Currency)
	h.amounts, h.expires = append(h.amounts, r.AmountCents), append(h.expires, r.ExpiresAt)
}
