package ledger_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// DecideRefund's rules apply in their documented order: each case breaks
// one rule and every later one, and gets the first rule's motivo; with
// ownership off (Unchecked) the titular is not checked, but the bound of
// the transfer and the balance are.
func TestDecideRefundOrder(t *testing.T) {
	t.Parallel()
	tr := uuid.New()
	refund := ledger.Refund{ID: uuid.New(), TransferID: tr, Source: "A", Dest: "B", AmountCents: 100, Currency: "BRL", ClientID: "bob"}
	settled := func() *ledger.Refundable {
		return &ledger.Refundable{TransferID: tr, Source: "A", Dest: "B", Currency: "BRL", SettledCents: 300, RefundedCents: 150}
	}
	accounts := func(destBalance int64) (*ledger.Account, *ledger.Account) {
		return &ledger.Account{ID: "A", Currency: "BRL", Holder: "ana"},
			&ledger.Account{ID: "B", Currency: "BRL", Holder: "bob", BalanceCents: destBalance, ReservedCents: 50}
	}
	with := func(f func(r *ledger.Refund)) ledger.Refund { r := refund; f(&r); return r }
	tests := []struct {
		name    string
		t       *ledger.Refundable
		f       ledger.Refund
		dest    int64
		proof   ledger.Proof
		outcome ledger.Outcome
		reason  string
	}{
		{"unproven, whatever else", nil, with(func(r *ledger.Refund) { r.AmountCents = 1_000 }), 0, ledger.Unproven,
			ledger.RefundRejected, ledger.ReasonUnauthorized},
		{"another client, before the transfer's state", nil, with(func(r *ledger.Refund) { r.ClientID = "eve" }), 0, ledger.Signed,
			ledger.RefundRejected, ledger.ReasonUnauthorized},
		{"an operator, on a transfer never settled", nil, with(func(r *ledger.Refund) { r.ClientID, r.Operator = "ops", true }), 1_000,
			ledger.Signed, ledger.RefundRejected, ledger.ReasonNotSettled},
		{"not settled, before the bound", &ledger.Refundable{TransferID: tr, Source: "A", Dest: "B", Currency: "BRL"},
			with(func(r *ledger.Refund) { r.AmountCents = 1_000 }), 0, ledger.Signed, ledger.RefundRejected, ledger.ReasonNotSettled},
		{"above what remains, before the balance", settled(), with(func(r *ledger.Refund) { r.AmountCents = 151 }), 0, ledger.Signed,
			ledger.RefundRejected, ledger.ReasonExceedsRefundable},
		{"above the available balance (the reserved part excluded)", settled(), refund, 149, ledger.Signed,
			ledger.RefundRejected, ledger.ReasonInsufficientFunds},
		{"exactly what remains and is available", settled(), with(func(r *ledger.Refund) { r.AmountCents = 150 }), 200, ledger.Signed,
			ledger.RefundSettled, ""},
		{"ownership off: another client refunds", settled(), with(func(r *ledger.Refund) { r.ClientID = "eve" }), 1_000,
			ledger.Unchecked, ledger.RefundSettled, ""},
		{"ownership off: still bounded", settled(), with(func(r *ledger.Refund) { r.AmountCents = 151 }), 1_000, ledger.Unchecked,
			ledger.RefundRejected, ledger.ReasonExceedsRefundable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, dst := accounts(tc.dest)
			outcome, reason, entries := ledger.DecideRefund(tc.t, src, dst, tc.f, tc.proof)
			if outcome != tc.outcome || reason != tc.reason {
				t.Fatalf("DecideRefund = %s %s, want %s %s", outcome, reason, tc.outcome, tc.reason)
			}
			if outcome != ledger.RefundSettled {
				if entries != nil || src.BalanceCents != 0 || dst.BalanceCents != tc.dest {
					t.Errorf("a rejection moved something: %v, %+v, %+v", entries, src, dst)
				}
				return
			}
			want := []ledger.Entry{{AccountID: "B", Direction: ledger.Debit, AmountCents: tc.f.AmountCents},
				{AccountID: "A", Direction: ledger.Credit, AmountCents: tc.f.AmountCents}}
			if len(entries) != 2 || entries[0] != want[0] || entries[1] != want[1] {
				t.Errorf("entries %+v, want %+v", entries, want)
			}
			if src.BalanceCents != tc.f.AmountCents || dst.BalanceCents != tc.dest-tc.f.AmountCents || tc.t.RefundedCents != 150+tc.f.AmountCents {
				t.Errorf("after: source %+v, destination %+v, refunded %d", src, dst, tc.t.RefundedCents)
			}
		})
	}
}
