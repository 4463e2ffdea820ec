package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
)

// at is the fixed settlement time of the tests.
var at = time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// decide is the settlement of the tests: ownership enforced with the
// ledgertest keys, the ledgertest topics, stamped at at.
var decide = ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}.Decider(at)

func newStore(tb testing.TB) (*postgres.Store, *pgplatform.DB) {
	tb.Helper()
	db := ledgertest.NewDB(tb)
	return postgres.New(db, outbox.New(db)), db
}

// open creates account id in currency with balance cents deposited.
func open(tb testing.TB, s *postgres.Store, id, currency string, balance int64) {
	tb.Helper()
	ctx := context.Background()
	if _, _, err := s.CreateAccount(ctx, id, currency, ledgertest.Client); err != nil {
		tb.Fatalf("create account %s: %v", id, err)
	}
	if balance > 0 {
		// A key derived from the account, so that two databases set up
		// alike hold the same rows.
		key := uuid.NewSHA1(uuid.NameSpaceOID, []byte("initial deposit "+id))
		if _, _, err := s.Deposit(ctx, ledger.DepositRequest{ID: key, AccountID: id, AmountCents: balance, ClientID: ledgertest.Client}); err != nil {
			tb.Fatalf("deposit %d into %s: %v", balance, id, err)
		}
	}
}

func deposit(tb testing.TB, s *postgres.Store, id string, cents int64) {
	tb.Helper()
	if _, _, err := s.Deposit(context.Background(), ledger.DepositRequest{ID: uuid.New(), AccountID: id, AmountCents: cents, ClientID: ledgertest.Client}); err != nil {
		tb.Fatalf("deposit %d into %s: %v", cents, id, err)
	}
}

// transfer is a transfer of ledgertest.Client, signed as the transfers
// service signs.
func transfer(src, dst string, cents int64, currency string) ledger.Transfer {
	return signed(ledger.Transfer{ID: uuid.New(), EventID: uuid.New(), Source: src, Dest: dst,
		AmountCents: cents, Currency: currency, ClientID: ledgertest.Client, Traceparent: traceparent})
}

// signed is t with ledgertest's authorization of it.
func signed(t ledger.Transfer) ledger.Transfer {
	t.Authorization = ledgertest.Authorize(transfersig.Claim{TransferID: t.ID, Source: t.Source, Destination: t.Dest,
		AmountCents: t.AmountCents, Currency: t.Currency, Client: t.ClientID, Hold: t.Hold, ExpiresAt: t.ExpiresAt})
	return t
}

func settle(tb testing.TB, s *postgres.Store, ts ...ledger.Transfer) []ledger.Result {
	tb.Helper()
	rs, err := s.Settle(context.Background(), ts, decide)
	if err != nil {
		tb.Fatalf("settle: %v", err)
	}
	return rs
}

func balances(tb testing.TB, db *pgplatform.DB) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	for _, a := range ledgertest.ReadState(tb, db).Accounts {
		out[a.ID] = a.Balance
	}
	return out
}

func TestSettleAppliesTheRulesInOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		t      ledger.Transfer
		want   ledger.Result // TransferID filled in
		source int64         // balances after
		dest   int64
	}{
		{"settles", transfer("CC-001", "CC-002", 30_000, "BRL"),
			ledger.Result{Outcome: ledger.Settled}, 70_000, 30_000},
		{"settles the whole balance", transfer("CC-001", "CC-002", 100_000, "BRL"),
			ledger.Result{Outcome: ledger.Settled}, 0, 100_000},
		{"unknown source", transfer("CC-404", "CC-002", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonAccountNotFound}, 0, 0},
		{"unknown destination", transfer("CC-001", "CC-404", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonAccountNotFound}, 100_000, 0},
		{"from the funding account", transfer("__FUNDING__BRL", "CC-002", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonAccountNotFound}, -100_000, 0},
		{"to the funding account", transfer("CC-001", "__FUNDING__BRL", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonAccountNotFound}, 100_000, -100_000},
		{"unknown account before currency", transfer("CC-USD", "CC-404", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonAccountNotFound}, 0, 0},
		{"destination in another currency", transfer("CC-001", "CC-USD", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonCurrencyMismatch}, 100_000, 0},
		{"transfer in another currency", transfer("CC-001", "CC-002", 1, "USD"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonCurrencyMismatch}, 100_000, 0},
		{"currency before balance", transfer("CC-001", "CC-002", 100_001, "USD"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonCurrencyMismatch}, 100_000, 0},
		{"insufficient balance", transfer("CC-001", "CC-002", 100_001, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds}, 100_000, 0},
		{"empty account", transfer("CC-002", "CC-001", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds}, 0, 100_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, db := newStore(t)
			open(t, s, "CC-001", "BRL", 100_000)
			open(t, s, "CC-002", "BRL", 0)
			open(t, s, "CC-USD", "USD", 0)
			before := ledgertest.ReadState(t, db)

			got := settle(t, s, tc.t)
			tc.want.TransferID = tc.t.ID
			if diff := cmp.Diff([]ledger.Result{tc.want}, got); diff != "" {
				t.Fatalf("result mismatch (-want +got):\n%s", diff)
			}
			after := ledgertest.ReadState(t, db)
			bal := balances(t, db)
			if bal[tc.t.Source] != tc.source || bal[tc.t.Dest] != tc.dest {
				t.Errorf("balances %s=%d %s=%d, want %d and %d", tc.t.Source, bal[tc.t.Source], tc.t.Dest, bal[tc.t.Dest], tc.source, tc.dest)
			}

			var wantPostings []ledgertest.Posting
			wantEvent := ledgertest.Event{
				Key:        tc.t.Source,
				Headers:    map[string]string{events.HeaderCorrelationID: tc.t.ID.String(), events.HeaderTraceparent: traceparent},
				OccurredAt: at,
			}
			if tc.want.Outcome == ledger.Settled {
				next := before.Postings[len(before.Postings)-1].ID + 1
				wantPostings = []ledgertest.Posting{
					{ID: next, EntryType: "TRANSFER", EntryID: tc.t.ID, Account: tc.t.Source, Direction: "D", Amount: tc.t.AmountCents},
					{ID: next + 1, EntryType: "TRANSFER", EntryID: tc.t.ID, Account: tc.t.Dest, Direction: "C", Amount: tc.t.AmountCents},
				}
				wantEvent.ID = events.DerivedID("liquidada", tc.t.ID)
				wantEvent.Topic, wantEvent.Type = ledgertest.Topics.Settled, events.TypeSettled
				wantEvent.Payload = map[string]any{"eventoId": wantEvent.ID.String(), "transferenciaId": tc.t.ID.String(),
					"ocorridoEm": "2026-11-29T22:00:00Z", "titularDestino": ledgertest.Client}
			} else {
				wantEvent.ID = events.DerivedID("rejeitada-ledger", tc.t.ID)
				wantEvent.Topic, wantEvent.Type = ledgertest.Topics.Rejected, events.TypeRejected
				wantEvent.Payload = map[string]any{"eventoId": wantEvent.ID.String(), "transferenciaId": tc.t.ID.String(),
					"motivo": tc.want.Reason, "ocorridoEm": "2026-11-29T22:00:00Z"}
			}
			if diff := cmp.Diff(wantPostings, after.Postings[len(before.Postings):], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("new postings mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]ledgertest.Event{wantEvent}, after.Events); diff != "" {
				t.Errorf("outbox mismatch (-want +got):\n%s", diff)
			}
			wantMarker := ledgertest.Marker{TransferID: tc.t.ID, Result: string(tc.want.Outcome), Reason: tc.want.Reason,
				Source: tc.t.Source, Dest: tc.t.Dest, Amount: tc.t.AmountCents, Currency: tc.t.Currency,
				EventID: tc.t.EventID, ResultEventID: wantEvent.ID}
			if diff := cmp.Diff([]ledgertest.Marker{wantMarker}, after.Markers); diff != "" {
				t.Errorf("marker mismatch (-want +got):\n%s", diff)
			}
			ledgertest.CheckInvariants(t, db)
		})
	}
}

func TestRedeliveryDoesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// between runs between the first delivery and the redelivery.
		between func(t *testing.T, s *postgres.Store)
		amount  int64
		want    ledger.Result
		source  int64
	}{
		{"settled transfer debits once", func(*testing.T, *postgres.Store) {}, 30_000,
			ledger.Result{Outcome: ledger.Settled}, 70_000},
		{"rejected transfer stays rejected after the account is funded", func(t *testing.T, s *postgres.Store) {
			deposit(t, s, "CC-001", 1_000_000)
		}, 500_000, ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds}, 1_100_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, db := newStore(t)
			open(t, s, "CC-001", "BRL", 100_000)
			open(t, s, "CC-002", "BRL", 0)
			tr := transfer("CC-001", "CC-002", tc.amount, "BRL")
			tc.want.TransferID = tr.ID

			if diff := cmp.Diff([]ledger.Result{tc.want}, settle(t, s, tr)); diff != "" {
				t.Fatalf("first delivery mismatch (-want +got):\n%s", diff)
			}
			first := ledgertest.ReadState(t, db)
			tc.between(t, s)
			mid := ledgertest.ReadState(t, db)
			for i := range 3 {
				got := settle(t, s, tr)
				if diff := cmp.Diff([]ledger.Result{{TransferID: tr.ID, Outcome: ledger.Duplicate}}, got); diff != "" {
					t.Fatalf("redelivery %d mismatch (-want +got):\n%s", i+1, diff)
				}
			}
			if diff := cmp.Diff(mid, ledgertest.ReadState(t, db)); diff != "" {
				t.Errorf("redelivery changed the ledger (-before +after):\n%s", diff)
			}
			if got := balances(t, db)["CC-001"]; got != tc.source {
				t.Errorf("source balance = %d, want %d", got, tc.source)
			}
			if len(first.Events) != 1 || len(mid.Events) != 1 {
				t.Errorf("result events = %d then %d, want 1", len(first.Events), len(mid.Events))
			}
			ledgertest.CheckInvariants(t, db)
		})
	}
}

func TestConcurrentDeliveriesOfOneTransferSettleOnce(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 100_000)
	open(t, s, "CC-002", "BRL", 0)
	tr := transfer("CC-001", "CC-002", 30_000, "BRL")

	const n = 8
	results := make([]ledger.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var rs []ledger.Result
			rs, errs[i] = s.Settle(context.Background(), []ledger.Transfer{tr}, decide)
			if errs[i] == nil {
				results[i] = rs[0]
			}
		})
	}
	wg.Wait()
	count := map[ledger.Outcome]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("delivery %d: %v", i, errs[i])
		}
		count[results[i].Outcome]++
	}
	if diff := cmp.Diff(map[ledger.Outcome]int{ledger.Settled: 1, ledger.Duplicate: n - 1}, count); diff != "" {
		t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"CC-001": 70_000, "CC-002": 30_000, "__FUNDING__BRL": -100_000}, balances(t, db)); diff != "" {
		t.Errorf("balances mismatch (-want +got):\n%s", diff)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestBatchEqualsOneByOne settles the same deliveries one per transaction in
// one database and in batches in another, and compares everything.
func TestBatchEqualsOneByOne(t *testing.T) {
	t.Parallel()
	one, oneDB := newStore(t)
	batch, batchDB := newStore(t)
	accounts := []struct {
		id, currency string
		balance      int64
	}{{"A", "BRL", 100}, {"B", "BRL", 50}, {"C", "BRL", 0}, {"D", "BRL", 3_000}, {"E", "USD", 500}}
	for _, s := range []*postgres.Store{one, batch} {
		for _, a := range accounts {
			open(t, s, a.id, a.currency, a.balance)
		}
	}

	// Hand-made dependencies first, then many generated transfers over few
	// accounts with small balances, so that most outcomes depend on order.
	ab := transfer("A", "B", 100, "BRL")
	bc := transfer("B", "C", 150, "BRL") // only after A->B
	ca := transfer("C", "A", 150, "BRL")
	deliveries := []ledger.Transfer{
		ab, bc, ab, // a duplicate inside one batch
		transfer("A", "B", 1, "BRL"), // A is empty now
		ca, bc,                       // duplicate of a settled one
		transfer("A", "E", 10, "BRL"), transfer("E", "A", 10, "USD"), transfer("A", "Z", 10, "BRL"),
		transfer("D", "D", 10, "BRL"), // same account: settles, net zero
	}
	ids := []string{"A", "B", "C", "D", "E", "Z"}
	rnd := rand.New(rand.NewPCG(1, 2))
	var prev []ledger.Transfer
	for range 300 {
		cur := "BRL"
		if rnd.IntN(15) == 0 {
			cur = "USD"
		}
		tr := transfer(ids[rnd.IntN(len(ids))], ids[rnd.IntN(len(ids))], 1+rnd.Int64N(80), cur)
		deliveries = append(deliveries, tr)
		prev = append(prev, tr)
		if rnd.IntN(8) == 0 { // redeliver an earlier one, in this batch or an older one
			deliveries = append(deliveries, prev[len(prev)-1-rnd.IntN(min(len(prev), 60))])
		}
	}

	var oneResults, batchResults []ledger.Result
	for _, tr := range deliveries {
		oneResults = append(oneResults, settle(t, one, tr)...)
	}
	sizes := []int{3, 50, 1, 7, 50, 50, 2, 50, 50, 50, 50, 50}
	for rest := deliveries; len(rest) > 0; sizes = append(sizes[1:], sizes[0]) {
		n := min(sizes[0], len(rest))
		batchResults = append(batchResults, settle(t, batch, rest[:n]...)...)
		rest = rest[n:]
	}

	if diff := cmp.Diff(oneResults, batchResults); diff != "" {
		t.Errorf("results mismatch (-one by one +batched):\n%s", diff)
	}
	oneState, batchState := ledgertest.ReadState(t, oneDB), ledgertest.ReadState(t, batchDB)
	if diff := cmp.Diff(oneState, batchState); diff != "" {
		t.Errorf("ledger mismatch (-one by one +batched):\n%s", diff)
	}
	count := map[ledger.Outcome]int{}
	for _, r := range oneResults {
		count[r.Outcome]++
	}
	t.Logf("outcomes: %v", count)
	if count[ledger.Settled] < 30 || count[ledger.Rejected] < 30 || count[ledger.Duplicate] < 20 {
		t.Errorf("the deliveries do not exercise every outcome enough: %v", count)
	}
	if ab := oneResults[0]; ab.Outcome != ledger.Settled {
		t.Errorf("A->B = %v, want settled", ab)
	}
	if bc := oneResults[1]; bc.Outcome != ledger.Settled {
		t.Errorf("B->C after A->B = %v, want settled", bc)
	}
	ledgertest.CheckInvariants(t, oneDB)
	ledgertest.CheckInvariants(t, batchDB)
}

// TestFailedBatchWritesNothing makes the settlement transaction fail at each
// of its writes for one transfer of a batch: nothing of the batch may remain.
func TestFailedBatchWritesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		table string
		on    string
	}{
		{"claiming the marker", "processed_transfer", "INSERT"},
		{"enqueuing the result event", "outbox_event", "INSERT"},
		{"writing the postings", "posting", "INSERT"},
		{"recording the result", "processed_transfer", "UPDATE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, db := newStore(t)
			open(t, s, "A", "BRL", 1_000)
			open(t, s, "B", "BRL", 0)
			batch := []ledger.Transfer{
				transfer("A", "B", 100, "BRL"), transfer("B", "A", 50, "BRL"),
				transfer("A", "B", 10_000, "BRL"), transfer("A", "B", 200, "BRL"),
			}
			failFor(t, db, tc.table, tc.on, batch[3].ID)
			before := ledgertest.ReadState(t, db)

			if _, err := s.Settle(context.Background(), batch, decide); err == nil {
				t.Fatal("settle succeeded despite the injected failure")
			}
			if diff := cmp.Diff(before, ledgertest.ReadState(t, db)); diff != "" {
				t.Errorf("the failed batch left writes behind (-before +after):\n%s", diff)
			}
			// One by one, the others settle exactly as before the failure.
			var got []ledger.Result
			for _, tr := range batch[:3] {
				got = append(got, settle(t, s, tr)...)
			}
			want := []ledger.Result{
				{TransferID: batch[0].ID, Outcome: ledger.Settled},
				{TransferID: batch[1].ID, Outcome: ledger.Settled},
				{TransferID: batch[2].ID, Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("results mismatch (-want +got):\n%s", diff)
			}
			ledgertest.CheckInvariants(t, db)
		})
	}
}

