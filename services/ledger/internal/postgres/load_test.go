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
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
)

// TestCrossedTransfersNeverDeadlock runs 8 workers settling transfers in
// both directions between a few accounts, alone and in batches, for 10
// seconds, on a pool that sees the error of every statement, whether or not
// InTx then retries its transaction: a single deadlock fails the test.
func TestCrossedTransfersNeverDeadlock(t *testing.T) {
	t.Parallel()
	load := 10 * time.Second
	if testing.Short() {
		load = 2 * time.Second
	}
	db := deadlockFreeDB(t)
	s := postgres.New(db, outbox.New(db))
	svc := ledger.NewService(s, ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}, nil)
	ids := []string{"A", "B", "C", "D"}
	const initial = 1_000_000
	for _, id := range ids {
		open(t, s, id, "BRL", initial)
	}

	const workers = 8
	var (
		settled, rejected atomic.Int64
		wg                sync.WaitGroup
		errs              = make(chan error, workers)
		ctx               = context.Background()
		deadline          = time.Now().Add(load)
	)
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 99))
			for time.Now().Before(deadline) {
				n := 1
				if w%2 == 1 { // half the workers settle batches
					n = 1 + rnd.IntN(10)
				}
				batch := make([]ledger.Transfer, n)
				for i := range batch {
					x := rnd.IntN(len(ids))
					y := (x + 1 + rnd.IntN(len(ids)-1)) % len(ids)
					batch[i] = transfer(ids[x], ids[y], 1+rnd.Int64N(100), "BRL")
				}
				rs, err := settleVia(ctx, svc, batch)
				if err != nil {
					errs <- err
					return
				}
				for _, r := range rs {
					switch r.Outcome {
					case ledger.Settled:
						settled.Add(1)
					case ledger.Rejected:
						rejected.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("settlement failed (a deadlock?): %v", err)
	}
	t.Logf("%d settled, %d rejected in %s", settled.Load(), rejected.Load(), load)
	if settled.Load() < 100 {
		t.Errorf("only %d transfers settled: the load did not run", settled.Load())
	}
	var sum int64
	bal := balances(t, db)
	for _, id := range ids {
		sum += bal[id]
	}
	if sum != int64(len(ids))*initial {
		t.Errorf("customer balances sum to %d, want %d", sum, len(ids)*initial)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestConservationUnderConcurrentLoad mixes thousands of transfers (alone
// and in batches, with duplicates inside batches), redeliveries, deposits
// and deposit replays, concurrently, and then checks the books exactly.
func TestConservationUnderConcurrentLoad(t *testing.T) {
	t.Parallel()
	ops := 4000
	if testing.Short() {
		ops = 1000
	}
	s, db := newStore(t)
	svc := ledger.NewService(s, ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}, nil)
	type acct struct{ id, currency string }
	var accounts []acct
	for i := range 12 {
		accounts = append(accounts, acct{"BRL-" + string(rune('a'+i)), "BRL"})
	}
	for i := range 6 {
		accounts = append(accounts, acct{"USD-" + string(rune('a'+i)), "USD"})
	}
	for _, a := range accounts {
		open(t, s, a.id, a.currency, 0)
	}

	type depositReq struct {
		key     uuid.UUID
		account acct
		amount  int64
	}
	var (
		mu        sync.Mutex
		delivered []ledger.Transfer                 // every distinct transfer delivered
		decided   = map[uuid.UUID][]ledger.Result{} // non-duplicate results per transfer
		deposits  []depositReq
		deposited = map[uuid.UUID]ledger.Deposit{}
		originals = map[uuid.UUID]int{} // answers that were not replays, per key
		next      atomic.Int64
		wg        sync.WaitGroup
		ctx       = context.Background()
		failures  []error
		fail      = func(err error) { mu.Lock(); failures = append(failures, err); mu.Unlock() }
	)
	record := func(ts []ledger.Transfer, rs []ledger.Result) {
		mu.Lock()
		defer mu.Unlock()
		for i, r := range rs {
			if r.TransferID != ts[i].ID {
				failures = append(failures, fmt.Errorf("result %d is for %s, want %s", i, r.TransferID, ts[i].ID))
			}
			if r.Outcome != ledger.Duplicate {
				decided[r.TransferID] = append(decided[r.TransferID], r)
			}
		}
	}
	newTransfer := func(rnd *rand.Rand) ledger.Transfer {
		src, dst := accounts[rnd.IntN(len(accounts))], accounts[rnd.IntN(len(accounts))]
		cur := src.currency
		if rnd.IntN(20) == 0 {
			cur = dst.currency
		}
		srcID := src.id
		if rnd.IntN(30) == 0 {
			srcID = "MISSING"
		}
		t := transfer(srcID, dst.id, 1+rnd.Int64N(5_000), cur)
		mu.Lock()
		delivered = append(delivered, t)
		mu.Unlock()
		return t
	}
	earlier := func(rnd *rand.Rand) (ledger.Transfer, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(delivered) == 0 {
			return ledger.Transfer{}, false
		}
		return delivered[rnd.IntN(len(delivered))], true
	}

	for w := range 8 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for next.Add(1) <= int64(ops) {
				var ts []ledger.Transfer
				switch k := rnd.IntN(100); {
				case k < 20: // deposit, sometimes a replay of an earlier key
					req := depositReq{uuid.New(), accounts[rnd.IntN(len(accounts))], 1 + rnd.Int64N(20_000)}
					mu.Lock()
					replay := len(deposits) > 0 && rnd.IntN(4) == 0
					if replay {
						req = deposits[rnd.IntN(len(deposits))]
					} else {
						deposits = append(deposits, req)
					}
					mu.Unlock()
					d, replayed, err := svc.Deposit(ctx, ledger.DepositRequest{ID: req.key, AccountID: req.account.id, AmountCents: req.amount, ClientID: ledgertest.Client})
					if err != nil {
						fail(err)
						return
					}
					// A replay may answer before the deposit it replays (both run
					// at once): whichever comes back first, every answer for a
					// key is the same deposit, and exactly one of them is not a
					// replay (checked after the run).
					mu.Lock()
					if first, ok := deposited[req.key]; ok {
						if !first.CreatedAt.Equal(d.CreatedAt) || first.BalanceAfterCents != d.BalanceAfterCents {
							failures = append(failures, fmt.Errorf("deposit %s replayed=%v: %+v, first %+v", req.key, replayed, d, first))
						}
					} else {
						deposited[req.key] = d
					}
					if !replayed {
						originals[req.key]++
					}
					mu.Unlock()
					continue
				case k < 60:
					ts = []ledger.Transfer{newTransfer(rnd)}
				case k < 85: // a batch, with duplicates inside
					for range 2 + rnd.IntN(19) {
						if len(ts) > 0 && rnd.IntN(6) == 0 {
							ts = append(ts, ts[rnd.IntN(len(ts))])
						} else {
							ts = append(ts, newTransfer(rnd))
						}
					}
				default: // redeliveries
					for range 1 + rnd.IntN(3) {
						if t, ok := earlier(rnd); ok {
							ts = append(ts, t)
						}
					}
					if len(ts) == 0 {
						continue
					}
				}
				rs, err := settleVia(ctx, svc, ts)
				if err != nil {
					fail(err)
					return
				}
				record(ts, rs)
			}
		})
	}
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	for key := range deposited {
		if n := originals[key]; n != 1 {
			t.Errorf("deposit %s: %d answers were not replays, want exactly 1", key, n)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Each transfer was decided exactly once, and as its marker says.
	markers := map[uuid.UUID]ledgertest.Marker{}
	state := ledgertest.ReadState(t, db)
	for _, m := range state.Markers {
		markers[m.TransferID] = m
	}
	outcomes := map[ledger.Outcome]int{}
	for _, tr := range delivered {
		rs := decided[tr.ID]
		if len(rs) != 1 {
			t.Errorf("transfer %s decided %d times: %v", tr.ID, len(rs), rs)
			continue
		}
		outcomes[rs[0].Outcome]++
		m := markers[tr.ID]
		if m.Result != string(rs[0].Outcome) || m.Reason != rs[0].Reason {
			t.Errorf("transfer %s: marker %s/%s, result %v", tr.ID, m.Result, m.Reason, rs[0])
		}
	}
	if len(markers) != len(delivered) {
		t.Errorf("%d markers for %d transfers", len(markers), len(delivered))
	}
	t.Logf("%d transfers (%v), %d deposits", len(delivered), outcomes, len(deposits))
	if outcomes[ledger.Settled] < ops/10 {
		t.Errorf("only %d settled: the load is not exercising settlement", outcomes[ledger.Settled])
	}

	// Customers hold exactly what was deposited, per currency.
	want := map[string]int64{}
	for _, d := range deposits {
		want[d.account.currency] += d.amount
	}
	got := map[string]int64{}
	for _, a := range state.Accounts {
		if !a.Funding {
			got[a.Moeda] += a.Balance
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("customer money per currency mismatch (-deposited +held):\n%s", diff)
	}
	ledgertest.CheckInvariants(t, db)
}

// settleVia settles ts through the service.
func settleVia(ctx context.Context, svc *ledger.Service, ts []ledger.Transfer) ([]ledger.Result, error) {
	return svc.Settle(ctx, ts)
}

// Concurrent deposits into one account, and settlements out of it, never
// deadlock: the deposit locks both accounts in id order before it writes
// the deposit row, whose foreign key would otherwise take a key-share lock
// on the account first (two deposits then deadlocked upgrading it).
func TestConcurrentDepositsNeverDeadlock(t *testing.T) {
	t.Parallel()
	db := deadlockFreeDB(t)
	s := postgres.New(db, outbox.New(db))
	svc := ledger.NewService(s, ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}, nil)
	open(t, s, "HOT", "BRL", 1_000_000)
	open(t, s, "OTHER", "BRL", 0)
	const workers, rounds = 12, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				var err error
				if w%3 == 0 {
					_, err = settleVia(context.Background(), svc, []ledger.Transfer{transfer("HOT", "OTHER", 1, "BRL")})
				} else {
					_, _, err = s.Deposit(context.Background(), ledger.DepositRequest{ID: uuid.New(), AccountID: "HOT", AmountCents: 1, ClientID: ledgertest.Client})
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent deposit or settlement: %v", err)
	}
}
