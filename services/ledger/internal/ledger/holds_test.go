package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// TestDecideHold: a hold is checked against the available balance and
// reserves instead of posting.
func TestDecideHold(t *testing.T) {
	t.Parallel()
	src := &ledger.Account{ID: "CC-001", Currency: "BRL", BalanceCents: 100, ReservedCents: 30, Holder: "ana"}
	dst := &ledger.Account{ID: "CC-002", Currency: "BRL", Holder: "bruno"}
	h := ledger.Transfer{ID: uuid.New(), Source: "CC-001", Dest: "CC-002", AmountCents: 71, Currency: "BRL", ClientID: "ana", Hold: true}
	if o, reason, es := ledger.Decide(src, dst, h, ledger.Signed); o != ledger.Rejected || reason != ledger.ReasonInsufficientFunds || es != nil {
		t.Errorf("a hold over the available 70: %s %s %v, want rejected SALDO_INSUFICIENTE", o, reason, es)
	}
	h.AmountCents = 70
	if o, _, es := ledger.Decide(src, dst, h, ledger.Signed); o != ledger.Reserved || es != nil || src.ReservedCents != 100 || src.BalanceCents != 100 {
		t.Errorf("a hold of the available 70: %s %v, source %+v; want reserved, 100 of 100 reserved", o, es, *src)
	}
	h.Hold = false
	h.AmountCents = 1
	if o, reason, _ := ledger.Decide(src, dst, h, ledger.Signed); o != ledger.Rejected || reason != ledger.ReasonInsufficientFunds {
		t.Errorf("an immediate transfer with nothing available: %s %s, want rejected SALDO_INSUFICIENTE", o, reason)
	}
}

// TestClose: the rules of closing a reservation, in their order.
func TestClose(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	id := uuid.New()
	open := func() *ledger.Reservation {
		return &ledger.Reservation{TransferID: id, Source: "CC-001", Dest: "CC-002", Currency: "BRL", AmountCents: 60,
			ExpiresAt: now.Add(time.Minute), State: ledger.ReservationOpen, ClientID: "ana"}
	}
	closed := func() *ledger.Reservation { r := open(); r.State = ledger.ReservationCancelled; return r }
	cmd := func(kind ledger.CommandKind, amount int64) ledger.Command {
		return ledger.Command{Kind: kind, TransferID: id, EventID: uuid.New(), Source: "CC-001", AmountCents: amount, ClientID: "ana"}
	}
	with := func(c ledger.Command, f func(*ledger.Command)) ledger.Command { f(&c); return c }
	tests := []struct {
		name    string
		r       *ledger.Reservation
		c       ledger.Command
		own     ledger.Ownership
		at      time.Time
		want    ledger.Outcome
		err     error
		src     [2]int64 // balance, reserved after (from 100, 60)
		entries int
	}{
		{"no reservation", nil, cmd(ledger.Capture, 1), 0, now, "", ledger.ErrNotReserved, [2]int64{100, 60}, 0},
		{"another client, even closed", closed(), with(cmd(ledger.Cancel, 0), func(c *ledger.Command) { c.ClientID = "bruno" }), 0, now,
			"", ledger.ErrForeignCommand, [2]int64{100, 60}, 0},
		{"another client, ownership off", open(), with(cmd(ledger.Cancel, 0), func(c *ledger.Command) { c.ClientID = "bruno" }),
			ledger.OwnershipOff, now, ledger.Cancelled, nil, [2]int64{100, 0}, 0},
		{"another source, ownership off", open(), with(cmd(ledger.Cancel, 0), func(c *ledger.Command) { c.Source = "CC-003" }),
			ledger.OwnershipOff, now, "", ledger.ErrForeignCommand, [2]int64{100, 60}, 0},
		{"a capture over the reservation, even closed", closed(), cmd(ledger.Capture, 61), 0, now, "", ledger.ErrCaptureAmount, [2]int64{100, 60}, 0},
		{"closed", closed(), cmd(ledger.Capture, 60), 0, now, ledger.AlreadyClosed, nil, [2]int64{100, 60}, 0},
		{"capture", open(), cmd(ledger.Capture, 20), 0, now, ledger.Settled, nil, [2]int64{80, 0}, 2},
		{"cancel", open(), cmd(ledger.Cancel, 0), 0, now, ledger.Cancelled, nil, [2]int64{100, 0}, 0},
		{"capture at the expiry", open(), cmd(ledger.Capture, 20), 0, now.Add(time.Minute), ledger.Expired, nil, [2]int64{100, 0}, 0},
		{"expire when due", open(), ledger.Command{Kind: ledger.Expire, TransferID: id}, 0, now.Add(time.Minute), ledger.Expired, nil,
			[2]int64{100, 0}, 0},
	}
	for _, tc := range tests {
		src := &ledger.Account{ID: "CC-001", Currency: "BRL", BalanceCents: 100, ReservedCents: 60}
		dst := &ledger.Account{ID: "CC-002", Currency: "BRL"}
		got, _, entries, err := ledger.DecideClosing(tc.r, src, dst, tc.c, tc.own, tc.at)
		if got != tc.want || !errors.Is(err, tc.err) || len(entries) != tc.entries {
			t.Errorf("%s: %q, %v, %d entries; want %q, %v, %d entries", tc.name, got, err, len(entries), tc.want, tc.err, tc.entries)
		}
		if diff := cmp.Diff(tc.src, [2]int64{src.BalanceCents, src.ReservedCents}); diff != "" {
			t.Errorf("%s: source (balance, reserved) mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
	// An expiry of a reservation not yet due is a fault of the sweep.
	if _, _, _, err := ledger.DecideClosing(open(), &ledger.Account{ID: "CC-001"}, &ledger.Account{ID: "CC-002"},
		ledger.Command{Kind: ledger.Expire, TransferID: id}, 0, now); err == nil {
		t.Error("an expiry before the reservation is due: no error")
	}
}
