package postgres_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
)

// refundOf is a refund of cents of t asked by client (an operator when
// operator), signed as the transfers service signs a refund.
func refundOf(t ledger.Transfer, cents int64, client string, operator bool) ledger.Refund {
	f := ledger.Refund{ID: uuid.New(), TransferID: t.ID, EventID: uuid.New(), Source: t.Source, Dest: t.Dest,
		AmountCents: cents, Currency: t.Currency, ClientID: client, Operator: operator, Traceparent: traceparent}
	return signedRefund(f)
}

// signedRefund is f with ledgertest's authorization of it.
func signedRefund(f ledger.Refund) ledger.Refund {
	f.Authorization = ledgertest.AuthorizeRefund(transfersig.RefundClaim{RefundID: f.ID, TransferID: f.TransferID,
		Source: f.Source, Destination: f.Dest, AmountCents: f.AmountCents, Currency: f.Currency, Client: f.ClientID,
		Operator: f.Operator})
	return f
}

// refunder is the ledger's service over s, with the tests' rules, at at.
func refunder(s *postgres.Store) *ledger.Service {
	return ledger.NewService(s, rules, func() time.Time { return at })
}

// refund decides fs in one transaction and fails the test on error.
func refund(tb testing.TB, s *postgres.Store, fs ...ledger.Refund) []ledger.RefundResult {
	tb.Helper()
	rs, err := refunder(s).Refund(context.Background(), fs)
	if err != nil {
		tb.Fatalf("refund: %v", err)
	}
	return rs
}

// settled is a ledger where CC-001 paid 60,000 to CC-002 (which holds
// 10,000 of its own besides): the store, its database and the transfer.
// CC-002's titular is ledgertest.Client, as every account of open.
func settled(tb testing.TB) (*postgres.Store, *pgplatform.DB, ledger.Transfer) {
	tb.Helper()
	s, db := newStore(tb)
	open(tb, s, "CC-001", "BRL", 100_000)
	open(tb, s, "CC-002", "BRL", 10_000)
	tr := transfer("CC-001", "CC-002", 60_000, "BRL")
	if rs := settle(tb, s, tr); rs[0].Outcome != ledger.Settled {
		tb.Fatalf("settle: %+v", rs[0])
	}
	return s, db, tr
}

func outcome(r ledger.RefundResult) string { return string(r.Outcome) + " " + r.Reason }

