package history

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/paysuite/payments/pkg/events"
)

const (
	topicRefSet = "pagamentos.estorno.liquidado.v1"
	topicRefRej = "pagamentos.estorno.rejeitado.v1"
)

// refundCase is one refund of a hand-made history: the transfer it
// refunds, what it asks, when it is POSTed (answered 0.2 s later) and how
// it ends.
type refundCase struct {
	id, transfer string
	asked        int64   // 0: all that remains
	at           float64 // the POST's invoke
	// status is RefundSettled (moving cents) or RefundRejected (for
	// reason); "" for a POST answered 422 refund-exceeds-refundable.
	status string
	cents  int64
	reason string
}

// refundCases are the refunds of cleanRefunds: k1 (100) refunded in part
// and then in what remains; two refunds of 40 of k2 (50) racing, one
// settled and one rejected for exceeding; a refund of k4 (10) asking 20
// and one of k1 after it was all refunded, both answered 422.
func refundCases() []refundCase {
	return []refundCase{
		{id: "r1", transfer: "k1", asked: 30, at: 23, status: RefundSettled, cents: 30},
		{id: "r2", transfer: "k1", at: 24, status: RefundSettled, cents: 70},
		{id: "r3", transfer: "k2", asked: 40, at: 25, status: RefundSettled, cents: 40},
		{id: "r4", transfer: "k2", asked: 40, at: 25.05, status: RefundRejected, reason: events.ReasonExceedsRefundable},
		{id: "r5", transfer: "k4", asked: 20, at: 23},
		{id: "r7", transfer: "k1", asked: 80, at: 36},
	}
}

// refundAnswer is a refund's 202 or a read's 200.
func refundAnswer(status int, id string, st RefundState) Answer {
	return Answer{Status: status, ID: id, Refund: &st}
}

// refundRead is a read of refund id of transfer at s, answering st.
func refundReadOp(s float64, id, transfer string, st RefundState) Op {
	st.TransferID = transfer
	a := refundAnswer(http.StatusOK, id, st)
	return Op{Kind: KindRefundGet, Invoke: at(s), Complete: at(s + 0.1), Outcome: OK, Key: id, Refund: &Refund{TransferID: transfer}, Answer: &a}
}

// refundPost is a refund POST of id for transfer asking cents at s,
// answered a.
func refundPost(s float64, outcome Outcome, id, transfer string, cents int64, a Answer) Op {
	return Op{Kind: KindRefund, Invoke: at(s), Complete: at(s + 0.2), Outcome: outcome, Key: id,
		Refund: &Refund{TransferID: transfer, AmountCents: cents}, Answer: &a}
}

// cleanRefunds is clean() and, after its last snapshot, the refunds of
// cases (each POSTed at its time, read at its end at 35 or half a second
// after its POST, its result published by the ledger and consumed by the
// projection and the notifications), a read of k1 and k2 at 36 with what
// they refunded, a last snapshot at 37 with every posting's running
// balance, statements of A1 (all of it) and A2 (in two ranges meeting at
// 22.5) and A1's balance at 38, all read at 39. post, when set, changes
// each refund's postings before the snapshot is made of them (balances,
// running balances and statements follow).
func cleanRefunds(cases []refundCase, post func(*Entry)) History {
	h := append(clean(), Op{Kind: KindMix, Invoke: at(0), Complete: at(0), Outcome: OK, Key: MixRefunds},
		Op{Kind: KindMix, Invoke: at(0), Complete: at(0), Outcome: OK, Key: MixStatements})
	seq, offset := int64(10), map[string]int64{}
	refunded := map[string]int64{}
	var entries []Entry
	for _, c := range cases {
		b := bodies[c.transfer]
		if c.status == "" {
			h = append(h, refundPost(c.at, OK, c.id, c.transfer, c.asked, Answer{Status: http.StatusUnprocessableEntity, Problem: ProblemRefundExceeds}))
			continue
		}
		h = append(h, refundPost(c.at, OK, c.id, c.transfer, c.asked,
			refundAnswer(http.StatusAccepted, c.id, RefundState{TransferID: c.transfer, Status: RefundPending})))
		typ, topic, ev := events.TypeRefundSettled, topicRefSet, "ev-s-"+c.id
		if c.status == RefundRejected {
			typ, topic, ev = events.TypeRefundRejected, topicRefRej, "ev-r-"+c.id
		}
		part := map[string]int{"A1": 0, "A2": 1}[b.From]
		p := published("ledger", seq, topic, part, b.From, ev, typ, c.transfer)
		p.Record.RefundID, p.Record.AmountCents, p.Record.Reason = c.id, c.cents, c.reason
		seq++
		h = append(h, p)
		for _, g := range []string{"notificacoes", "transferencias-projecao"} {
			k := g + topic + b.From
			h = append(h, consumed(g, topic, part, offset[k], b.From, ev))
			offset[k]++
		}
		h = append(h, refundReadOp(max(35, c.at+0.5), c.id, c.transfer, RefundState{AmountCents: c.cents, Status: c.status, Reason: c.reason}))
		if c.status == RefundSettled {
			refunded[c.transfer] += c.cents
			e := Entry{Type: EntryRefund, ID: c.id, TransferID: c.transfer, Debit: b.To, DebitCents: c.cents, Credit: b.From, CreditCents: c.cents, Postings: 2}
			if post != nil {
				post(&e)
			}
			entries = append(entries, e)
		}
	}
	for _, id := range []string{"k1", "k2"} {
		g := get(36, 36.1, id, http.StatusOK, StatusSettled)
		g.Answer.RefundedCents = refunded[id]
		h = append(h, g)
	}
	last := snapshot(22, 22.1, -2000, 839, 1161, "k1", "k2", "k4", "k5").Snapshot
	snap := snapshotOf(37, 37.1, balances(-2000, 839, 1161), append(last.Entries[2:], entries...)...)
	h = append(h, withRunning(snap))
	return append(h, statements(h[len(h)-1].Snapshot, 22.5, 39)...)
}

