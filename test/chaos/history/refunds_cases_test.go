package history

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/events"
)

var brasilia = time.FixedZone("BRT", -3*3600)

// checkKinds checks h and wants exactly the anomalies of want, by kind.
func checkKinds(t *testing.T, h History, want map[string]int) {
	t.Helper()
	rep, err := Check(h)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, a := range rep.Anomalies {
		got[a.Kind]++
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("anomalies mismatch (-want +got):\n%s\n%s", diff, rep.Table())
	}
}

// TestCheckRefundsCleanHistoryPasses: refunds in part and of all that
// remains, two racing refunds of which the ledger settles one, refunds
// refused 422, running balances, statements in one range and in two: no
// anomaly, in each allowed variant.
func TestCheckRefundsCleanHistoryPasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(History) History
	}{
		{"as built", func(h History) History { return h }},
		{"a refund of unknown outcome that took effect", func(h History) History {
			i := findOp(t, h, func(op Op) bool { return op.Kind == KindRefund && op.Key == "r3" })
			h[i].Outcome, h[i].Answer = Info, &Answer{Error: "context deadline exceeded"}
			return h
		}},
		{"a refund's replay after it settled answers its first 202", func(h History) History {
			return append(h, refundPost(36.5, OK, "r1", "k1", 30,
				refundAnswer(http.StatusAccepted, "r1", RefundState{TransferID: "k1", Status: RefundPending})))
		}},
		{"a refund of unknown outcome that did not take effect", func(h History) History {
			return append(h, refundPost(36.5, Info, "r8", "k5", 1, Answer{Error: "connection reset by peer"}),
				Op{Kind: KindRefundGet, Invoke: at(38), Complete: at(38.1), Outcome: OK, Key: "r8", Refund: &Refund{TransferID: "k5"},
					Answer: &Answer{Status: http.StatusNotFound}})
		}},
		{"a transfer read before its refunds settled", func(h History) History {
			g := get(24.5, 24.6, "k1", http.StatusOK, StatusSettled)
			g.Answer.RefundedCents = 0
			return append(h, g)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Check(tc.change(cleanRefunds(refundCases(), nil)))
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Errorf("anomalies in a clean history with refunds:\n%s", rep.Table())
			}
			if f := rep.Figures; f.Refunds < 3 || f.RefundsSettled != 3 || f.RefundsRejected != 1 || f.Statements != 3 {
				t.Errorf("figures %+v: want 3 or 4 refunds answered 202, 3 read LIQUIDADO, 1 REJEITADO, 3 statements", f)
			}
		})
	}
}