// TestRefundRules: each rule of DecideRefund, on the real store: a
// rejection posts nothing and writes EstornoRejeitado with its motivo; a
// settlement debits the destination, credits the source and writes
// EstornoLiquidado; every result event is keyed by the transfer's source
// and has the id derived from the refund's.
func TestRefundRules(t *testing.T) {
	t.Parallel()
	const rejected, refunded = "REJEITADO ", "LIQUIDADO "
	tests := []struct {
		name string
		// make builds the refund on the settled ledger (s, tr).
		make func(t *testing.T, s *postgres.Store, tr ledger.Transfer) ledger.Refund
		want string
		// moved is what the refund moved from CC-002 back to CC-001.
		moved int64
	}{
		{"the titular refunds part", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			return refundOf(tr, 20_000, ledgertest.Client, false)
		}, refunded, 20_000},
		{"the titular refunds all", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			return refundOf(tr, 60_000, ledgertest.Client, false)
		}, refunded, 60_000},
		{"an operator refunds a transfer it did not receive", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			return refundOf(tr, 1_000, "operator-1", true)
		}, refunded, 1_000},
		{"unsigned", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			f := refundOf(tr, 1_000, ledgertest.Client, false)
			f.Authorization = nil
			return f
		}, rejected + events.ReasonUnauthorizedSource, 0},
		{"signed for another amount", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			f := refundOf(tr, 1_000, ledgertest.Client, false)
			f.AmountCents = 2_000
			return f
		}, rejected + events.ReasonUnauthorizedSource, 0},
		{"an operator's claim forged from a client's signature", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			f := refundOf(tr, 1_000, "client-b", false)
			f.Operator = true
			return f
		}, rejected + events.ReasonUnauthorizedSource, 0},
		{"signed with a transfer's signature", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			f := refundOf(tr, 60_000, ledgertest.Client, false)
			f.Authorization = tr.Authorization
			return f
		}, rejected + events.ReasonUnauthorizedSource, 0},
		{"by a client that is not the destination's titular", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			return refundOf(tr, 1_000, "client-b", false)
		}, rejected + events.ReasonUnauthorizedSource, 0},
		{"naming no client", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			return refundOf(tr, 1_000, "", false)
		}, rejected + events.ReasonUnauthorizedSource, 0},
		{"of a transfer the ledger never saw", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			tr.ID = uuid.New()
			return refundOf(tr, 1_000, ledgertest.Client, false)
		}, rejected + events.ReasonNotSettled, 0},
		{"of a rejected transfer", func(t *testing.T, s *postgres.Store, _ ledger.Transfer) ledger.Refund {
			poor := transfer("CC-001", "CC-002", 1_000_000, "BRL")
			if rs := settle(t, s, poor); rs[0].Outcome != ledger.Rejected {
				t.Fatalf("setup: %+v", rs[0])
			}
			return refundOf(poor, 1_000, ledgertest.Client, false)
		}, rejected + events.ReasonNotSettled, 0},
		{"of an open hold", func(t *testing.T, s *postgres.Store, _ ledger.Transfer) ledger.Refund {
			h := hold("CC-001", "CC-002", 1_000)
			if rs := settle(t, s, h); rs[0].Outcome != ledger.Reserved {
				t.Fatalf("setup: %+v", rs[0])
			}
			return refundOf(h, 1_000, ledgertest.Client, false)
		}, rejected + events.ReasonNotSettled, 0},
		{"naming other accounts than the transfer's", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			tr.Source = "CC-003"
			return refundOf(tr, 1_000, ledgertest.Client, false)
		}, rejected + events.ReasonNotSettled, 0},
		{"in another currency", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			tr.Currency = "USD"
			return refundOf(tr, 1_000, ledgertest.Client, false)
		}, rejected + events.ReasonNotSettled, 0},
		{"of more than was settled", func(_ *testing.T, _ *postgres.Store, tr ledger.Transfer) ledger.Refund {
			return refundOf(tr, 60_001, ledgertest.Client, false)
		}, rejected + events.ReasonExceedsRefundable, 0},
		{"of more than the destination has available", func(t *testing.T, s *postgres.Store, tr ledger.Transfer) ledger.Refund {
			// CC-002 holds 70,000 and reserves 65,000 of it: 5,000 remain.
			h := hold("CC-002", "CC-003", 65_000)
			if rs := settle(t, s, h); rs[0].Outcome != ledger.Reserved {
				t.Fatalf("setup: %+v", rs[0])
			}
			return refundOf(tr, 5_001, ledgertest.Client, false)
		}, rejected + events.ReasonInsufficientFunds, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, db, tr := settled(t)
			open(t, s, "CC-003", "BRL", 0)
			f := tc.make(t, s, tr)
			before := balances(t, db)
			rs := refund(t, s, f)
			if got := outcome(rs[0]); got != tc.want || rs[0].RefundID != f.ID || rs[0].TransferID != f.TransferID || rs[0].Replayed {
				t.Fatalf("result %+v, want %q", rs[0], tc.want)
			}
			after := balances(t, db)
			if after["CC-002"] != before["CC-002"]-tc.moved || after["CC-001"] != before["CC-001"]+tc.moved {
				t.Errorf("balances %v -> %v, want %d moved from CC-002 to CC-001", before, after, tc.moved)
			}
			e := lastEvent(t, db)
			wantType, wantID := events.TypeRefundRejected, events.DerivedID(events.KindRefundRejected, f.ID)
			if tc.moved > 0 {
				wantType, wantID = events.TypeRefundSettled, events.DerivedID(events.KindRefundSettled, f.ID)
			}
			if e.Type != wantType || e.ID != wantID || e.Key != f.Source || e.Payload["estornoId"] != f.ID.String() ||
				e.Payload["transferenciaId"] != f.TransferID.String() || e.Headers[events.HeaderTraceparent] != traceparent {
				t.Errorf("result event %+v, want %s %s keyed %s", e, wantType, wantID, f.Source)
			}
			if tc.moved == 0 && e.Payload["motivo"] != rs[0].Reason {
				t.Errorf("motivo %v, want %s", e.Payload["motivo"], rs[0].Reason)
			}
			ledgertest.CheckInvariants(t, db)
		})
	}
}

