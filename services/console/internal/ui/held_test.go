package ui

import (
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/opsapi"
)

// TestHeldRowComparesAsTheTransfersService: the page offers Apply only
// when the transfer now is the one the ledger's record describes, client
// included, as the transfers service will check; it names what differs.
func TestHeldRowComparesAsTheTransfersService(t *testing.T) {
	t.Parallel()
	held := opsHeld{Status: "LIQUIDADA", Transferencia: &opsapi.OperatorTransfer{ClienteID: "loja",
		Transfer: opsapi.Transfer{ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 500, Moeda: "BRL", Status: "PENDENTE"}}}
	ledger := opsapi.Settlement{Resultado: "LIQUIDADA", ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 500, Moeda: "BRL", ClienteID: "loja"}
	if row := heldRow(held, &ledger); !row.Matches() {
		t.Errorf("the same transfer: %v", row.Differences)
	}
	for _, tc := range []struct {
		name   string
		change func(*opsapi.Settlement)
		want   string
	}{
		{"another client", func(l *opsapi.Settlement) { l.ClienteID = "outra" }, "client: loja here, outra in the ledger"},
		{"another amount", func(l *opsapi.Settlement) { l.ValorEmCentavos = 501 }, "amount: 500 here, 501 in the ledger"},
		{"another result", func(l *opsapi.Settlement) { l.Resultado, l.Motivo = "REJEITADA", "SALDO_INSUFICIENTE" }, "the ledger decided REJEITADA"},
	} {
		l := ledger
		tc.change(&l)
		if row := heldRow(held, &l); row.Matches() || !strings.Contains(strings.Join(row.Differences, "; "), tc.want) {
			t.Errorf("%s: differences %q, want one saying %q", tc.name, row.Differences, tc.want)
		}
	}
	if row := heldRow(held, nil); row.Matches() {
		t.Error("no ledger's record: Apply offered")
	}
}
