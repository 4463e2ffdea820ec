// Package ledgertest holds what the ledger's tests share: a fresh migrated
// database per test, a snapshot of every ledger table, and the check of the
// ledger's invariants that the schema cannot enforce. Only the ledger's
// tests import it (it imports testing); internal/ keeps it the ledger's.
package ledgertest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/test/support/pgtest"
)

// Sets are the migration sets of the ledger's database.
var Sets = migrations.ForService("ledger")

// NewDB returns a pool of up to 16 connections on a fresh, migrated ledger
// database for this test.
func NewDB(tb testing.TB) *postgres.DB {
	tb.Helper()
	return OpenDB(tb, NewDSN(tb))
}

// NewDSN returns the connection string of a fresh, migrated ledger database
// for this test.
func NewDSN(tb testing.TB) string {
	tb.Helper()
	return pgtest.NewDSN(tb, Sets...)
}

// OpenDB opens a pool of up to 16 connections on dsn, closed when the test
// ends.
func OpenDB(tb testing.TB, dsn string) *postgres.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, dsn, 16)
	if err != nil {
		tb.Fatalf("open ledger database: %v", err)
	}
	tb.Cleanup(db.Close)
	return db
}

// Client is the client that holds the accounts the tests open and that
// requests their transfers, unless a test is about ownership.
const Client = "client-a"

// TransferKey signs the transfers of the ledger's tests as the transfers
// service signs its own; TransferKeys is the ledger's side, a verifier
// holding its public key (ledger.Rules.Keys).
var TransferKey, TransferKeys = func() (transfersig.Signer, *transfersig.Verifier) {
	k, err := transfersig.NewKey()
	if err != nil {
		panic(err)
	}
	v, err := transfersig.NewVerifier(map[string]ed25519.PublicKey{k.KeyID(): k.Public()})
	if err != nil {
		panic(err)
	}
	return k, v
}()

// Authorize is TransferKey's authorization of c.
func Authorize(c transfersig.Claim) *events.Authorization { return TransferKey.Sign(c) }

// Topics are unique-looking topic names for tests that never reach Kafka.
var Topics = events.DefaultTopics.WithSuffix(".test")

// Account is a row of account.
type Account struct {
	ID      string
	Moeda   string
	Funding bool
	Balance int64
}

// Posting is a row of posting, without its timestamp.
type Posting struct {
	ID        int64
	EntryType string
	EntryID   uuid.UUID
	Account   string
	Direction string
	Amount    int64
}

// Marker is a row of processed_transfer, without its timestamp.
type Marker struct {
	TransferID    uuid.UUID
	Result        string
	Reason        string
	Source        string
	Dest          string
	Amount        int64
	Currency      string
	EventID       uuid.UUID
	ResultEventID uuid.UUID
}

// Event is a row of outbox_event: what the relay will publish.
type Event struct {
	ID         uuid.UUID
	Topic      string
	Key        string
	Type       string
	Payload    map[string]any
	Headers    map[string]string
	OccurredAt time.Time
}

// State is every ledger table, in a stable order (postings and events by
// insertion).
type State struct {
	Accounts []Account
	Postings []Posting
	Markers  []Marker
	Events   []Event
}

const (
	accountsSQL = `SELECT id, currency, funding, balance_cents FROM account ORDER BY id`
	postingsSQL = `SELECT id, entry_type, entry_id, account_id, direction, amount_cents FROM posting ORDER BY id`
	markersSQL  = `
SELECT transfer_id, result, coalesce(reason, ''), source_account, dest_account, amount_cents, currency,
       event_id, coalesce(result_event_id, '00000000-0000-0000-0000-000000000000')
FROM processed_transfer ORDER BY transfer_id`
	eventsSQL = `SELECT id, topic, key, event_type, payload, headers, occurred_at FROM outbox_event ORDER BY seq`
)

