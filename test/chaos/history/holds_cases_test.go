package history

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCheckHoldsCleanHistoryPasses: holds captured in part and in whole,
// cancelled, expired, a capture the expiry beat, a replayed capture, a
// capture refused after the expiry: no anomaly, in each allowed variant.
func TestCheckHoldsCleanHistoryPasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(History) History
	}{
		{"as built", func(h History) History { return h }},
		{"snapshots that list only the open reservations", func(h History) History {
			h[len(h)-1].Snapshot.Holds = nil
			return h
		}},
		{"a capture of unknown outcome that took effect", func(h History) History {
			i := findOp(t, h, func(op Op) bool { return op.Kind == KindCapture && op.Key == "c-h5" })
			h[i].Outcome, h[i].Answer = Info, &Answer{Error: "context deadline exceeded"}
			return h
		}},
		{"a read of the expiry in another time zone", func(h History) History {
			i := findOp(t, h, func(op Op) bool { return op.Kind == KindGet && op.Key == "h3" && op.Invoke.Equal(at(35)) })
			tr := *h[i].Answer.Transfer
			tr.ExpiresAt = "2026-12-01T17:00:30-03:00"
			h[i].Answer.Transfer = &tr
			return h
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Check(tc.change(cleanHolds(holdCases()...)))
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Errorf("anomalies in a clean history with holds:\n%s", rep.Table())
			}
			if f := rep.Figures; f.Holds != 5 || f.Captures < 2 || f.Cancels != 1 {
				t.Errorf("figures %+v: want 5 holds, 2 or 3 captures, 1 cancellation answered 202", f)
			}
		})
	}
}

func findOp(t *testing.T, h History, pred func(Op) bool) int {
	t.Helper()
	for i, op := range h {
		if pred(op) {
			return i
		}
	}
	t.Fatal("no such op in the history")
	return -1
}

