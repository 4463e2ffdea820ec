package transfer_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// TestCheckSettlement: a held result is applied only to a PENDENTE
// transfer with its id that is the one the ledger decided: the ledger's
// record names the same transfer id, accounts, amount, currency and
// client, a final result that is the held one, and, when it kept one, the
// request the held result answers.
func TestCheckSettlement(t *testing.T) {
	t.Parallel()
	id, request := uuid.New(), uuid.New()
	held := transfer.HeldResult{TransferID: id, Status: transfer.StatusSettled, RequestEventID: request}
	heldRejected := transfer.HeldResult{TransferID: id, Status: transfer.StatusRejected, Reason: "SALDO_INSUFICIENTE", RequestEventID: request}
	heldUnbound := transfer.HeldResult{TransferID: id, Status: transfer.StatusSettled}
	tr := transfer.Transfer{ID: id, Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL", Client: "loja",
		Status: transfer.StatusPending}
	ledger := transfer.Settlement{TransferID: id, Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL",
		Client: "loja", RequestEventID: request, Result: transfer.StatusSettled}
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
		{"the ledger's record of another id", held, func(_ *transfer.Transfer, l *transfer.Settlement) { l.TransferID = uuid.New() }, false},
		{"another client", held, func(t *transfer.Transfer, _ *transfer.Settlement) { t.Client = "outra-loja" }, false},
		{"the ledger's record names no client", held, func(_ *transfer.Transfer, l *transfer.Settlement) { l.Client = "" }, false},
		{"the ledger's source differs", held, func(_ *transfer.Transfer, l *transfer.Settlement) { l.Source = "CC-009" }, false},
		{"the ledger's amount differs", held, func(_ *transfer.Transfer, l *transfer.Settlement) { l.AmountCents = 1 }, false},
		{"the ledger answered another request", held, func(_ *transfer.Transfer, l *transfer.Settlement) { l.RequestEventID = uuid.New() }, false},
		{"a held result bound to no request, the ledger's to one", heldUnbound, func(*transfer.Transfer, *transfer.Settlement) {}, false},
		{"the ledger kept no request", held, func(_ *transfer.Transfer, l *transfer.Settlement) { l.RequestEventID = uuid.Nil }, true},
		{"the ledger has not decided", held, func(_ *transfer.Transfer, l *transfer.Settlement) { l.Result = "EM_PROCESSAMENTO" }, false},
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