// failFor makes every op (INSERT or UPDATE) of a row of table that mentions
// id fail, inside the database: an error in the middle of the transaction.
func failFor(tb testing.TB, db *pgplatform.DB, table, op string, id uuid.UUID) {
	tb.Helper()
	ctx := context.Background()
	const fn = `
CREATE OR REPLACE FUNCTION test_fail_for() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(NEW)::text LIKE '%' || TG_ARGV[0] || '%' THEN
        RAISE EXCEPTION 'injected failure for %', TG_ARGV[0];
    END IF;
    RETURN NEW;
END
$$`
	if _, err := db.Exec(ctx, fn); err != nil {
		tb.Fatalf("create failure function: %v", err)
	}
	trg := fmt.Sprintf(`CREATE TRIGGER test_fail BEFORE %s ON %s FOR EACH ROW EXECUTE FUNCTION test_fail_for(%s)`,
		op, pgx.Identifier{table}.Sanitize(), "'"+id.String()+"'")
	if _, err := db.Exec(ctx, trg); err != nil {
		tb.Fatalf("create failure trigger: %v", err)
	}
}

func TestSchemaEnforcesInvariants(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 100)
	ctx := context.Background()
	tests := []struct {
		name string
		sql  string
		code string
	}{
		{"postings cannot be changed", `UPDATE posting SET amount_cents = 1`, "23001"},
		{"postings cannot be deleted", `DELETE FROM posting`, "23001"},
		{"postings cannot be truncated", `TRUNCATE posting`, "23001"},
		{"a customer balance cannot go negative", `UPDATE account SET balance_cents = -1 WHERE id = 'CC-001'`, "23514"},
		{"a funding account may go negative", `UPDATE account SET balance_cents = balance_cents - 1 WHERE id = '__FUNDING__BRL'`, ""},
		{"funding accounts are named after their currency", `INSERT INTO account (id, currency, funding) VALUES ('__FUNDING__USD', 'BRL', true)`, "23514"},
		{"the funding prefix is reserved", `INSERT INTO account (id, currency) VALUES ('__FUNDING__X', 'BRL')`, "23514"},
		{"account ids have the contract's shape", `INSERT INTO account (id, currency) VALUES ('has space', 'BRL')`, "23514"},
		{"a transfer has one debit at most", `INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents)
			SELECT entry_type, entry_id, account_id, direction, amount_cents FROM posting LIMIT 1`, "23505"},
		{"a posting names an existing account", `INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents)
			VALUES ('TRANSFER', gen_random_uuid(), 'CC-001', 'D', 1), ('TRANSFER', gen_random_uuid(), 'CC-404', 'C', 1)`, "23503"},
		{"accounts cannot be deleted", `DELETE FROM account WHERE id = 'CC-001'`, "23001"},
		{"accounts cannot be truncated", `TRUNCATE account CASCADE`, "23001"},
		{"account ids cannot change", `UPDATE account SET id = 'CC-002' WHERE id = 'CC-001'`, "23001"},
		{"account currencies cannot change", `UPDATE account SET currency = 'USD' WHERE id = 'CC-001'`, "23001"},
		{"a balance can change", `UPDATE account SET balance_cents = balance_cents + 1 WHERE id = 'CC-001'`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, tc.sql)
			if got := pgplatform.Code(err); got != tc.code {
				t.Errorf("SQLSTATE = %q (err %v), want %q", got, err, tc.code)
			}
		})
	}
}