// TestCheckCatchesEachHoldAnomaly adds one fault at a time to the clean
// history with holds; each must be reported as its kind, and nothing else.
func TestCheckCatchesEachHoldAnomaly(t *testing.T) {
	t.Parallel()
	snapAt := func(s float64) func(Op) bool {
		return func(op Op) bool { return op.Kind == KindSnapshot && op.Invoke.Equal(at(s)) }
	}
	readAt := func(id string, s float64) func(Op) bool {
		return func(op Op) bool { return op.Kind == KindGet && op.Key == id && op.Invoke.Equal(at(s)) }
	}
	balance := func(h History, i int, account string, cents, reserved int64) {
		for j, b := range h[i].Snapshot.Balances {
			if b.Account == account {
				h[i].Snapshot.Balances[j].Cents, h[i].Snapshot.Balances[j].ReservedCents = cents, reserved
			}
		}
	}
	setRow := func(h History, i int, id string, f func(*Hold)) {
		for j := range h[i].Snapshot.Holds {
			if h[i].Snapshot.Holds[j].TransferID == id {
				f(&h[i].Snapshot.Holds[j])
			}
		}
	}
	// posted adds to the snapshot at s postings of cents of hold id and
	// moves the balances with them.
	posted := func(h History, s float64, id, from, to string, cents int64) History {
		i := findOp(t, h, snapAt(s))
		for j, b := range h[i].Snapshot.Balances {
			switch b.Account {
			case from:
				h[i].Snapshot.Balances[j].Cents -= cents
			case to:
				h[i].Snapshot.Balances[j].Cents += cents
			}
		}
		h[i].Snapshot.Entries = append(h[i].Snapshot.Entries, Entry{Type: EntryTransfer, ID: id, Debit: from, DebitCents: cents, Credit: to, CreditCents: cents})
		return h
	}
	release := func(h History, seq int64, id, key, reason string) History {
		ev := "again-" + id
		p := published("ledger", seq, topicCan, 0, key, ev, TypeCancelled, id)
		p.Record.Reason = reason
		return append(h, p, consumed("notificacoes", topicCan, 0, 50, key, ev), consumed("transferencias-projecao", topicCan, 0, 50, key, ev))
	}
	tests := []struct {
		name   string
		cases  []holdCase
		change func(History) History
		want   map[string]int
	}{
		{"one reservation released twice (cancelled, then expired)", nil, func(h History) History {
			return release(h, 90, "h2", "A2", ReasonExpired)
		}, map[string]int{ReleasedTwice: 1}},
		{"a reservation captured and also expired", nil, func(h History) History {
			return release(h, 90, "h1", "A1", ReasonExpired)
		}, map[string]int{ReleasedTwice: 1}},
		{"reservado beyond the balance", append(holdCases(),
			holdCase{id: "h6", body: hold("A2", "A1", 1100, 0), ending: StatusCancelled}), nil,
			map[string]int{ReservedRange: 1}},
		{"reservado left after its hold was released", nil, func(h History) History {
			i := findOp(t, h, snapAt(37))
			balance(h, i, "A1", 689, 30)
			return h
		}, map[string]int{ReservedOpen: 1}},
		{"a hold read CANCELADA, still reserved in a later snapshot", nil, func(h History) History {
			i := findOp(t, h, snapAt(37))
			balance(h, i, "A2", 1311, 200)
			setRow(h, i, "h2", func(r *Hold) { r.State = StatusReserved })
			return h
		}, map[string]int{ReservedOpen: 1}},
		{"the ledger captured more than reserved", []holdCase{
			{id: "h1", body: hold("A1", "A2", 300, 0), ending: StatusSettled, capture: 120, captured: 350},
			holdCases()[1], holdCases()[2], holdCases()[3], holdCases()[4]}, nil,
			map[string]int{OverCapture: 1}},
		{"a capture in part posted in whole", []holdCase{
			{id: "h1", body: hold("A1", "A2", 300, 0), ending: StatusSettled, capture: 120, captured: 300},
			holdCases()[1], holdCases()[2], holdCases()[3], holdCases()[4]}, nil,
			map[string]int{PostingAmount: 1}},
		{"a capture of more than reserved answered 202", nil, func(h History) History {
			return append(h, command(KindCapture, 26.5, OK, "c-h1-big", "h1", 400, http.StatusAccepted))
		}, map[string]int{OverCapture: 1}},
		{"postings of a cancelled hold", nil, func(h History) History {
			return posted(h, 37, "h2", "A2", "A1", 200)
		}, map[string]int{HoldPosting: 1}},
		{"postings of a hold still reserved", nil, func(h History) History {
			return posted(h, 25, "h5", "A1", "A2", 30)
		}, map[string]int{HoldPosting: 1}},
		{"a reservation captured without its postings, read LIQUIDADA", nil, func(h History) History {
			i := findOp(t, h, snapAt(37))
			balance(h, i, "A1", 719, 0)
			balance(h, i, "A2", 1281, 0)
			h[i].Snapshot.Entries = h[i].Snapshot.Entries[:len(h[i].Snapshot.Entries)-1] // h5's
			return h
		}, map[string]int{HoldPosting: 1, LostPosting: 1}},
		{"a hold read CANCELADA that the ledger expired", nil, func(h History) History {
			h[findOp(t, h, readAt("h3", 35))].Answer.TransferStatus = StatusCancelled
			return h
		}, map[string]int{HoldStatus: 1}},
		{"a capture read with another amount than the ledger's", nil, func(h History) History {
			h[findOp(t, h, readAt("h1", 35))].Answer.SettledCents = 100
			return h
		}, map[string]int{HoldStatus: 1}},
		{"a hold read EXPIRADA before its expiraEm", nil, func(h History) History {
			r := h[findOp(t, h, readAt("h3", 35))]
			r.Invoke, r.Complete = at(29), at(29.1)
			return append(h, r)
		}, map[string]int{HoldStatus: 1}},
		{"a hold cancelled by no client", nil, func(h History) History {
			i := findOp(t, h, func(op Op) bool { return op.Kind == KindCancel && op.Key == "x-h2" })
			return append(h[:i], h[i+1:]...)
		}, map[string]int{HoldStatus: 1}},
		{"an immediate transfer read RESERVADA", nil, func(h History) History {
			return append(h, get(3.5, 3.6, "k3", 200, StatusReserved))
		}, map[string]int{HoldStatus: 1}},
		{"a capture accepted after the hold expired", nil, func(h History) History {
			i := findOp(t, h, func(op Op) bool { return op.Key == "late-h3" })
			h[i] = command(KindCapture, 36, OK, "late-h3", "h3", 0, http.StatusAccepted)
			return h
		}, map[string]int{CommandNotReserved: 1}},
		{"a capture of an immediate transfer accepted", nil, func(h History) History {
			return append(h, command(KindCapture, 3, OK, "c-k1", "k1", 0, http.StatusAccepted))
		}, map[string]int{CommandNotReserved: 1}},
		{"a cancellation answered 202 with status LIQUIDADA", nil, func(h History) History {
			c := command(KindCancel, 36, OK, "x-h1-late", "h1", 0, http.StatusAccepted)
			c.Answer.TransferStatus = StatusSettled
			return append(h, c)
		}, map[string]int{CommandNotReserved: 1}},
		{"a capture of a hold the ledger never reserved", nil, func(h History) History {
			b := hold("A1", "A2", 10, 0)
			return append(h, post(23, 23.1, OK, "h7", b, accepted("h7")),
				command(KindCapture, 24, OK, "c-h7", "h7", 0, http.StatusAccepted),
				holdRead(35, "h7", b, StatusRejected, 0))
		}, map[string]int{CommandNotReserved: 1}},
		{"a hold read RESERVADA after EXPIRADA", nil, func(h History) History {
			return append(h, holdRead(36, "h3", hold("A1", "A2", 50, 30), StatusReserved, 0))
		}, map[string]int{StaleRead: 1}},
		{"a hold read RESERVADA to the end", nil, func(h History) History {
			h[findOp(t, h, readAt("h3", 35))].Answer.TransferStatus = StatusReserved
			return h
		}, map[string]int{NotTerminal: 1}},
		{"a reservation that moved the balance (a hold is not a posting)", nil, func(h History) History {
			i := findOp(t, h, snapAt(25))
			balance(h, i, "A1", 839-380, 380)
			return h
		}, map[string]int{BankSum: 1, BankDeposits: 1, BalancePostings: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cases := tc.cases
			if cases == nil {
				cases = holdCases()
			}
			h := cleanHolds(cases...)
			if tc.change != nil {
				h = tc.change(h)
			}
			checkKinds(t, h, tc.want)
		})
	}
}

