package history

import (
	"fmt"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/events"
)

// simulated builds the clean history of a serial bank: n transfers of 1
// cent between ten accounts, each POSTed (every tenth twice, the second
// replayed), read, settled, published and consumed in order, its
// webhook delivered, and a snapshot (with every posting's running
// balance) every snapEvery transfers.
func simulated(n, snapEvery int) History {
	var h History
	clock := t0
	tick := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	const accounts = 10
	bal := make([]int64, accounts)
	var fund int64
	for i := range accounts {
		key := fmt.Sprintf("dep-%d", i)
		h = append(h, Op{Kind: KindDeposit, Invoke: tick(), Complete: tick(), Outcome: OK, Key: key,
			Deposit: &Deposit{fmt.Sprintf("C%d", i), "BRL", 1000}})
		bal[i], fund = 1000, fund-1000
	}
	var settled []Entry
	snap := func() {
		s := &Snapshot{}
		s.Balances = append(s.Balances, Balance{Account: funding, Currency: "BRL", Funding: true, Cents: fund})
		for i, b := range bal {
			s.Balances = append(s.Balances, Balance{Account: fmt.Sprintf("C%d", i), Currency: "BRL", Cents: b})
			s.Entries = append(s.Entries, Entry{Type: EntryDeposit, ID: fmt.Sprintf("dep-%d", i),
				Debit: funding, DebitCents: 1000, Credit: fmt.Sprintf("C%d", i), CreditCents: 1000})
		}
		s.Entries = append(s.Entries, settled...)
		h = append(h, withRunning(Op{Kind: KindSnapshot, Invoke: tick(), Complete: tick(), Outcome: OK, Snapshot: s}))
	}
	for i := range n {
		key := fmt.Sprintf("k%06d", i)
		from, to := i%accounts, (i+1)%accounts
		body := Transfer{From: fmt.Sprintf("C%d", from), To: fmt.Sprintf("C%d", to), AmountCents: 1, Currency: "BRL"}
		a := accepted(key)
		h = append(h, Op{Kind: KindPost, Invoke: tick(), Complete: tick(), Outcome: OK, Key: key, Transfer: &body, Answer: &a})
		if i%10 == 0 {
			h = append(h, Op{Kind: KindPost, Invoke: tick(), Complete: tick(), Outcome: OK, Key: key, Transfer: &body, Answer: &a})
		}
		bal[from]--
		bal[to]++
		settled = append(settled, Entry{Type: EntryTransfer, ID: key, Debit: body.From, DebitCents: 1, Credit: body.To, CreditCents: 1})
		h = append(h, get(0, 0, key, 200, StatusSettled))
		h[len(h)-1].Invoke, h[len(h)-1].Complete = tick(), tick()
		h[len(h)-1].Answer.Transfer = &body
		pub := published("transfers", int64(i+1), topicReq, from%4, body.From, "e"+key, events.TypeRequested, key)
		res := published("ledger", int64(i+1), topicSet, from%4, body.From, "r"+key, events.TypeSettled, key)
		h = append(h, pub, res,
			consumed("antifraude", topicReq, from%4, int64(i), body.From, "e"+key),
			consumed("notificacoes", topicSet, from%4, int64(i), body.From, "r"+key),
			webhook(0, "r"+key))
		h[len(h)-1].Invoke = tick()
		if i%snapEvery == 0 {
			snap()
		}
	}
	snap()
	return h
}

func TestCheckLargeCleanHistory(t *testing.T) {
	t.Parallel()
	h := simulated(3000, 100)
	began := time.Now()
	rep, err := Check(h)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("anomalies in a clean history:\n%s", rep.Table())
	}
	if rep.Figures.Transfers != 3000 || rep.Figures.Snapshots != 31 {
		t.Errorf("figures %+v", rep.Figures)
	}
	t.Logf("%d ops checked in %s", len(h), time.Since(began))
}

func BenchmarkCheck(b *testing.B) {
	h := simulated(15000, 300)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Check(h); err != nil {
			b.Fatal(err)
		}
	}
}
