package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/outbox"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
)

// BenchmarkSettlement measures settlements per second against one database,
// one transaction per transfer versus batches of 50, with transfers spread
// over 1,000 accounts and with one hot source account.
//
// The workers model the consumer: the analisada topic is keyed by source
// account, so a partition's records are settled in order by one worker.
// Spread: 8 workers (partitions in flight), each with the sources of its
// partition, destinations anywhere. Hot: every transfer leaves one account,
// so they all sit in one partition and its one worker settles them in
// order; its row lock is what one-per-transaction serialises on.
func BenchmarkSettlement(b *testing.B) {
	const spreadW = 8
	s, db, ids := benchAccounts(b)
	ctx := context.Background()
	if _, _, err := s.CreateAccount(ctx, "HOT", "BRL", ledgertest.Client); err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: "HOT", AmountCents: ledger.MaxAmountCents, ClientID: ledgertest.Client}); err != nil {
		b.Fatal(err)
	}

	cases := []struct {
		name    string
		hot     bool
		batch   int
		workers int
	}{
		{"spread/one-per-tx", false, 1, spreadW},
		{"spread/batch-50", false, 50, spreadW},
		{"hot/one-per-tx", true, 1, 1},
		{"hot/batch-50", true, 50, 1},
	}
	rates := map[string]float64{}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rnd := rand.New(rand.NewPCG(uint64(b.N), 1))
			streams := make([][]ledger.Transfer, c.workers)
			for i := range b.N {
				w := i % c.workers
				src := "HOT"
				if !c.hot {
					// a source of worker w's partition
					src = ids[(rnd.IntN(benchAccountCount/c.workers))*c.workers+w]
				}
				streams[w] = append(streams[w], benchTransfer(rnd, ids, src))
			}
			// Every measured run starts from the same state: the previous
			// runs' dead rows vacuumed and statistics fresh, so that no
			// autovacuum competes with the measurement.
			if _, err := db.Exec(ctx, "VACUUM (ANALYZE) account, processed_transfer, posting, outbox_event"); err != nil {
				b.Fatal(err)
			}
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				errs []error
			)
			b.ResetTimer()
			start := time.Now()
			for _, stream := range streams {
				wg.Go(func() {
					for len(stream) > 0 {
						n := min(c.batch, len(stream))
						rs, err := s.Settle(ctx, stream[:n], ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}.Decider(time.Now()))
						if err == nil {
							for _, r := range rs {
								if r.Outcome != ledger.Settled {
									err = fmt.Errorf("transfer %s: %v", r.TransferID, r)
								}
							}
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						stream = stream[n:]
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			for _, err := range errs {
				b.Fatal(err)
			}
			rate := float64(b.N) / elapsed.Seconds()
			rates[c.name] = rate
			b.ReportMetric(rate, "settlements/s")
			if c.name == "hot/batch-50" && rates["hot/one-per-tx"] > 0 {
				b.ReportMetric(rate/rates["hot/one-per-tx"], "x-one-per-tx")
			}
			if c.name == "spread/batch-50" && rates["spread/one-per-tx"] > 0 {
				b.ReportMetric(rate/rates["spread/one-per-tx"], "x-one-per-tx")
			}
		})
	}
}

// benchAccountCount is how many accounts benchAccounts opens.
const benchAccountCount = 1000

// benchAccounts opens benchAccountCount accounts, ACC-0000 and on, each
// funded with 10^12 cents, on a fresh database.
func benchAccounts(b *testing.B) (*postgres.Store, *pgplatform.DB, []string) {
	b.Helper()
	db := ledgertest.NewDB(b)
	s := postgres.New(db, outbox.New(db))
	ctx := context.Background()
	ids := make([]string, benchAccountCount)
	for i := range ids {
		ids[i] = fmt.Sprintf("ACC-%04d", i)
		if _, _, err := s.CreateAccount(ctx, ids[i], "BRL", ledgertest.Client); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: ids[i], AmountCents: 1_000_000_000_000, ClientID: ledgertest.Client}); err != nil {
			b.Fatal(err)
		}
	}
	return s, db, ids
}

// benchTransfer is a signed transfer of 1 to 1,000 cents from src to
// another of ids.
func benchTransfer(rnd *rand.Rand, ids []string, src string) ledger.Transfer {
	dst := ids[rnd.IntN(len(ids))]
	if dst == src {
		dst = ids[(rnd.IntN(len(ids)-1)+1+indexOf(src))%len(ids)]
	}
	return signed(ledger.Transfer{ID: uuid.New(), EventID: uuid.New(),
		Source: src, Dest: dst, AmountCents: 1 + rnd.Int64N(1000), Currency: "BRL", ClientID: ledgertest.Client})
}

func indexOf(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "ACC-%04d", &n)
	return n
}