// TestCheckCatchesEachRefundAnomaly adds one fault at a time to the clean
// history with refunds; each must be reported as its kind, and nothing
// else.
func TestCheckCatchesEachRefundAnomaly(t *testing.T) {
	t.Parallel()
	withCase := func(id string, change func(*refundCase)) []refundCase {
		cases := refundCases()
		for i := range cases {
			if cases[i].id == id {
				change(&cases[i])
			}
		}
		return cases
	}
	without := func(id string) []refundCase {
		return slices.DeleteFunc(refundCases(), func(c refundCase) bool { return c.id == id })
	}
	readOf := func(id string) func(Op) bool {
		return func(op Op) bool { return refundRead(op) && op.Key == id }
	}
	last := func(h History) *Snapshot {
		return h[findOp(t, h, func(op Op) bool { return op.Kind == KindSnapshot && op.Invoke.Equal(at(37)) })].Snapshot
	}
	// repost rebuilds the last snapshot (its balances, running balances)
	// and the statements after changing its entries.
	repost := func(h History, change func(*Snapshot)) History {
		i := findOp(t, h, func(op Op) bool { return op.Kind == KindSnapshot && op.Invoke.Equal(at(37)) })
		change(h[i].Snapshot)
		h[i].Snapshot.Postings = nil
		h[i] = withRunning(h[i])
		h = slices.DeleteFunc(h, func(op Op) bool { return op.Kind == KindStatement || op.Kind == KindBalanceAt })
		return append(h, statements(h[i].Snapshot, 22.5, 39)...)
	}
	publish := func(h History, seq int64, typ, topic, ev, refund, transfer, reason string, cents int64) History {
		p := published("ledger", seq, topic, 0, "A1", ev, typ, transfer)
		p.Record.RefundID, p.Record.Reason, p.Record.AmountCents = refund, reason, cents
		return append(h, p, consumed("notificacoes", topic, 0, 50+seq, "A1", ev), consumed("transferencias-projecao", topic, 0, 50+seq, "A1", ev))
	}
	statementOf := func(h History, account, from string) *Statement {
		return h[findOp(t, h, func(op Op) bool {
			return op.Kind == KindStatement && op.Statement.Account == account && op.Statement.From == from
		})].Statement
	}
	tests := []struct {
		name   string
		cases  []refundCase
		post   func(*Entry)
		change func(History) History
		want   map[string]int
	}{
		// over-refund
		{"both racing refunds settled beyond the transfer", withCase("r4", func(c *refundCase) {
			c.status, c.cents, c.reason = RefundSettled, 40, ""
		}), nil, nil, map[string]int{OverRefund: 1}},
		{"a refund answered 202 after the transfer was all refunded (the contract's 422)", withCase("r7", func(c *refundCase) {
			c.asked, c.status, c.reason = 0, RefundRejected, events.ReasonExceedsRefundable
		}), nil, nil, map[string]int{OverRefund: 1}},
		{"a refund answered 202 asking more than the transfer", nil, nil, func(h History) History {
			return append(h, refundPost(36.5, OK, "r9", "k5", 2, refundAnswer(http.StatusAccepted, "r9", RefundState{TransferID: "k5", Status: RefundPending})),
				refundReadOp(37.5, "r9", "k5", RefundState{Status: RefundRejected, Reason: events.ReasonExceedsRefundable}))
		}, map[string]int{OverRefund: 1}},
		{"a transfer read having refunded more than it settled", nil, nil, func(h History) History {
			g := get(36.5, 36.6, "k2", http.StatusOK, StatusSettled)
			g.Answer.RefundedCents = 60
			return append(h, g)
		}, map[string]int{OverRefund: 1}},
		// refund-twice
		{"a refund posted twice (two entries)", without("r2"), nil, func(h History) History {
			return repost(h, func(s *Snapshot) {
				i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.ID == "r1" })
				s.Entries = append(s.Entries, s.Entries[i])
			})
		}, map[string]int{RefundTwice: 1}},
		{"a refund posted twice (four posting rows)", without("r2"), func(e *Entry) {
			if e.ID == "r1" {
				e.Postings, e.DebitCents, e.CreditCents = 4, 60, 60
			}
		}, nil, map[string]int{RefundTwice: 1}},
		{"two EstornoLiquidado results for one refund", nil, nil, func(h History) History {
			return publish(h, 30, events.TypeRefundSettled, topicRefSet, "ev-s-r1-again", "r1", "k1", "", 30)
		}, map[string]int{RefundTwice: 1}},
		// running-balance
		{"a running balance chain broken", nil, nil, func(h History) History {
			s := last(h)
			i := slices.IndexFunc(s.Postings, func(p Posting) bool { return p.Account == "A1" && p.Entry == "r1" })
			s.Postings[i].After += 5
			return h
		}, map[string]int{RunningBalance: 1}},
		{"the last running balance is not the balance", nil, nil, func(h History) History {
			s := last(h)
			for i := len(s.Postings) - 1; i >= 0; i-- {
				if s.Postings[i].Account == "A2" {
					s.Postings[i].After -= 7
					break
				}
			}
			return h
		}, map[string]int{RunningBalance: 1}},
		{"two postings of an account with one number", nil, nil, func(h History) History {
			s := last(h)
			i := slices.IndexFunc(s.Postings, func(p Posting) bool { return p.Account == "A1" && p.Entry == "r2" })
			j := slices.IndexFunc(s.Postings, func(p Posting) bool { return p.Account == "A1" && p.Entry == "r1" })
			s.Postings[i].Seq = s.Postings[j].Seq
			return h
		}, map[string]int{RunningBalance: 1}},
		// statement
		{"a statement missing a posting", nil, nil, func(h History) History {
			s := statementOf(h, "A1", stamp(at(-1)))
			s.Items = slices.Delete(s.Items, 2, 3)
			return h
		}, map[string]int{StatementSum: 1}},
		{"a statement whose closing is not its postings", nil, nil, func(h History) History {
			s := statementOf(h, "A2", stamp(at(22.5)))
			s.ClosingCents++
			return append(h, Op{Kind: KindBalanceAt, Invoke: at(39), Complete: at(39.1), Outcome: OK, Key: "A2",
				BalanceAt: &BalanceAt{Account: "A2", At: stamp(at(38)), Cents: s.ClosingCents}, Answer: &Answer{Status: http.StatusOK}})
		}, map[string]int{StatementSum: 1}},
		{"a statement closing with another balance than /saldo at ate", nil, nil, func(h History) History {
			i := findOp(t, h, func(op Op) bool { return op.Kind == KindBalanceAt })
			h[i].BalanceAt.Cents += 7
			return h
		}, map[string]int{StatementSum: 1}},
		{"a balance at an instant answered in another zone with another value", nil, nil, func(h History) History {
			i := findOp(t, h, func(op Op) bool { return op.Kind == KindBalanceAt })
			b := *h[i].BalanceAt
			b.At, b.Cents = at(38).In(brasilia).Format("2006-01-02T15:04:05.999999999-07:00"), b.Cents-1
			return append(h, Op{Kind: KindBalanceAt, Invoke: at(39), Complete: at(39.1), Outcome: OK, Key: "A1", BalanceAt: &b, Answer: &Answer{Status: http.StatusOK}})
		}, map[string]int{StatementSum: 1}},
		// refund-status
		{"a refund answered 202 never read terminal", nil, nil, func(h History) History {
			h[findOp(t, h, readOf("r3"))].Answer.Refund.Status = RefundPending
			return h
		}, map[string]int{RefundStatus: 1}},
		{"a refund read REJEITADO that the ledger settled", nil, nil, func(h History) History {
			r := h[findOp(t, h, readOf("r1"))].Answer.Refund
			r.Status, r.Reason = RefundRejected, events.ReasonInsufficientFunds
			return h
		}, map[string]int{RefundStatus: 1}},
		{"a refund read LIQUIDADO that the ledger rejected", nil, nil, func(h History) History {
			r := h[findOp(t, h, readOf("r4"))].Answer.Refund
			r.Status, r.Reason, r.AmountCents = RefundSettled, "", 10
			return h
		}, map[string]int{RefundStatus: 2, LostPosting: 1}}, // and k2 read at 36 having refunded 40
		{"a refund read with another amount than it posted", nil, nil, func(h History) History {
			h[findOp(t, h, readOf("r3"))].Answer.Refund.AmountCents = 45
			return h
		}, map[string]int{RefundStatus: 2}}, // and k2 read at 36 having refunded 40
		{"a refund read with another motivo than the ledger's", nil, nil, func(h History) History {
			h[findOp(t, h, readOf("r4"))].Answer.Refund.Reason = events.ReasonInsufficientFunds
			return h
		}, map[string]int{RefundStatus: 1}},
		{"a refund rejected for exceeding although it fit", withCase("r4", func(c *refundCase) { c.asked = 5 }), nil, nil,
			map[string]int{RefundStatus: 1}},
		{"a refund read PENDENTE after LIQUIDADO", nil, nil, func(h History) History {
			return append(h, refundReadOp(36, "r1", "k1", RefundState{AmountCents: 30, Status: RefundPending}))
		}, map[string]int{RefundStatus: 1}},
		{"a refund read 404 after its 202", nil, nil, func(h History) History {
			return append(h, Op{Kind: KindRefundGet, Invoke: at(23.5), Complete: at(23.6), Outcome: OK, Key: "r1", Refund: &Refund{TransferID: "k1"},
				Answer: &Answer{Status: http.StatusNotFound}})
		}, map[string]int{RefundStatus: 1}},
		{"a refund accepted for a transfer the ledger rejected", nil, nil, func(h History) History {
			h = append(h, refundPost(30, OK, "r9", "k3", 10, refundAnswer(http.StatusAccepted, "r9", RefundState{TransferID: "k3", Status: RefundPending})),
				refundReadOp(35, "r9", "k3", RefundState{Status: RefundRejected, Reason: events.ReasonNotSettled}))
			return publish(h, 30, events.TypeRefundRejected, topicRefRej, "ev-r-r9", "r9", "k3", events.ReasonNotSettled, 0)
		}, map[string]int{RefundStatus: 1}},
		{"both results published for one refund", nil, nil, func(h History) History {
			return publish(h, 30, events.TypeRefundRejected, topicRefRej, "ev-r-r1", "r1", "k1", events.ReasonInsufficientFunds, 0)
		}, map[string]int{RefundStatus: 1}},
		{"a result for a refund no client asked for", nil, nil, func(h History) History {
			return publish(h, 30, events.TypeRefundRejected, topicRefRej, "ev-r-r9", "r9", "k1", events.ReasonExceedsRefundable, 0)
		}, map[string]int{RefundStatus: 1}},
		{"a transfer read refunding less than its refunds read LIQUIDADO before", nil, nil, func(h History) History {
			h[findOp(t, h, func(op Op) bool { return op.Kind == KindGet && op.Key == "k1" && op.Invoke.Equal(at(36)) })].Answer.RefundedCents = 30
			return h
		}, map[string]int{RefundStatus: 1}},
		// the per-account model and the postings' other kinds, for refunds
		{"a refund posted the wrong way round", nil, func(e *Entry) {
			if e.ID == "r3" {
				e.Debit, e.Credit = e.Credit, e.Debit
			}
		}, nil, map[string]int{PostingAccount: 1}},
		{"a refund posted with another amount than asked", nil, func(e *Entry) {
			if e.ID == "r3" {
				e.DebitCents, e.CreditCents = 35, 35
			}
		}, nil, map[string]int{PostingAmount: 1, RefundStatus: 1}},
		{"postings of a refund no client asked for", nil, nil, func(h History) History {
			return repost(h, func(s *Snapshot) {
				s.Entries = append(s.Entries, Entry{Type: EntryRefund, ID: "r9", TransferID: "k2", Debit: "A2", DebitCents: 5, Credit: "A1", CreditCents: 5, Postings: 2})
			})
		}, map[string]int{StrayPosting: 1}},
		{"refunds read LIQUIDADO without postings in a later snapshot", nil, nil, func(h History) History {
			s := snapshot(36, 36.1, -2000, 839, 1161, "k1", "k2", "k4", "k5")
			return append(h, s)
		}, map[string]int{LostPosting: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cases := tc.cases
			if cases == nil {
				cases = refundCases()
			}
			h := cleanRefunds(cases, tc.post)
			if tc.change != nil {
				h = tc.change(h)
			}
			checkKinds(t, h, tc.want)
		})
	}
}

