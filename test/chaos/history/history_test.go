package history

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
)

var t0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

// at is a time in seconds after t0.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

const (
	topicReq = "pagamentos.transferencia.solicitada.v1"
	topicSet = "pagamentos.transferencia.liquidada.v1"
	topicRej = "pagamentos.transferencia.rejeitada.v1"
	topicAna = "pagamentos.transferencia.analisada.v1"
	funding  = "__FUNDING__BRL"
)

var (
	body1 = Transfer{From: "A1", To: "A2", AmountCents: 100, Currency: "BRL"}
	body2 = Transfer{From: "A1", To: "A2", AmountCents: 50, Currency: "BRL"}
	body3 = Transfer{From: "A2", To: "A1", AmountCents: 5000, Currency: "BRL"}
	body4 = Transfer{From: "A1", To: "A2", AmountCents: 10, Currency: "BRL"}
	body5 = Transfer{From: "A1", To: "A2", AmountCents: 1, Currency: "BRL"}
)

func post(from, to float64, outcome Outcome, key string, body Transfer, a Answer) Op {
	return Op{Kind: KindPost, Invoke: at(from), Complete: at(to), Outcome: outcome, Key: key, Transfer: &body, Answer: &a}
}

func accepted(key string) Answer { return Answer{Status: 202, ID: key, TransferStatus: StatusPending} }

// bodies are the request bodies of the test's transfer ids: what a read
// answers and what their postings move.
var bodies = map[string]Transfer{
	"k1": body1, "k2": body2, "k3": body3, "k4": body4, "k5": body5, "k6": body5, "k7": body5, "k8": body5, "k-never": body5,
}

// get is a read of id; a 200 answers the transfer's body.
func get(from, to float64, id string, status int, st string) Op {
	a := &Answer{Status: status, ID: id, TransferStatus: st}
	if b, ok := bodies[id]; ok && status == 200 {
		a.Transfer = &b
	}
	return Op{Kind: KindGet, Invoke: at(from), Complete: at(to), Outcome: OK, Key: id, Answer: a}
}

// entry is the postings of transfer id as its body asks.
func entry(id string) Entry {
	b := bodies[id]
	return Entry{Type: EntryTransfer, ID: id, Debit: b.From, DebitCents: b.AmountCents, Credit: b.To, CreditCents: b.AmountCents}
}

// snapshot is a snapshot of the funding account, A1 and A2 with the given
// balances, the two deposits' postings and the transfers' (as their
// bodies ask).
func snapshot(from, to float64, fund, a1, a2 int64, transfers ...string) Op {
	entries := make([]Entry, 0, len(transfers))
	for _, id := range transfers {
		entries = append(entries, entry(id))
	}
	return snapshotOf(from, to, balances(fund, a1, a2), entries...)
}

// snapshotOf is a snapshot of balances with the two deposits' postings
// and the entries given.
func snapshotOf(from, to float64, balances []Balance, entries ...Entry) Op {
	deps := []Entry{
		{Type: EntryDeposit, ID: "dep-1", Debit: funding, DebitCents: 1000, Credit: "A1", CreditCents: 1000},
		{Type: EntryDeposit, ID: "dep-2", Debit: funding, DebitCents: 1000, Credit: "A2", CreditCents: 1000},
	}
	return Op{Kind: KindSnapshot, Invoke: at(from), Complete: at(to), Outcome: OK,
		Snapshot: &Snapshot{Balances: balances, Entries: append(deps, entries...)}}
}

func published(source string, seq int64, topic string, partition int, key, eventID, typ, transfer string) Op {
	return Op{Kind: KindPublished, Invoke: at(seconds(seq)), Complete: at(seconds(seq)), Outcome: OK, Record: &Record{
		Topic: topic, Partition: partition, Key: key, EventID: eventID, EventType: typ, TransferID: transfer, Source: source, Seq: seq,
		Ordered: true}}
}