// withRunning moves s's balances by its refund entries and adds every
// posting row with its running balance: the entries' debits and credits
// in their order, numbered from 1.
func withRunning(s Op) Op {
	var rows []Posting
	after := map[string]int64{}
	row := func(account string, cents int64, entry string) {
		after[account] += cents
		rows = append(rows, Posting{Account: account, Seq: int64(len(rows) + 1), Entry: entry, Cents: cents, After: after[account]})
	}
	for _, e := range s.Snapshot.Entries {
		n := max(1, e.Postings/2)
		for range n {
			row(e.Debit, -e.DebitCents/int64(n), e.ID)
			row(e.Credit, e.CreditCents/int64(n), e.ID)
		}
	}
	for i, b := range s.Snapshot.Balances {
		s.Snapshot.Balances[i].Cents = after[b.Account]
	}
	s.Snapshot.Postings = rows
	return s
}

// statements are, read at s from snapshot sn's running balances: A1's
// statement over the whole run and its balance at its end, and A2's in
// two ranges meeting at split (the postings of entries posted by 22, then
// the refunds').
func statements(sn *Snapshot, split, s float64) []Op {
	byAccount := map[string][]Posting{}
	for _, p := range sn.Postings {
		byAccount[p.Account] = append(byAccount[p.Account], p)
	}
	refund := map[string]bool{}
	for _, e := range sn.Entries {
		refund[e.ID] = e.Type == EntryRefund
	}
	statement := func(account string, from, to float64, ps []Posting) Op {
		st := Statement{Account: account, From: stamp(at(from)), To: stamp(at(to))}
		if len(ps) > 0 {
			st.OpeningCents = ps[0].After - ps[0].Cents
		}
		st.ClosingCents = st.OpeningCents
		for _, p := range ps {
			it := StatementItem{ID: strconv.FormatInt(p.Seq, 10), Type: "C", Cents: p.Cents, After: p.After, TransferID: p.Entry}
			if p.Cents < 0 {
				it.Type, it.Cents = "D", -p.Cents
			}
			if refund[p.Entry] {
				it.RefundID = p.Entry
			}
			st.Items = append(st.Items, it)
			st.ClosingCents = p.After
		}
		return Op{Kind: KindStatement, Invoke: at(s), Complete: at(s + 0.1), Outcome: OK, Key: account, Statement: &st, Answer: &Answer{Status: http.StatusOK}}
	}
	a1, a2 := byAccount["A1"], byAccount["A2"]
	i := sort.Search(len(a2), func(i int) bool { return refund[a2[i].Entry] })
	first, second := statement("A2", -1, split, a2[:i]), statement("A2", split, 38, a2[i:])
	if i == len(a2) {
		second.Statement.OpeningCents, second.Statement.ClosingCents = first.Statement.ClosingCents, first.Statement.ClosingCents
	}
	whole := statement("A1", -1, 38, a1)
	at38 := Op{Kind: KindBalanceAt, Invoke: at(s), Complete: at(s + 0.1), Outcome: OK, Key: "A1",
		BalanceAt: &BalanceAt{Account: "A1", At: stamp(at(38)), Cents: whole.Statement.ClosingCents}, Answer: &Answer{Status: http.StatusOK}}
	return []Op{whole, first, second, at38}
}
