package transfer_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// TestCheckSettlement: a held result is applied only to a PENDENTE
// transfer with its id that is the one the ledger decided: same accounts,
// amount, currency, and the result the ledger reached.
func TestCheckSettlement(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	held := transfer.HeldResult{TransferID: id, Status: transfer.StatusSettled}
	heldRejected := transfer.HeldResult{TransferID: id, Status: transfer.StatusRejected, Reason: "SALDO_INSUFICIENTE"}
	tr := transfer.Transfer{ID: id, Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL", Status: transfer.StatusPending}
	ledger := transfer.Settlement{Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL", Result: transfer.StatusSettled}
	with := func(f func(*transfer.Transfer, *transfer.Settlement)) (transfer.Transfer, transfer.Settlement) {
		t2, l2 := tr, ledger
		f(&t2, &l2)
		return t2, l2
	}
	tests := []struct {
		name string
		held transfer.HeldResult
		f    func(*transfer.Transfer, *transfer.Settlement)
		ok   bool
	}{
		{"the same transfer", held, func(*transfer.Transfer, *transfer.Settlement) {}, true},
		{"another amount", held, func(t *transfer.Transfer, _ *transfer.Settlement) { t.AmountCents = 30001 }, false},
		{"another source", held, func(t *transfer.Transfer, _ *transfer.Settlement) { t.Source = "CC-009" }, false},
		{"another destination", held, func(t *transfer.Transfer, _ *transfer.Settlement) { t.Destination = "CC-009" }, false},
		{"another currency", held, func(t *transfer.Transfer, _ *transfer.Settlement) { t.Currency = "USD" }, false},
		{"another id", held, func(t *transfer.Transfer, _ *transfer.Settlement) { t.ID = uuid.New() }, false},
		{"already final", held, func(t *transfer.Transfer, _ *transfer.Settlement) { t.Status = transfer.StatusSettled }, false},
		{"the ledger rejected it", held, func(_ *transfer.Transfer, l *transfer.Settlement) {
			l.Result, l.Reason = transfer.StatusRejected, "SALDO_INSUFICIENTE"
		}, false},
		{"a rejection the ledger made", heldRejected, func(_ *transfer.Transfer, l *transfer.Settlement) {
			l.Result, l.Reason = transfer.StatusRejected, "SALDO_INSUFICIENTE"
		}, true},
		{"a rejection for another reason", heldRejected, func(_ *transfer.Transfer, l *transfer.Settlement) {
			l.Result, l.Reason = transfer.StatusRejected, "CONTA_INEXISTENTE"
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, l := with(tc.f)
			err := transfer.CheckSettlement(tc.held, tr, l)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, transfer.ErrNotTheSettledTransfer)) {
				t.Errorf("CheckSettlement = %v, want ok %v (else ErrNotTheSettledTransfer)", err, tc.ok)
			}
		})
	}
}