func seconds(seq int64) float64 { return 30 + float64(seq) }

func consumed(group, topic string, partition int, offset int64, key, eventID string) Op {
	return Op{Kind: KindConsumed, Invoke: at(40), Complete: at(40), Outcome: OK, Record: &Record{
		Topic: topic, Partition: partition, Offset: offset, Key: key, EventID: eventID, Group: group}}
}

func subscribed(group, topic string) Op {
	return Op{Kind: KindSubscribed, Invoke: at(40), Complete: at(40), Outcome: OK, Record: &Record{Topic: topic, Group: group}}
}

func crash(from, to float64, e Expect) Op {
	return Op{Kind: KindCrash, Invoke: at(from), Complete: at(to), Outcome: Info, Crash: &Crash{Name: "fault", Expect: e}}
}

// balances are the funding account's, A1's and A2's.
func balances(fund, a1, a2 int64) []Balance {
	return []Balance{
		{Account: funding, Currency: "BRL", Funding: true, Cents: fund},
		{Account: "A1", Currency: "BRL", Cents: a1}, {Account: "A2", Currency: "BRL", Cents: a2},
	}
}

func webhook(s float64, eventID string) Op {
	return Op{Kind: KindWebhook, Invoke: at(s), Complete: at(s), Outcome: OK, Webhook: &Webhook{EventID: eventID}}
}