// TestCheckFailsVacuousRefundHistories: a run whose mix claims refunds or
// statements and shows none of what they are tested less than it claims.
func TestCheckFailsVacuousRefundHistories(t *testing.T) {
	t.Parallel()
	all := refundCases()
	keep := func(ids ...string) []refundCase {
		return slices.DeleteFunc(slices.Clone(all), func(c refundCase) bool { return !slices.Contains(ids, c.id) })
	}
	drop := func(kinds ...Kind) func(History) History {
		return func(h History) History {
			return slices.DeleteFunc(h, func(op Op) bool { return slices.Contains(kinds, op.Kind) })
		}
	}
	tests := []struct {
		name   string
		cases  []refundCase
		change func(History) History
	}{
		{"claims refunds, recorded none", []refundCase{}, nil},
		{"no refund settled", keep("r5"), nil},
		{"no refund refused for exceeding", keep("r1", "r2", "r3"), nil},
		{"claims statements, read none", all, drop(KindStatement, KindBalanceAt)},
		{"no running balances", all, func(h History) History {
			for _, op := range h {
				if op.Kind == KindSnapshot {
					op.Snapshot.Postings = nil
				}
			}
			return h
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cases := tc.cases
			if cases == nil {
				cases = all
			}
			h := cleanRefunds(cases, nil)
			if tc.change != nil {
				h = tc.change(h)
			}
			rep, err := Check(h)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Count(Vacuous) != 1 || len(rep.Anomalies) != 1 {
				t.Errorf("want exactly one vacuous anomaly, got:\n%s", rep.Table())
			}
		})
	}
}