// TestPartialRefunds: a partial refund, then another, up to what was
// settled; then any more is VALOR_EXCEDE_ESTORNAVEL. The refunds'
// postings show on /lancamentos with the transfer's id and their own.
func TestPartialRefunds(t *testing.T) {
	t.Parallel()
	s, db, tr := settled(t)
	first, second, third := refundOf(tr, 25_000, ledgertest.Client, false), refundOf(tr, 35_000, ledgertest.Client, false),
		refundOf(tr, 1, ledgertest.Client, false)
	for _, step := range []struct {
		f    ledger.Refund
		want string
	}{
		{first, "LIQUIDADO "}, {second, "LIQUIDADO "}, {third, "REJEITADO " + events.ReasonExceedsRefundable},
	} {
		if got := outcome(refund(t, s, step.f)[0]); got != step.want {
			t.Fatalf("refund of %d: %q, want %q", step.f.AmountCents, got, step.want)
		}
	}
	if diff := cmp.Diff(map[string]int64{"CC-001": 100_000, "CC-002": 10_000, "__FUNDING__BRL": -110_000}, balances(t, db)); diff != "" {
		t.Errorf("balances mismatch (-want +got):\n%s", diff)
	}
	ps, err := s.Postings(context.Background(), "CC-002", 1<<62, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, string(p.Direction)+" "+p.EntryID.String()+" "+p.RefundID.String())
	}
	nilID := uuid.Nil.String()
	want := []string{"D " + tr.ID.String() + " " + second.ID.String(), "D " + tr.ID.String() + " " + first.ID.String(),
		"C " + tr.ID.String() + " " + nilID}
	if diff := cmp.Diff(want, got[:3]); diff != "" {
		t.Errorf("CC-002's postings mismatch (-want +got):\n%s", diff)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestRefundOfACapturedHold: a hold of 60,000 captured for 40,000 is
// refundable up to the 40,000 captured, not the 60,000 reserved.
func TestRefundOfACapturedHold(t *testing.T) {
	t.Parallel()
	s, db, h := held(t)
	if rs := closeAt(t, s, at, captureOf(h, 40_000)); rs[0].Outcome != ledger.Settled {
		t.Fatalf("capture: %+v", rs[0])
	}
	if got := outcome(refund(t, s, refundOf(h, 40_001, ledgertest.Client, false))[0]); got != "REJEITADO "+events.ReasonExceedsRefundable {
		t.Errorf("a refund of more than captured: %q", got)
	}
	rs := refund(t, s, refundOf(h, 30_000, ledgertest.Client, false), refundOf(h, 10_001, ledgertest.Client, false),
		refundOf(h, 10_000, ledgertest.Client, false))
	var got []string
	for _, r := range rs {
		got = append(got, outcome(r))
	}
	want := []string{"LIQUIDADO ", "REJEITADO " + events.ReasonExceedsRefundable, "LIQUIDADO "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a batch of refunds of the capture mismatch (-want +got):\n%s", diff)
	}
	if m := moneyOf(t, db, "CC-001"); m != (money{Balance: 100_000}) {
		t.Errorf("CC-001: %+v, want all of its 100,000 back", m)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestRefundRedeliveryPostsOnce: a refund delivered again, alone or twice
// in one batch, returns its first result (Replayed) and posts, and
// writes, nothing more; a rejected refund redelivered once it could
// settle stays rejected.
func TestRefundRedeliveryPostsOnce(t *testing.T) {
	t.Parallel()
	s, db, tr := settled(t)
	f := refundOf(tr, 20_000, ledgertest.Client, false)
	poor := refundOf(tr, 60_000, ledgertest.Client, false) // exceeds once f is settled
	rs := refund(t, s, f, f, poor)
	if !rs[1].Replayed || outcome(rs[0]) != "LIQUIDADO " || outcome(rs[1]) != "LIQUIDADO " || rs[1].RefundID != f.ID ||
		outcome(rs[2]) != "REJEITADO "+events.ReasonExceedsRefundable {
		t.Fatalf("first delivery: %+v", rs)
	}
	state := ledgertest.ReadState(t, db)
	// The second refund of 20,000 is back: now 60,000 would fit.
	rs = refund(t, s, f, poor)
	for i, want := range []string{"LIQUIDADO ", "REJEITADO " + events.ReasonExceedsRefundable} {
		if !rs[i].Replayed || outcome(rs[i]) != want || rs[i].TransferID != tr.ID {
			t.Errorf("redelivery %d: %+v, want replayed %q", i, rs[i], want)
		}
	}
	if diff := cmp.Diff(state, ledgertest.ReadState(t, db)); diff != "" {
		t.Errorf("a redelivery changed the ledger (-before +after):\n%s", diff)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestConcurrentRefundsNeverExceedTheTransfer is the race of CONTRACTS.md
// section 10: two refunds of one transfer by different keys that
// together exceed it, decided at the same time in two transactions (two
// goroutines on the store, each with its own connection), in many rounds:
// in each exactly one settles and the other is VALOR_EXCEDE_ESTORNAVEL.
// Each round also races a redelivery of the first refund, which posts
// nothing. The destination holds far more than it received, so that only
// the bound of the transfer's refunds, not its balance, stops the second.
func TestConcurrentRefundsNeverExceedTheTransfer(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	const rounds, own = 20, 1_000_000
	open(t, s, "CC-001", "BRL", rounds*10_000)
	open(t, s, "CC-002", "BRL", own)
	ctx := context.Background()
	svc := refunder(s)
	for round := range rounds {
		tr := transfer("CC-001", "CC-002", 10_000, "BRL")
		if rs := settle(t, s, tr); rs[0].Outcome != ledger.Settled {
			t.Fatalf("round %d: settle %+v", round, rs[0])
		}
		fs := []ledger.Refund{refundOf(tr, 6_000, ledgertest.Client, false), refundOf(tr, 7_000, ledgertest.Client, false)}
		fs = append(fs, fs[0])
		results := make([]ledger.RefundResult, len(fs))
		errs := make([]error, len(fs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, f := range fs {
			wg.Go(func() {
				<-start
				var rs []ledger.RefundResult
				if rs, errs[i] = svc.Refund(ctx, []ledger.Refund{f}); errs[i] == nil {
					results[i] = rs[0]
				}
			})
		}
		close(start)
		wg.Wait()
		count := map[string]int{}
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("round %d, refund %d: %v", round, i, errs[i])
			}
			if i < 2 {
				count[outcome(r)]++
			}
		}
		want := map[string]int{"LIQUIDADO ": 1, "REJEITADO " + events.ReasonExceedsRefundable: 1}
		if diff := cmp.Diff(want, count); diff != "" {
			t.Fatalf("round %d: outcomes mismatch (-want +got):\n%s", round, diff)
		}
		if results[2].Outcome != results[0].Outcome {
			t.Errorf("round %d: the redelivery %+v, the first delivery %+v", round, results[2], results[0])
		}
	}
	b := balances(t, db)
	if kept := b["CC-002"] - own; b["CC-001"]+kept != rounds*10_000 || kept < rounds*3_000 || kept > rounds*4_000 {
		t.Errorf("balances %v: CC-002 must keep 3,000 or 4,000 of each 10,000", b)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestInvariantsCatchBrokenRefunds shows that the refund invariants fail
// on the faults they are there for, each written by hand on a ledger that
// settled a transfer of 60,000 and a refund of 20,000 of it.
func TestInvariantsCatchBrokenRefunds(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name, invariant, sql string
	}{
		{"none: the ledger as it refunded", "", ``},
		{"refunds settled above what was settled", "never exceed what the ledger settled", `
INSERT INTO refund (refund_id, transfer_id, result, source_account, dest_account, amount_cents, currency, event_id, result_event_id)
SELECT gen_random_uuid(), transfer_id, 'LIQUIDADO', source_account, dest_account, 40001, currency, gen_random_uuid(), gen_random_uuid()
FROM processed_transfer`},
		{"a settled refund without postings", "a settled refund has its two postings", `
INSERT INTO refund (refund_id, transfer_id, result, source_account, dest_account, amount_cents, currency, event_id, result_event_id)
SELECT gen_random_uuid(), transfer_id, 'LIQUIDADO', source_account, dest_account, 1, currency, gen_random_uuid(), gen_random_uuid()
FROM processed_transfer`},
		{"a refund's postings of another amount", "a settled refund has its two postings", `UPDATE refund SET amount_cents = amount_cents - 1`},
		{"a refund's postings the wrong way", "a settled refund has its two postings", `UPDATE refund SET source_account = dest_account, dest_account = source_account`},
		{"a rejected refund that posted", "a settled refund has its two postings",
			`UPDATE refund SET result = 'REJEITADO', reason = 'SALDO_INSUFICIENTE'`},
		{"refund postings without a refund", "every refund posting belongs to a settled refund", `
INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents)
VALUES ('REFUND', '00000000-0000-0000-0000-000000000001', 'CC-001', 'D', 5), ('REFUND', '00000000-0000-0000-0000-000000000001', 'CC-002', 'C', 5)`},
		{"a refund without its result event", "every decided refund has exactly one result event", `DELETE FROM outbox_event WHERE aggregate_type = 'refund'`},
		{"a refund with the other result's event", "every decided refund has exactly one result event",
			`UPDATE outbox_event SET event_type = 'EstornoRejeitado' WHERE aggregate_type = 'refund'`},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s, db, tr := settled(t)
			if rs := refund(t, s, refundOf(tr, 20_000, ledgertest.Client, false)); rs[0].Outcome != ledger.RefundSettled {
				t.Fatalf("setup: %+v", rs[0])
			}
			checkBreaks(t, db, f.sql, f.invariant)
		})
	}
}

// TestRefundsAmongSettlementsNeverDeadlock runs batches of refunds (of
// transfers in random order, redeliveries of any worker's refunds among
// them) concurrently with
// batches of settlements on the same accounts, on a database that counts
// deadlocks: the refunds' lock order (refund markers, transfer markers,
// accounts by id) and the settlements' never meet in a cycle, and the
// books hold, refunds within what each transfer settled.
func TestRefundsAmongSettlementsNeverDeadlock(t *testing.T) {
	t.Parallel()
	load := 5 * time.Second
	if testing.Short() {
		load = 2 * time.Second
	}
	db := deadlockFreeDB(t)
	s := postgres.New(db, outbox.New(db))
	svc := refunder(s)
	ids := []string{"A", "B", "C", "D"}
	for _, id := range ids {
		open(t, s, id, "BRL", 1_000_000)
	}
	var paid []ledger.Transfer
	for i := range 40 {
		tr := transfer(ids[i%4], ids[(i+1+i/4)%4], 500, "BRL")
		if tr.Source == tr.Dest {
			continue
		}
		if rs := settle(t, s, tr); rs[0].Outcome != ledger.Settled {
			t.Fatalf("setup: %+v", rs[0])
		}
		paid = append(paid, tr)
	}
	const workers = 8
	var (
		refunded atomic.Int64
		mu       sync.Mutex
		sent     []ledger.Refund // by every worker
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
		ctx      = context.Background()
		deadline = time.Now().Add(load)
	)
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(deadline) {
				if w%2 == 0 {
					batch := make([]ledger.Transfer, 1+rnd.IntN(8))
					for i := range batch {
						x := rnd.IntN(len(ids))
						batch[i] = transfer(ids[x], ids[(x+1+rnd.IntN(len(ids)-1))%len(ids)], 1+rnd.Int64N(100), "BRL")
					}
					if _, err := settleVia(ctx, svc, batch); err != nil {
						errs <- err
						return
					}
					continue
				}
				batch := make([]ledger.Refund, 1+rnd.IntN(6))
				mu.Lock()
				for i := range batch {
					if len(sent) > 0 && rnd.IntN(5) == 0 {
						batch[i] = sent[rnd.IntN(len(sent))] // a redelivery, perhaps in flight
						continue
					}
					batch[i] = refundOf(paid[rnd.IntN(len(paid))], 1+rnd.Int64N(200), ledgertest.Client, false)
					sent = append(sent, batch[i])
				}
				mu.Unlock()
				rs, err := svc.Refund(ctx, batch)
				if err != nil {
					errs <- err
					return
				}
				for _, r := range rs {
					if r.Outcome == ledger.RefundSettled && !r.Replayed {
						refunded.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a transaction failed (a deadlock?): %v", err)
	}
	if refunded.Load() < 20 {
		t.Errorf("only %d refunds settled: the load did not run", refunded.Load())
	}
	t.Logf("%d refunds settled in %s", refunded.Load(), load)
	var rows int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM refund WHERE result = 'LIQUIDADO'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != refunded.Load() {
		t.Errorf("%d refunds settled, as their first deliveries were told %d: a redelivery was not replayed", rows, refunded.Load())
	}
	ledgertest.CheckInvariants(t, db)
}