// clean is a history with every allowed oddity and no anomaly: a 409 and
// a 503 (fail), a replay, a 422 for another body, a timed-out POST later
// answered, a transfer whose only POST timed out yet took effect, a
// duplicate record from a producer's retry, a record no relay published,
// and a webhook delivered twice across a crash of its sender.
func clean() History {
	reused := Answer{Status: 422, Problem: httpapi.TypeURI(errkind.KeyReused)}
	return History{
		{Kind: KindDeposit, Invoke: at(0), Complete: at(0.1), Outcome: OK, Key: "dep-1", Deposit: &Deposit{"A1", "BRL", 1000}},
		{Kind: KindDeposit, Invoke: at(0.1), Complete: at(0.2), Outcome: OK, Key: "dep-2", Deposit: &Deposit{"A2", "BRL", 1000}},
		snapshot(0.5, 0.6, -2000, 1000, 1000),

		post(1, 1.1, OK, "k1", body1, accepted("k1")),
		post(1.05, 1.3, Fail, "k1", body1, Answer{Status: 409, Problem: httpapi.TypeURI(errkind.InProgress)}),
		get(1.5, 1.6, "k1", 200, StatusPending),
		post(2, 2.1, OK, "k1", body1, accepted("k1")),
		post(2.2, 2.3, OK, "k1", body4, reused),
		get(5, 5.1, "k1", 200, StatusSettled),

		post(1.2, 6.2, Info, "k2", body2, Answer{Error: "context deadline exceeded"}),
		post(6.3, 6.4, OK, "k2", body2, accepted("k2")),
		post(20.5, 20.6, OK, "k2", body2, accepted("k2")), // a late replay, after the read of LIQUIDADA

		post(3, 3.1, OK, "k3", body3, accepted("k3")),

		post(4, 4.5, Info, "k4", body4, Answer{Error: "connection reset by peer"}),

		post(4, 4.1, Fail, "k5", body5, Answer{Status: 503, Problem: httpapi.TypeURI(errkind.Unavailable)}),
		post(4.2, 4.3, OK, "k5", body5, accepted("k5")),

		snapshot(10, 10.1, -2000, 850, 1150, "k1", "k2"),

		get(20, 20.1, "k1", 200, StatusSettled),
		get(20, 20.1, "k2", 200, StatusSettled),
		get(21, 21.1, "k3", 200, StatusRejected),
		get(21, 21.1, "k4", 200, StatusSettled),
		get(21, 21.1, "k5", 200, StatusSettled),
		snapshot(22, 22.1, -2000, 839, 1161, "k1", "k2", "k4", "k5"),

		published("transfers", 1, topicReq, 0, "A1", "e1", events.TypeRequested, "k1"),
		published("transfers", 2, topicReq, 0, "A1", "e2", events.TypeRequested, "k2"),
		published("transfers", 3, topicReq, 1, "A2", "e3", events.TypeRequested, "k3"),
		published("ledger", 1, topicSet, 0, "A1", "r1", events.TypeSettled, "k1"),
		published("ledger", 2, topicRej, 1, "A2", "r3", events.TypeRejected, "k3"),
		consumed("antifraude", topicReq, 0, 0, "A1", "e1"),
		consumed("antifraude", topicReq, 0, 1, "A1", "e2"),
		consumed("antifraude", topicReq, 0, 2, "A1", "e1"), // a producer's retry
		consumed("antifraude", topicReq, 0, 3, "A1", "e2"),
		consumed("antifraude", topicReq, 1, 0, "A2", "e3"),
		consumed("antifraude", topicReq, 1, 1, "A2", "poison"), // the test's own record
		consumed("notificacoes", topicSet, 0, 0, "A1", "r1"),
		consumed("transferencias-projecao", topicSet, 0, 0, "A1", "r1"),
		consumed("notificacoes", topicRej, 1, 0, "A2", "r3"),

		webhook(8, "r1"),
		webhook(9, "r3"),
		{Kind: KindCrash, Invoke: at(8.5), Complete: at(14), Outcome: Info, Crash: &Crash{Name: "kill -9 notifications", InterruptsWebhooks: true}},
		{Kind: KindCrash, Invoke: at(9), Complete: at(9.5), Outcome: Info, Crash: &Crash{Name: "kill -9 ledger"}},
		webhook(12, "r1"),
	}
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	t.Parallel()
	rep, err := Check(clean())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("anomalies in a clean history:\n%s", rep.Table())
	}
	want := []ExplainedDuplicate{{EventID: "r1", Crash: "kill -9 notifications"}}
	if diff := cmp.Diff(want, rep.Explained); diff != "" {
		t.Errorf("explained duplicates mismatch (-want +got):\n%s", diff)
	}
	if f := rep.Figures; f.Transfers != 4 || f.Snapshots != 3 || f.Info != 4 || f.Fail != 2 {
		t.Errorf("figures %+v: want 4 transfers accepted, 3 snapshots, 4 info (2 POSTs, 2 crashes), 2 fail", f)
	}
	if !strings.Contains(rep.Table(), "kill -9 notifications") {
		t.Errorf("the table does not name the crash that explains the duplicate:\n%s", rep.Table())
	}
}