func TestRecorderRecordsRefundsAndStatements(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := NewRecorder(&buf)
	r.now = func() time.Time { return at(1) }
	r.Mix(MixRefunds)
	r.Refund(at(0.5), OK, "r1", Refund{TransferID: "k1", AmountCents: 30},
		refundAnswer(http.StatusAccepted, "r1", RefundState{TransferID: "k1", Status: RefundPending}))
	r.RefundGet(at(0.6), OK, "r1", Refund{TransferID: "k1"},
		refundAnswer(http.StatusOK, "r1", RefundState{TransferID: "k1", AmountCents: 30, Status: RefundSettled}))
	st := Statement{Account: "A1", From: stamp(at(0)), To: stamp(at(1)), OpeningCents: 5, ClosingCents: 35,
		Items: []StatementItem{{ID: "7", Type: "C", Cents: 30, TransferID: "k1", RefundID: "r1", After: 35}}}
	r.Statement(at(0.7), OK, st, Answer{Status: http.StatusOK})
	r.BalanceAt(at(0.8), OK, BalanceAt{Account: "A1", At: stamp(at(1)), Cents: 35}, Answer{Status: http.StatusOK})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	accepted, read := refundAnswer(http.StatusAccepted, "r1", RefundState{TransferID: "k1", Status: RefundPending}),
		refundAnswer(http.StatusOK, "r1", RefundState{TransferID: "k1", AmountCents: 30, Status: RefundSettled})
	want := History{
		{Kind: KindMix, Invoke: at(1), Complete: at(1), Outcome: OK, Key: MixRefunds},
		{Kind: KindRefund, Invoke: at(0.5), Complete: at(1), Outcome: OK, Key: "r1", Refund: &Refund{TransferID: "k1", AmountCents: 30}, Answer: &accepted},
		{Kind: KindRefundGet, Invoke: at(0.6), Complete: at(1), Outcome: OK, Key: "r1", Refund: &Refund{TransferID: "k1"}, Answer: &read},
		{Kind: KindStatement, Invoke: at(0.7), Complete: at(1), Outcome: OK, Key: "A1", Statement: &st, Answer: &Answer{Status: http.StatusOK}},
		{Kind: KindBalanceAt, Invoke: at(0.8), Complete: at(1), Outcome: OK, Key: "A1",
			BalanceAt: &BalanceAt{Account: "A1", At: stamp(at(1)), Cents: 35}, Answer: &Answer{Status: http.StatusOK}},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []Op{
		{Kind: KindRefund, Outcome: OK, Key: "r1", Answer: &Answer{}},
		{Kind: KindRefundGet, Outcome: OK, Key: "r1", Refund: &Refund{}, Answer: &Answer{}},
		{Kind: KindStatement, Outcome: OK, Key: "A1", Answer: &Answer{}},
		{Kind: KindBalanceAt, Outcome: OK, Key: "A1", Answer: &Answer{}},
		{Kind: KindMix, Outcome: OK},
	} {
		if _, err := Check(History{bad}); err == nil {
			t.Errorf("a %s without its fields passed", bad.Kind)
		}
	}
}
