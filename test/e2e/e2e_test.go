package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/test/e2e"
)

// stall is how long a flow may go without progress before a test calls it
// stuck; generous, because the race detector, parallel tests and a shared
// broker and database make a loaded host slow.
const stall = time.Minute

// TestTransferOutcomes drives one transfer per documented outcome through
// the four services: opened and funded through the ledger API, requested
// through the transfers API, and checked through both APIs, the ledger's
// database and the webhooks received. Two clients share the suite: every
// other case is client B's from end to end.
func TestTransferOutcomes(t *testing.T) {
	t.Parallel()
	s := e2e.NewSuite(t, e2e.Options{Partitions: 3})
	run := shortID()
	acct := func(name string) string { return "O" + run + "-" + name }

	type account struct {
		name     string
		currency string
		deposit  int64
	}
	tests := []struct {
		name     string
		accounts []account
		from, to string
		amount   int64
		currency string
		want     e2e.Outcome
		// wantBalances are the balances after the transfer.
		wantBalances map[string]int64
	}{
		{
			name:     "funded transfer settles",
			accounts: []account{{"A1", "BRL", 100_000}, {"B1", "BRL", 0}},
			from:     "A1", to: "B1", amount: 30_000, currency: "BRL",
			want:         e2e.Settled,
			wantBalances: map[string]int64{"A1": 70_000, "B1": 30_000},
		},
		{
			// Funded well beyond the amount, so only antifraud can refuse it.
			name:     "R$ 100.000,00 is blocked by antifraud",
			accounts: []account{{"A2", "BRL", 20_000_000}, {"B2", "BRL", 0}},
			from:     "A2", to: "B2", amount: 10_000_000, currency: "BRL",
			want:         e2e.BlockedByAntifraud,
			wantBalances: map[string]int64{"A2": 20_000_000, "B2": 0},
		},
		{
			name:     "one cent more than the balance",
			accounts: []account{{"A3", "BRL", 5_000}, {"B3", "BRL", 0}},
			from:     "A3", to: "B3", amount: 5_001, currency: "BRL",
			want:         e2e.InsufficientFunds,
			wantBalances: map[string]int64{"A3": 5_000, "B3": 0},
		},
		{
			name:     "unknown destination account",
			accounts: []account{{"A4", "BRL", 100_000}},
			from:     "A4", to: "NOPE4", amount: 1_000, currency: "BRL",
			want:         e2e.AccountNotFound,
			wantBalances: map[string]int64{"A4": 100_000},
		},
		{
			name:     "unknown source account",
			accounts: []account{{"B5", "BRL", 0}},
			from:     "NOPE5", to: "B5", amount: 1_000, currency: "BRL",
			want:         e2e.AccountNotFound,
			wantBalances: map[string]int64{"B5": 0},
		},
		{
			name:     "destination in another currency",
			accounts: []account{{"A6", "BRL", 100_000}, {"U6", "USD", 0}},
			from:     "A6", to: "U6", amount: 1_000, currency: "BRL",
			want:         e2e.CurrencyMismatch,
			wantBalances: map[string]int64{"A6": 100_000, "U6": 0},
		},
		{
			name:     "transfer currency differs from both accounts",
			accounts: []account{{"U7", "USD", 100_000}, {"V7", "USD", 0}},
			from:     "U7", to: "V7", amount: 1_000, currency: "BRL",
			want:         e2e.CurrencyMismatch,
			wantBalances: map[string]int64{"U7": 100_000, "V7": 0},
		},
	}
	var flowsMu sync.Mutex
	var flows []*e2e.Flow
	t.Cleanup(func() {
		flowsMu.Lock()
		defer flowsMu.Unlock()
		e2e.CheckNoStrayWebhooks(t, s, flows...)
	})
	all := s
	for i, tc := range tests {
		s := all
		if i%2 == 1 {
			s = all.As(all.B)
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			flow := e2e.NewFlow()
			flowsMu.Lock()
			flows = append(flows, flow)
			flowsMu.Unlock()
			for _, a := range tc.accounts {
				flow.Fund(t, s, acct(a.name), a.currency, a.deposit)
			}
			key := uuid.NewString()
			req := e2e.TransferRequest{From: acct(tc.from), To: acct(tc.to), AmountCents: tc.amount, Currency: tc.currency}
			flow.Add(key, req, tc.want)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			first, err := s.PostTransfer(ctx, key, req)
			if err != nil {
				t.Fatalf("POST /transferencias: %v", err)
			}
			if first.Status != http.StatusAccepted {
				t.Fatalf("POST /transferencias: status %d, want 202: %s", first.Status, first.Body)
			}
			if err := e2e.CheckAccepted(key, first); err != nil {
				t.Error(err)
			}
			if got := first.Header.Get("Idempotent-Replayed"); got != "" {
				t.Errorf("first POST: Idempotent-Replayed %q, want none", got)
			}

			finals := flow.Check(t, s, stall)
			if got := (e2e.Outcome{Status: finals[key].Status, Reason: finals[key].Reason}); got != tc.want {
				t.Errorf("GET /transferencias/%s: %+v, want %+v", key, got, tc.want)
			}

			// The replay, after the fact, returns the first response.
			again, err := s.PostTransfer(ctx, key, req)
			if err != nil {
				t.Fatalf("replay POST: %v", err)
			}
			if again.Status != http.StatusAccepted || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
				t.Errorf("replay POST: status %d, Idempotent-Replayed %q, body %s; want 202, true, %s",
					again.Status, again.Header.Get("Idempotent-Replayed"), again.Body, first.Body)
			}

			// Through the ledger API: the balances, and the transfer's
			// postings (one debit and one credit if settled, none otherwise).
			gotBalances := map[string]int64{}
			gotPostings := map[string][]string{}
			wantPostings := map[string][]string{}
			for _, a := range tc.accounts {
				gotBalances[a.name] = s.Account(t, acct(a.name)).BalanceCents
				for _, p := range s.Postings(t, acct(a.name)) {
					if p.TransferID == key {
						gotPostings[a.name] = append(gotPostings[a.name], fmt.Sprintf("%s %d", p.Direction, p.AmountCents))
					}
				}
			}
			if tc.want == e2e.Settled {
				wantPostings[tc.from] = []string{fmt.Sprintf("D %d", tc.amount)}
				wantPostings[tc.to] = []string{fmt.Sprintf("C %d", tc.amount)}
			}
			if d := cmp.Diff(tc.wantBalances, gotBalances); d != "" {
				t.Errorf("balances (GET /contas/{id}) mismatch (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantPostings, gotPostings); d != "" {
				t.Errorf("postings of the transfer (GET /contas/{id}/lancamentos) mismatch (-want +got):\n%s", d)
			}

			// Exactly one webhook, authentic, about this transfer: Check
			// counted it after the whole suite went quiet.
			ds := s.Receiver.Of(key)
			if len(ds) == 1 && (ds[0].Payload.Status != tc.want.Status || ds[0].Payload.Reason != tc.want.Reason) {
				t.Errorf("webhook payload %+v, want status %s motivo %q", ds[0].Payload, tc.want.Status, tc.want.Reason)
			}
		})
	}
}