// ReadState reads every ledger table.
func ReadState(tb testing.TB, db *postgres.DB) State {
	tb.Helper()
	return State{
		Accounts: readRows(tb, db, "accounts", accountsSQL, func(r pgx.CollectableRow) (a Account, err error) {
			err = r.Scan(&a.ID, &a.Moeda, &a.Funding, &a.Balance)
			return a, err
		}),
		Postings: readRows(tb, db, "postings", postingsSQL, func(r pgx.CollectableRow) (p Posting, err error) {
			err = r.Scan(&p.ID, &p.EntryType, &p.EntryID, &p.Account, &p.Direction, &p.Amount)
			return p, err
		}),
		Markers: readRows(tb, db, "markers", markersSQL, func(r pgx.CollectableRow) (m Marker, err error) {
			err = r.Scan(&m.TransferID, &m.Result, &m.Reason, &m.Source, &m.Dest, &m.Amount, &m.Currency,
				&m.EventID, &m.ResultEventID)
			return m, err
		}),
		Events: readRows(tb, db, "outbox", eventsSQL, func(r pgx.CollectableRow) (e Event, err error) {
			var payload, headers []byte
			if err := r.Scan(&e.ID, &e.Topic, &e.Key, &e.Type, &payload, &headers, &e.OccurredAt); err != nil {
				return e, err
			}
			if err := json.Unmarshal(payload, &e.Payload); err != nil {
				return e, fmt.Errorf("outbox payload: %w", err)
			}
			if err := json.Unmarshal(headers, &e.Headers); err != nil {
				return e, fmt.Errorf("outbox headers: %w", err)
			}
			e.OccurredAt = e.OccurredAt.UTC()
			return e, nil
		}),
	}
}

// readRows runs query and scans each of its rows with scan, failing tb on
// any error; no rows give a nil slice.
func readRows[T any](tb testing.TB, db *postgres.DB, what, query string, scan pgx.RowToFunc[T]) []T {
	tb.Helper()
	rows, err := db.Query(context.Background(), query)
	if err != nil {
		tb.Fatalf("read %s: %v", what, err)
	}
	out, err := pgx.AppendRows([]T(nil), rows, scan)
	if err != nil {
		tb.Fatalf("read %s: %v", what, err)
	}
	return out
}