// TestCheckFailsVacuousHoldHistories: a run with holds in its mix that
// shows no hold reserved, captured, cancelled or expired tested less than
// it claims.
func TestCheckFailsVacuousHoldHistories(t *testing.T) {
	t.Parallel()
	all := holdCases()
	tests := []struct {
		name  string
		cases []holdCase
	}{
		{"no capture", []holdCase{all[1], all[2]}},
		{"no cancellation", []holdCase{all[0], all[2], all[3]}},
		{"no expiry", []holdCase{all[0], all[1], all[4]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Check(cleanHolds(tc.cases...))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Count(Vacuous) != 1 || len(rep.Anomalies) != 1 {
				t.Errorf("want exactly one vacuous anomaly, got:\n%s", rep.Table())
			}
		})
	}
	t.Run("no hold reserved", func(t *testing.T) {
		t.Parallel()
		h := append(clean(), post(23, 23.1, OK, "h7", hold("A1", "A2", 10, 0), accepted("h7")),
			holdRead(35, "h7", hold("A1", "A2", 10, 0), StatusRejected, 0))
		rep, err := Check(h)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Count(Vacuous) != 1 || len(rep.Anomalies) != 1 {
			t.Errorf("want exactly one vacuous anomaly, got:\n%s", rep.Table())
		}
	})
}

func TestRecorderRecordsCommands(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := NewRecorder(&buf)
	r.now = func() time.Time { return at(1) }
	r.Capture(at(0.5), OK, "c1", Command{TransferID: "h1", AmountCents: 120}, Answer{Status: 202, ID: "h1", TransferStatus: StatusReserved})
	r.Cancel(at(0.6), Info, "x1", Command{TransferID: "h2"}, Answer{Error: "timeout"})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := History{
		{Kind: KindCapture, Invoke: at(0.5), Complete: at(1), Outcome: OK, Key: "c1", Command: &Command{TransferID: "h1", AmountCents: 120},
			Answer: &Answer{Status: 202, ID: "h1", TransferStatus: StatusReserved}},
		{Kind: KindCancel, Invoke: at(0.6), Complete: at(1), Outcome: Info, Key: "x1", Command: &Command{TransferID: "h2"}, Answer: &Answer{Error: "timeout"}},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}
	if _, err := Check(History{{Kind: KindCapture, Outcome: OK, Key: "c1", Answer: &Answer{}}}); err == nil {
		t.Error("a capture without its command passed")
	}
}