// deadlockFreeDB is a pool on a fresh ledger database whose tracer sees the
// outcome of every statement, batched or not, before InTx decides whether
// to retry its transaction; the test fails at its end if any statement
// ended in a deadlock (40P01).
func deadlockFreeDB(t *testing.T) *pgplatform.DB {
	t.Helper()
	db, tr := tracedDB(t)
	t.Cleanup(func() {
		if n := tr.deadlocks.Load(); n > 0 {
			t.Errorf("%d statement(s) ended in a deadlock", n)
		}
	})
	return db
}

// tracedDB is a pool of up to 16 connections on a fresh ledger database,
// with a deadlockTracer.
func tracedDB(t *testing.T) (*pgplatform.DB, *deadlockTracer) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(ledgertest.NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
	tr := &deadlockTracer{}
	cfg.ConnConfig.Tracer = tr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pgplatform.Wrap(pool), tr
}

// TestDeadlockTracerSeesDeadlocks: two transactions that wait for each
// other's lock make one statement fail with 40P01, and the tracer counts
// it, so deadlockFreeDB does catch a deadlock that InTx would retry away.
func TestDeadlockTracerSeesDeadlocks(t *testing.T) {
	t.Parallel()
	db, tr := tracedDB(t)
	ctx := context.Background()
	var txs [2]pgx.Tx
	for i := range txs {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(i)); err != nil {
			t.Fatal(err)
		}
		txs[i] = tx
	}
	errs := make(chan error, 2)
	for i, tx := range txs {
		go func() {
			_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(1-i))
			if err != nil {
				_ = tx.Rollback(ctx) // frees the other
			}
			errs <- err
		}()
	}
	var codes []string
	for range txs {
		codes = append(codes, pgplatform.Code(<-errs))
	}
	if got := tr.deadlocks.Load(); got != 1 {
		t.Errorf("tracer counted %d deadlocks (SQLSTATEs %q), want 1", got, codes)
	}
}

// deadlockTracer counts the statements that end in a deadlock; it is a
// pgx.QueryTracer and a pgx.BatchTracer.
type deadlockTracer struct{ deadlocks atomic.Int64 }

func (d *deadlockTracer) note(err error) {
	if pgplatform.Code(err) == pgplatform.CodeDeadlockDetected {
		d.deadlocks.Add(1)
	}
}

func (d *deadlockTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (d *deadlockTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	d.note(data.Err)
}

func (d *deadlockTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (d *deadlockTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	d.note(data.Err)
}

func (d *deadlockTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