// TestManyTransfers runs 1,000 transfers over 50 funded accounts in two
// currencies, with random pairs and amounts (many end in insufficient
// funds), a few of every predictable rejection, POSTs duplicated
// concurrently and later, and records of the analisada, solicitada,
// liquidada and rejeitada topics delivered twice (copied back into their
// topics while the flow runs and after it ended). Every transfer must end
// terminal, settled exactly once or not at all, with balances conserved and
// exactly one webhook.
func TestManyTransfers(t *testing.T) {
	t.Parallel()
	const (
		transfers  = 1000
		brlCount   = 40
		usdCount   = 10
		funding    = 50_000
		postWorker = 16
	)
	start := time.Now()
	s := e2e.NewSuite(t, e2e.Options{Partitions: 4})
	t.Logf("suite up in %v", time.Since(start).Round(time.Millisecond))
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("E2E_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("E2E_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("random seed %d (set E2E_SEED to replay the same transfers)", seed)
	rng := mrand.New(mrand.NewPCG(seed, seed>>1))
	run := shortID()

	flow := e2e.NewFlow()
	var brl, usd []string
	for i := range brlCount {
		brl = append(brl, fmt.Sprintf("M%s-B%02d", run, i))
	}
	for i := range usdCount {
		usd = append(usd, fmt.Sprintf("M%s-U%02d", run, i))
	}
	fundAll(t, s, flow, brl, "BRL", funding)
	fundAll(t, s, flow, usd, "USD", funding)
	t.Logf("accounts funded at %v", time.Since(start).Round(time.Millisecond))

	pair := func(accts []string) (string, string) {
		a := rng.IntN(len(accts))
		b := (a + 1 + rng.IntN(len(accts)-1)) % len(accts)
		return accts[a], accts[b]
	}
	type job struct {
		key string
		req e2e.TransferRequest
		dup bool // sent twice at once
	}
	jobs := make([]job, 0, transfers)
	for i := range transfers {
		key := uuid.NewString()
		var req e2e.TransferRequest
		var allowed []e2e.Outcome
		switch r := rng.Float64(); {
		case r < 0.01:
			from, to := pair(brl)
			req = e2e.TransferRequest{From: from, To: to, AmountCents: 10_000_000 + rng.Int64N(1_000), Currency: "BRL"}
			allowed = []e2e.Outcome{e2e.BlockedByAntifraud}
		case r < 0.03:
			// More than all the money of the currency: never affordable.
			from, to := pair(brl)
			req = e2e.TransferRequest{From: from, To: to, AmountCents: 5_000_000, Currency: "BRL"}
			allowed = []e2e.Outcome{e2e.InsufficientFunds}
		case r < 0.04:
			from, _ := pair(brl)
			req = e2e.TransferRequest{From: from, To: fmt.Sprintf("M%s-NOPE%d", run, i), AmountCents: 100, Currency: "BRL"}
			allowed = []e2e.Outcome{e2e.AccountNotFound}
		case r < 0.05:
			req = e2e.TransferRequest{From: brl[rng.IntN(len(brl))], To: usd[rng.IntN(len(usd))], AmountCents: 100, Currency: "BRL"}
			allowed = []e2e.Outcome{e2e.CurrencyMismatch}
		case r < 0.25:
			from, to := pair(usd)
			req = e2e.TransferRequest{From: from, To: to, AmountCents: 1 + rng.Int64N(15_000), Currency: "USD"}
			allowed = e2e.SettledOrInsufficient
		default:
			from, to := pair(brl)
			req = e2e.TransferRequest{From: from, To: to, AmountCents: 1 + rng.Int64N(15_000), Currency: "BRL"}
			allowed = e2e.SettledOrInsufficient
		}
		flow.Add(key, req, allowed...)
		jobs = append(jobs, job{key: key, req: req, dup: rng.IntN(20) == 0})
	}

	ctx, cancel := context.WithTimeout(context.Background(), e2e.MaxWait)
	defer cancel()

	// Every 202 answer per key, to check that exactly one is not a replay.
	var (
		resMu     sync.Mutex
		responses = map[string][]e2e.SubmitResult{}
		failures  []string
	)
	submit := func(key string, req e2e.TransferRequest) {
		res, err := s.Submit(ctx, key, req)
		resMu.Lock()
		defer resMu.Unlock()
		if err != nil {
			failures = append(failures, err.Error())
			return
		}
		responses[key] = append(responses[key], res)
	}

	// Half-way through the POSTs, copy records back into their topics
	// while the flow runs.
	var submitted atomic.Int64
	halfway := make(chan struct{})
	type injection struct {
		n   int
		err error
	}
	injected := make(chan injection, 1)
	injectSeed := rng.Uint64()
	go func() {
		select {
		case <-halfway:
		case <-ctx.Done():
			injected <- injection{err: ctx.Err()}
			return
		}
		n, err := duplicateRecords(s, injectSeed, 5)
		injected <- injection{n, err}
	}()

	// Progress every 5 s, to see where time goes.
	progressDone := make(chan struct{})
	defer close(progressDone)
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-progressDone:
				return
			case <-tick.C:
				t.Logf("%v: %s", time.Since(start).Round(time.Second), s.Progress(flow.IDs()))
			}
		}
	}()

	sem := make(chan struct{}, postWorker)
	var wg sync.WaitGroup
	postStart := time.Now()
	for _, j := range jobs {
		copies := 1
		if j.dup {
			copies = 2
		}
		for range copies {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				submit(j.key, j.req)
			})
		}
		if submitted.Add(1) == transfers/2 {
			close(halfway)
		}
	}
	wg.Wait()
	t.Logf("%d POSTs answered in %v", transfers, time.Since(postStart).Round(time.Millisecond))
	if len(failures) > 0 {
		t.Fatalf("%d POSTs failed: %v", len(failures), failures[:min(len(failures), 10)])
	}
	inj := <-injected
	if inj.err != nil {
		t.Fatalf("duplicate records mid-flow: %v", inj.err)
	}
	t.Logf("re-produced %d records mid-flow", inj.n)

	var bad []string
	var conflicts, dupKeys int
	for key, rs := range responses {
		fresh, lost := 0, 0
		if len(rs) > 1 {
			dupKeys++
		}
		for _, r := range rs {
			conflicts += r.Conflicts
			if err := e2e.CheckAccepted(key, r.Response); err != nil {
				bad = append(bad, err.Error())
			}
			if r.Response.Header.Get("Idempotent-Replayed") != "true" {
				fresh++
			}
			lost += r.Lost
		}
		// A request whose answer was lost may have created the transfer.
		lostFirst := fresh == 0 && lost > 0
		if fresh != 1 && !lostFirst {
			bad = append(bad, fmt.Sprintf("%s: %d of %d answers are not replays, want exactly 1", key, fresh, len(rs)))
		}
	}
	t.Logf("%d keys POSTed twice at once; %d answers were 409 (first request in flight) before the 202", dupKeys, conflicts)
	if len(bad) > 0 {
		t.Errorf("%d bad POST answers:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}

	ids := flow.IDs()
	s.WaitTerminal(t, ids, stall)
	t.Logf("all terminal at %v (%v after the last POST)", time.Since(start).Round(time.Millisecond), time.Since(postStart).Round(time.Millisecond))

	// Later: the same POSTs again, and the same records again.
	for i := 0; i < 50; i++ {
		key := ids[rng.IntN(len(ids))]
		r, err := s.PostTransfer(ctx, key, flow.Request(key))
		if err != nil {
			t.Fatalf("late replay of %s: %v", key, err)
		}
		if r.Status != http.StatusAccepted || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("late replay of %s: status %d Idempotent-Replayed %q: %s", key, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
		} else if err := e2e.CheckAccepted(key, r); err != nil {
			t.Error(err)
		}
	}
	n, err := duplicateRecords(s, rng.Uint64(), 10)
	if err != nil {
		t.Fatalf("duplicate records after the flow: %v", err)
	}
	t.Logf("re-produced %d records after the flow", n)

	flow.Check(t, s, stall)

	var stored int
	if err := s.Transfers.DB.QueryRow(ctx, `SELECT count(*) FROM transferencia`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != transfers {
		t.Errorf("transfers database holds %d transfers, want %d (one per key)", stored, transfers)
	}
	if n := len(s.Receiver.Deliveries()); n != transfers {
		t.Errorf("receiver got %d webhooks in all, want %d", n, transfers)
	}
	e2e.CheckNoStrayWebhooks(t, s, flow)
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// duplicateRecords copies about one in every records of the solicitada,
// analisada, liquidada and rejeitada topics back into them, headers
// included, and returns how many it copied.
func duplicateRecords(s *e2e.Suite, seed uint64, every int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rng := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var picked []broker.Record
	for _, topic := range s.Topics.All() {
		ms, err := s.ReadTopic(ctx, topic)
		if err != nil {
			return 0, err
		}
		for _, m := range ms {
			if rng.IntN(every) == 0 {
				picked = append(picked, m)
			}
		}
	}
	return len(picked), s.Reproduce(ctx, picked)
}

// fundAll opens and funds accounts.
func fundAll(tb testing.TB, s *e2e.Suite, flow *e2e.Flow, ids []string, currency string, cents int64) {
	tb.Helper()
	for _, id := range ids {
		flow.Fund(tb, s, id, currency, cents)
	}
}

// TestRestart stops each service in the middle of a flow of 100 transfers
// and starts it again with the same configuration, database, topics and
// consumer groups: nothing may be lost (every transfer terminal) and
// nothing doubled (two postings per settled transfer, balances conserved,
// one webhook per transfer).
func TestRestart(t *testing.T) {
	t.Parallel()
	s := e2e.NewSuite(t, e2e.Options{Partitions: 3})
	var flows []*e2e.Flow
	t.Cleanup(func() { e2e.CheckNoStrayWebhooks(t, s, flows...) })

	// processed counts the flow's transfers the service has handled.
	count := func(svc *e2e.Service, query string) func(ids []uuid.UUID, accepted int64) (int, error) {
		return func(ids []uuid.UUID, _ int64) (int, error) {
			var n int
			err := svc.DB.QueryRow(context.Background(), query, ids).Scan(&n)
			return n, err
		}
	}
	tests := []struct {
		svc       *e2e.Service
		processed func(ids []uuid.UUID, accepted int64) (int, error)
	}{
		{s.Transfers, func(_ []uuid.UUID, accepted int64) (int, error) { return int(accepted), nil }},
		{s.Antifraud, count(s.Antifraud, `SELECT count(*) FROM decision WHERE transfer_id = ANY($1)`)},
		{s.Ledger, count(s.Ledger, `SELECT count(*) FROM processed_transfer WHERE transfer_id = ANY($1)`)},
		{s.Notifications, count(s.Notifications, `SELECT count(*) FROM notification WHERE transfer_id = ANY($1)`)},
	}
	for _, tc := range tests {
		flow := e2e.NewFlow()
		flows = append(flows, flow)
		t.Run(tc.svc.Name, func(t *testing.T) {
			start := time.Now()
			run := shortID()
			rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 7))
			var accts []string
			for i := range 8 {
				accts = append(accts, fmt.Sprintf("R%s-%02d", run, i))
			}
			fundAll(t, s, flow, accts, "BRL", 100_000)
			for i := range 100 {
				a := rng.IntN(len(accts))
				b := (a + 1 + rng.IntN(len(accts)-1)) % len(accts)
				req := e2e.TransferRequest{From: accts[a], To: accts[b], AmountCents: 1 + rng.Int64N(20_000), Currency: "BRL"}
				allowed := e2e.SettledOrInsufficient
				switch i % 25 {
				case 3: // rejected by antifraud
					req.AmountCents = 10_000_000
					allowed = []e2e.Outcome{e2e.BlockedByAntifraud}
				case 17: // rejected by the ledger
					req.To = fmt.Sprintf("R%s-NOPE%d", run, i)
					allowed = []e2e.Outcome{e2e.AccountNotFound}
				}
				flow.Add(uuid.NewString(), req, allowed...)
			}
			ids := flow.IDs()
			uids := make([]uuid.UUID, len(ids))
			for i, id := range ids {
				uids[i] = uuid.MustParse(id)
			}

			ctx, cancel := context.WithTimeout(context.Background(), e2e.MaxWait)
			defer cancel()
			var accepted, lost, stopped atomic.Int64
			post := func(keys []string) <-chan error {
				errc := make(chan error, 1)
				go func() {
					var wg sync.WaitGroup
					var mu sync.Mutex
					var errs []string
					sem := make(chan struct{}, 4)
					for _, key := range keys {
						sem <- struct{}{}
						wg.Go(func() {
							defer func() { <-sem }()
							res, err := s.Submit(ctx, key, flow.Request(key))
							if err == nil {
								err = e2e.CheckAccepted(key, res.Response)
							}
							if err != nil {
								mu.Lock()
								errs = append(errs, err.Error())
								mu.Unlock()
								return
							}
							accepted.Add(1)
							lost.Add(int64(res.Lost))
							stopped.Add(int64(res.Stopped))
						})
					}
					wg.Wait()
					if len(errs) > 0 {
						errc <- fmt.Errorf("%d POSTs failed: %s", len(errs), strings.Join(errs[:min(len(errs), 5)], "; "))
						return
					}
					errc <- nil
				}()
				return errc
			}

			phase1 := post(ids[:50])
			var atStop int
			e2e.WhileProgressing(t, stall, tc.svc.Name+" handled 10 transfers of the flow", func() (bool, int64, string) {
				n, err := tc.processed(uids, accepted.Load())
				if err != nil {
					return false, 0, err.Error()
				}
				atStop = n
				return n >= 10, int64(n), fmt.Sprintf("%d handled", n)
			})
			tc.svc.Stop()
			t.Logf("%s stopped at %v with %d of %d transfers handled", tc.svc.Name, time.Since(start).Round(time.Millisecond), atStop, len(ids))
			phase2 := post(ids[50:])
			if tc.svc != s.Transfers {
				// Let the work for the stopped service pile up.
				for _, errc := range []<-chan error{phase1, phase2} {
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
				}
			}
			tc.svc.Start()
			t.Logf("%s started again at %v", tc.svc.Name, time.Since(start).Round(time.Millisecond))
			if tc.svc == s.Transfers {
				for _, errc := range []<-chan error{phase1, phase2} {
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Logf("POST attempts that found transfers stopped: %d; that lost their answer: %d", stopped.Load(), lost.Load())
			flow.Check(t, s, stall)
			t.Logf("flow checked at %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

func shortID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