// TestCheckCatchesEachAnomaly adds one fault at a time to the clean
// history; each must be reported as its kind, and nothing else.
func TestCheckCatchesEachAnomaly(t *testing.T) {
	t.Parallel()
	reused := Answer{Status: 422, Problem: httpapi.TypeURI(errkind.KeyReused)}
	replace := func(h History, i int, op Op) History { h[i] = op; return h }
	find := func(h History, pred func(Op) bool) int {
		for i, op := range h {
			if pred(op) {
				return i
			}
		}
		t.Fatal("no such op in the clean history")
		return -1
	}
	snapAt := func(s float64) func(Op) bool {
		return func(op Op) bool { return op.Kind == KindSnapshot && op.Invoke.Equal(at(s)) }
	}
	tests := []struct {
		name   string
		change func(History) History
		want   map[string]int
	}{
		{"accepted, never terminal", func(h History) History {
			return append(h, post(7, 7.1, OK, "k6", body5, accepted("k6")), get(20, 20.1, "k6", 200, StatusPending))
		}, map[string]int{NotTerminal: 1}},
		{"accepted, posted, read PENDENTE to the end", func(h History) History {
			h = append(h, post(7, 7.1, OK, "k6", body5, accepted("k6")), get(20, 20.1, "k6", 200, StatusPending))
			return replace(h, find(h, snapAt(22)), snapshot(22, 22.1, -2000, 838, 1162, "k1", "k2", "k4", "k5", "k6"))
		}, map[string]int{NotTerminal: 1}},
		{"accepted, never read", func(h History) History {
			return append(h, post(7, 7.1, OK, "k6", body5, accepted("k6")))
		}, map[string]int{NotTerminal: 1}},
		{"a settled and a rejected result for one transfer", func(h History) History {
			return append(h, published("ledger", 3, topicRej, 0, "A1", "r1b", events.TypeRejected, "k1"),
				consumed("notificacoes", topicRej, 0, 0, "A1", "r1b"))
		}, map[string]int{TwoTerminal: 1}},
		{"postings of a transfer read REJEITADA", func(h History) History {
			return replace(h, find(h, snapAt(22)), snapshot(22, 22.1, -2000, 839, 1161, "k1", "k2", "k3", "k4", "k5"))
		}, map[string]int{TwoTerminal: 1, BalancePostings: 2}}, // the balances did not move with k3's postings
		{"LIQUIDADA then 404", func(h History) History {
			return append(h, get(6, 6.1, "k1", 404, ""))
		}, map[string]int{StaleRead: 1}},
		{"LIQUIDADA then PENDENTE", func(h History) History {
			return append(h, get(6, 6.1, "k1", 200, StatusPending))
		}, map[string]int{StaleRead: 1}},
		{"LIQUIDADA then REJEITADA", func(h History) History {
			return append(h, get(6, 6.1, "k1", 200, StatusRejected))
		}, map[string]int{StaleRead: 1, TwoTerminal: 1}},
		{"202 then 404", func(h History) History {
			return append(h, get(3.5, 3.6, "k3", 404, ""))
		}, map[string]int{StaleRead: 1}},
		{"a replay answered with another transfer", func(h History) History {
			return append(h, post(2.5, 2.6, OK, "k1", body1, accepted("k9")))
		}, map[string]int{Idempotency: 1}},
		{"a replay answered with the current status, not the first answer", func(h History) History {
			return append(h, post(6, 6.1, OK, "k1", body1, Answer{Status: 202, ID: "k1", TransferStatus: StatusSettled}))
		}, map[string]int{Idempotency: 1}},
		{"the same body answered key-reused", func(h History) History {
			return append(h, post(2.5, 2.6, OK, "k1", body1, reused))
		}, map[string]int{Idempotency: 1}},
		{"another body accepted under a bound key", func(h History) History {
			return append(h, post(2.5, 2.6, OK, "k1", body4, accepted("k1")))
		}, map[string]int{Idempotency: 1}},
		{"a first body that lost to a second", func(h History) History {
			// k7 accepted with body5, then body4 accepted too: two winners.
			return append(h, post(7, 7.1, OK, "k7", body5, accepted("k7")), post(7.2, 7.3, OK, "k7", body4, accepted("k7")),
				get(20, 20.1, "k7", 200, StatusRejected))
		}, map[string]int{Idempotency: 1}},
		{"a currency that does not sum to zero", func(h History) History {
			return replace(h, find(h, snapAt(22)), snapshot(22, 22.1, -1999, 839, 1161, "k1", "k2", "k4", "k5"))
		}, map[string]int{BankSum: 1, BalancePostings: 1}},
		{"customers hold more than was deposited", func(h History) History {
			return replace(h, find(h, snapAt(10)), snapshot(10, 10.1, -2100, 950, 1150, "k1", "k2"))
		}, map[string]int{BankDeposits: 1, BalancePostings: 2}},
		{"a negative customer balance", func(h History) History {
			return replace(h, find(h, snapAt(10)), snapshot(10, 10.1, -2000, -5, 2005, "k1", "k2"))
		}, map[string]int{BankNegative: 1, BalancePostings: 2}},
		{"postings of a transfer never accepted", func(h History) History {
			return replace(h, find(h, snapAt(22)), snapshot(22, 22.1, -2000, 838, 1162, "k1", "k2", "k4", "k5", "k-never"))
		}, map[string]int{StrayPosting: 1}},
		{"postings of a transfer only refused", func(h History) History {
			h = append(h, post(7, 7.1, Fail, "k8", body5, Answer{Status: 503}))
			return replace(h, find(h, snapAt(22)), snapshot(22, 22.1, -2000, 838, 1162, "k1", "k2", "k4", "k5", "k8"))
		}, map[string]int{StrayPosting: 1}},
		{"postings gone from a later snapshot", func(h History) History {
			return replace(h, find(h, snapAt(22)), snapshot(22, 22.1, -2000, 889, 1111, "k1", "k4", "k5"))
		}, map[string]int{LostPosting: 1}},
		{"read LIQUIDADA, no postings", func(h History) History {
			return replace(h, find(h, snapAt(10)), snapshot(10, 10.1, -2000, 950, 1050, "k2"))
		}, map[string]int{LostPosting: 1}},
		{"a published record never consumed", func(h History) History {
			return append(h, published("transfers", 4, topicReq, 0, "A1", "e5", events.TypeRequested, "k5"))
		}, map[string]int{LostRecord: 1}},
		{"a published record consumed by one group of two", func(h History) History {
			return append(h, published("ledger", 3, topicSet, 0, "A1", "r2", events.TypeSettled, "k2"),
				consumed("notificacoes", topicSet, 0, 1, "A1", "r2"))
		}, map[string]int{LostRecord: 1}},
		{"an account's events out of outbox order", func(h History) History {
			i := find(h, func(op Op) bool { return op.Kind == KindConsumed && op.Record.EventID == "e1" })
			h[i].Record.Offset, h[i+1].Record.Offset = 1, 0 // e2 (seq 2) before e1 (seq 1)
			return h
		}, map[string]int{OutOfOrder: 1}},
		{"events of concurrent transactions in any order: allowed", func(h History) History {
			for i, op := range h {
				if op.Kind == KindPublished && op.Record.Topic == topicReq {
					h[i].Record.Ordered = false
				}
			}
			i := find(h, func(op Op) bool { return op.Kind == KindConsumed && op.Record.EventID == "e1" })
			h[i].Record.Offset, h[i+1].Record.Offset = 1, 0
			return h
		}, map[string]int{}},
		{"a 100-cent transfer that moved the balances by -200/+200", func(h History) History {
			// Its postings say 100: the sums and the deposits still hold.
			return replace(h, find(h, snapAt(10)), snapshot(10, 10.1, -2000, 750, 1250, "k1", "k2"))
		}, map[string]int{BalancePostings: 2}},
		{"a balance moved twice by one posting pair", func(h History) History {
			return replace(h, find(h, snapAt(22)), snapshot(22, 22.1, -2000, 838, 1162, "k1", "k2", "k4", "k5"))
		}, map[string]int{BalancePostings: 2}},
		{"a wrong amount on both sides", func(h History) History {
			k1 := entry("k1")
			k1.DebitCents, k1.CreditCents = 200, 200
			return replace(h, find(h, snapAt(10)), snapshotOf(10, 10.1, balances(-2000, 750, 1250), k1, entry("k2")))
		}, map[string]int{PostingAmount: 1}},
		{"a transfer with its credit posting missing", func(h History) History {
			k1 := entry("k1")
			k1.Credit, k1.CreditCents = "", 0
			return replace(h, find(h, snapAt(10)), snapshotOf(10, 10.1, balances(-2000, 850, 1150), k1, entry("k2")))
		}, map[string]int{PostingAmount: 1, BalancePostings: 1}}, // A2 holds 1150, its postings 1050
		{"the wrong counterparty", func(h History) History {
			k1 := entry("k1")
			k1.Credit = "A3"
			return replace(h, find(h, snapAt(10)), snapshotOf(10, 10.1,
				append(balances(-2000, 850, 1050), Balance{Account: "A3", Currency: "BRL", Cents: 100}), k1, entry("k2")))
		}, map[string]int{PostingAccount: 1}},
		{"a deposit posted to another account", func(h History) History {
			i := find(h, snapAt(0.5))
			h = replace(h, i, snapshot(0.5, 0.6, -2000, 0, 2000))
			h[i].Snapshot.Entries[0].Credit = "A2"
			return h
		}, map[string]int{PostingAccount: 1}},
		{"a read answering another amount", func(h History) History {
			g := get(20, 20.1, "k1", 200, StatusSettled)
			g.Answer.Transfer = &body4
			return append(h, g)
		}, map[string]int{ReadBody: 1}},
		{"a read answering another transfer", func(h History) History {
			g := get(20, 20.1, "k1", 200, StatusSettled)
			g.Answer.ID = "k2"
			return append(h, g)
		}, map[string]int{ReadBody: 1}},
		{"a read answered 200 with no body", func(h History) History {
			g := get(20, 20.1, "k1", 200, StatusSettled)
			g.Answer.Transfer = nil
			return append(h, g)
		}, map[string]int{ReadBody: 1}},
		{"a record on a topic no group consumed", func(h History) History {
			return append(h, published("antifraud", 1, topicAna, 0, "A1", "a1", events.TypeAnalysed, "k1"))
		}, map[string]int{LostRecord: 1}},
		{"a record its named group never consumed, another group did", func(h History) History {
			return append(h, subscribed("ledger", topicAna), published("antifraud", 1, topicAna, 0, "A1", "a1", events.TypeAnalysed, "k1"),
				consumed("ledger-renamed", topicAna, 0, 0, "A1", "a1"))
		}, map[string]int{LostRecord: 1}},
		{"a named group that consumed its topic: allowed", func(h History) History {
			return append(h, subscribed("ledger", topicAna), published("antifraud", 1, topicAna, 0, "A1", "a1", events.TypeAnalysed, "k1"),
				consumed("ledger", topicAna, 0, 0, "A1", "a1"))
		}, map[string]int{}},
		{"a fault window with what it expects: allowed", func(h History) History {
			return append(h,
				crash(8.5, 14, Expect{Snapshots: true}),                  // the snapshot at 10
				crash(1.1, 1.6, Expect{Reads: true, UnknownPosts: true}), // the read at 1.5, k2's POST at 1.2
				crash(4, 4.05, Expect{WritesInFlight: true}))             // k2's POST, 1.2 to 6.2
		}, map[string]int{}},
		{"a fault window with no snapshot", func(h History) History {
			return append(h, crash(11, 19, Expect{Snapshots: true}))
		}, map[string]int{Vacuous: 1}},
		{"a fault window with no read and no unknown POST", func(h History) History {
			return append(h, crash(11, 19, Expect{Reads: true, UnknownPosts: true}))
		}, map[string]int{Vacuous: 1}},
		{"a fault with no write in flight", func(h History) History {
			return append(h, crash(7, 8, Expect{WritesInFlight: true}))
		}, map[string]int{Vacuous: 1}},
		{"a webhook twice with no crash", func(h History) History {
			return append(h, webhook(16, "r5"), webhook(17, "r5"))
		}, map[string]int{DuplicateWebhook: 1}},
		{"a webhook twice during its sender's crash: allowed", func(h History) History {
			return append(h, webhook(9.1, "r6"), webhook(9.4, "r6"))
		}, map[string]int{}},
		{"a webhook twice, the crash not of its sender", func(h History) History {
			return append(h, Op{Kind: KindCrash, Invoke: at(50), Complete: at(51), Outcome: Info, Crash: &Crash{Name: "kill -9 ledger"}},
				webhook(50.2, "r6"), webhook(50.5, "r6"))
		}, map[string]int{DuplicateWebhook: 1}},
		{"a webhook twice, the crash after the second", func(h History) History {
			return append(h, webhook(7, "r7"), webhook(8, "r7"))
		}, map[string]int{DuplicateWebhook: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Check(tc.change(clean()))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, a := range rep.Anomalies {
				got[a.Kind]++
			}
			want := map[string]int{}
			for k, n := range tc.want {
				if n > 0 {
					want[k] = n
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("anomalies mismatch (-want +got):\n%s\n%s", diff, rep.Table())
			}
			if rep.OK() != (len(want) == 0) {
				t.Errorf("OK() = %v with %d anomalies", rep.OK(), len(rep.Anomalies))
			}
		})
	}
}

// TestCheckFailsVacuousHistories: a history that checked nothing is a
// failed run, however clean.
func TestCheckFailsVacuousHistories(t *testing.T) {
	t.Parallel()
	only := func(kinds ...Kind) History {
		var h History
		for _, op := range clean() {
			for _, k := range kinds {
				if op.Kind == k {
					h = append(h, op)
				}
			}
		}
		return h
	}
	tests := []struct {
		name string
		h    History
	}{
		{"empty", History{}},
		{"deposits and snapshots only", only(KindDeposit, KindSnapshot)},
		{"clients only, no record", only(KindDeposit, KindPost, KindGet, KindSnapshot)},
		{"no snapshot", only(KindDeposit, KindPost, KindGet, KindPublished, KindConsumed)},
		{"no read", only(KindDeposit, KindPost, KindSnapshot, KindPublished, KindConsumed)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Check(tc.h)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || rep.Count(Vacuous) != 1 {
				t.Errorf("want exactly one vacuous anomaly, got:\n%s", rep.Table())
			}
		})
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := NewRecorder(&buf)
	clock := at(1)
	r.now = func() time.Time { return clock }
	r.Post(at(0.5), OK, "k1", body1, accepted("k1"))
	r.Get(at(0.7), Info, "k1", Answer{Error: "timeout"})
	r.Snapshot(at(0.9), Snapshot{Balances: []Balance{{Account: "A1", Currency: "BRL", Cents: 3}}, Entries: []Entry{entry("k1")}})
	r.Crash(at(0.2), at(0.8), Crash{Name: "kill", InterruptsWebhooks: true})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.Webhook(at(2), Webhook{EventID: "late"}) // dropped: the history is closed
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	a := accepted("k1")
	want := History{
		{Kind: KindPost, Invoke: at(0.5), Complete: clock, Outcome: OK, Key: "k1", Transfer: &body1, Answer: &a},
		{Kind: KindGet, Invoke: at(0.7), Complete: clock, Outcome: Info, Key: "k1", Answer: &Answer{Error: "timeout"}},
		{Kind: KindSnapshot, Invoke: at(0.9), Complete: clock, Outcome: OK,
			Snapshot: &Snapshot{Balances: []Balance{{Account: "A1", Currency: "BRL", Cents: 3}}, Entries: []Entry{entry("k1")}}},
		{Kind: KindCrash, Invoke: at(0.2), Complete: at(0.8), Outcome: Info, Crash: &Crash{Name: "kill", InterruptsWebhooks: true}},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}
	if r.Len() != 4 {
		t.Errorf("Len() = %d, want 4", r.Len())
	}
}

func TestCheckRefusesMalformedHistory(t *testing.T) {
	t.Parallel()
	if _, err := Check(History{{Kind: KindPost, Outcome: OK, Key: "k"}}); err == nil {
		t.Error("a post without its body passed")
	}
	if _, err := Check(History{{Kind: KindWebhook, Outcome: "maybe", Webhook: &Webhook{}}}); err == nil {
		t.Error("an unknown outcome passed")
	}
}