// invariants are queries that must return no rows; each names what it
// checks.
var invariants = []struct {
	name  string
	query string
}{
	{"per currency, the balances of all accounts, funding included, sum to zero", `
SELECT currency || ' sums to ' || sum(balance_cents) FROM account GROUP BY currency HAVING sum(balance_cents) <> 0`},
	{"each account's balance equals its credits minus its debits", `
SELECT a.id || ': balance ' || a.balance_cents || ', postings ' || coalesce(p.net, 0)
FROM account a
LEFT JOIN (SELECT account_id, sum(CASE direction WHEN 'C' THEN amount_cents ELSE -amount_cents END) AS net
           FROM posting GROUP BY account_id) p ON p.account_id = a.id
WHERE a.balance_cents <> coalesce(p.net, 0)`},
	{"no customer account is negative", `
SELECT id || ': ' || balance_cents FROM account WHERE NOT funding AND balance_cents < 0`},
	{"every entry has exactly one debit and one credit of the same amount", `
SELECT entry_type || ' ' || entry_id FROM posting GROUP BY entry_type, entry_id
HAVING count(*) <> 2 OR count(*) FILTER (WHERE direction = 'D') <> 1
    OR min(amount_cents) <> max(amount_cents)`},
	{"no committed marker is still in processing", `
SELECT transfer_id::text FROM processed_transfer WHERE result = 'EM_PROCESSAMENTO'`},
	// One pass over the postings, grouped per entry, joined with the
	// markers by hash: a check per marker (correlated subqueries) took
	// 3.5 s after 30,000 transfers, and 70 s when the plan nested its loops.
	// The debit and the credit are found by max: that each entry has one of
	// each is the invariant above.
	{"a settled transfer has its two postings, as asked (a captured hold: of the amount captured); any other none", `
SELECT m.transfer_id || ' ' || m.result FROM processed_transfer m
LEFT JOIN reservation r ON r.transfer_id = m.transfer_id
CROSS JOIN LATERAL (SELECT CASE WHEN m.result = 'LIQUIDADA' THEN m.amount_cents
                                WHEN r.state = 'captured' THEN r.captured_cents END AS amount) posted
LEFT JOIN (SELECT entry_id,
                  max(account_id) FILTER (WHERE direction = 'D') AS debited,
                  max(account_id) FILTER (WHERE direction = 'C') AS credited,
                  max(amount_cents) FILTER (WHERE direction = 'D') AS debit,
                  max(amount_cents) FILTER (WHERE direction = 'C') AS credit
             FROM posting WHERE entry_type = 'TRANSFER' GROUP BY entry_id) p ON p.entry_id = m.transfer_id
WHERE (posted.amount IS NOT NULL) <> (p.entry_id IS NOT NULL)
   OR (posted.amount IS NOT NULL AND (p.debited IS DISTINCT FROM m.source_account OR p.credited IS DISTINCT FROM m.dest_account
                                      OR p.debit IS DISTINCT FROM posted.amount OR p.credit IS DISTINCT FROM posted.amount))`},
	{"every transfer posting belongs to a settled transfer or a captured hold", `
SELECT p.entry_id::text FROM posting p LEFT JOIN processed_transfer m ON m.transfer_id = p.entry_id
LEFT JOIN reservation r ON r.transfer_id = p.entry_id
WHERE p.entry_type = 'TRANSFER' AND m.result IS DISTINCT FROM 'LIQUIDADA' AND r.state IS DISTINCT FROM 'captured'`},
	// Holds have their own events invariant (holdInvariants).
	{"every decided transfer has exactly one result event, of its result", `
SELECT m.transfer_id || ' ' || m.result || ' events ' || count(e.id) FROM processed_transfer m
LEFT JOIN outbox_event e ON e.aggregate_id = m.transfer_id::text
WHERE m.result <> 'RESERVADA'
GROUP BY m.transfer_id, m.result, m.result_event_id
HAVING count(e.id) <> 1
    OR bool_or(e.id IS DISTINCT FROM m.result_event_id)
    OR bool_or(e.event_type <> CASE m.result WHEN 'LIQUIDADA' THEN 'TransferenciaLiquidada' ELSE 'TransferenciaRejeitada' END)
    OR bool_or(e.payload->>'transferenciaId' IS DISTINCT FROM m.transfer_id::text)
    OR bool_or(e.key <> m.source_account)`},
	{"every result event belongs to a decided transfer, a closed hold or a decided refund", `
SELECT e.id::text FROM outbox_event e LEFT JOIN processed_transfer m ON m.result_event_id = e.id
WHERE m.transfer_id IS NULL AND NOT EXISTS (SELECT 1 FROM reservation r WHERE r.closed_event_id = e.id)
  AND NOT EXISTS (SELECT 1 FROM refund f WHERE f.result_event_id = e.id)`},
	{"every deposit has its credit posting of its amount", `
SELECT d.id::text FROM deposit d
WHERE NOT EXISTS (SELECT 1 FROM posting p WHERE p.entry_type = 'DEPOSIT' AND p.entry_id = d.id
                  AND p.account_id = d.account_id AND p.direction = 'C' AND p.amount_cents = d.amount_cents)`},
}

// CheckInvariants fails the test for every broken invariant of the ledger:
// those the schema cannot enforce (sums per currency, balances equal to
// postings, reserved amounts equal to the open holds, refunds within what
// was settled, the running balance of every posting) and the consistency
// of markers, reservations, refunds, postings and result events.
func CheckInvariants(tb testing.TB, db *postgres.DB) {
	tb.Helper()
	ctx := context.Background()
	for _, inv := range slices.Concat(invariants, holdInvariants, refundInvariants, historyInvariants) {
		rows, err := db.Query(ctx, inv.query)
		if err != nil {
			tb.Fatalf("invariant %q: %v", inv.name, err)
		}
		var bad []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				tb.Fatalf("invariant %q: %v", inv.name, err)
			}
			bad = append(bad, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			tb.Fatalf("invariant %q: %v", inv.name, err)
		}
		if len(bad) > 0 {
			if len(bad) > 10 {
				bad = append(bad[:10], "...")
			}
			tb.Errorf("invariant broken: %s: %v", inv.name, bad)
		}
	}
}

// AuthorizeRefund is TransferKey's authorization of the refund c.
func AuthorizeRefund(c transfersig.RefundClaim) *events.Authorization {
	return TransferKey.SignRefund(c)
}
