package opsapi_test

import (
	"encoding/json"
	"testing"

	"github.com/paysuite/payments/pkg/opsapi"
)

// TestOperatorTransferWireOrder: the operator's view of a transfer is the
// fields every view shows, then the client and request id, then the
// times, byte for byte; Motivo, RequestID and a hold's fields are left
// out when empty.
func TestOperatorTransferWireOrder(t *testing.T) {
	full := opsapi.OperatorTransfer{
		Transfer: opsapi.Transfer{ID: "t1", ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 100, Moeda: "BRL",
			Status: "REJEITADA", Motivo: "SALDO_INSUFICIENTE"},
		ClienteID: "loja", RequestID: "req-1",
		TransferTimes: opsapi.TransferTimes{CriadaEm: "2026-12-01T10:00:00Z", AtualizadaEm: "2026-12-01T10:00:01Z"},
	}
	bare := full
	bare.Motivo, bare.RequestID = "", ""
	hold := bare
	hold.Status, hold.Captura, hold.ExpiraEm, hold.ValorLiquidadoEmCentavos = "LIQUIDADA", "MANUAL", "2026-12-08T10:00:00Z", 60
	for _, tt := range []struct {
		name string
		in   opsapi.OperatorTransfer
		want string
	}{
		{"full", full, `{"id":"t1","contaOrigem":"CC-1","contaDestino":"CC-2","valorEmCentavos":100,"moeda":"BRL",` +
			`"status":"REJEITADA","motivo":"SALDO_INSUFICIENTE","clienteId":"loja","requestId":"req-1",` +
			`"criadaEm":"2026-12-01T10:00:00Z","atualizadaEm":"2026-12-01T10:00:01Z"}`},
		{"no motivo or request id", bare, `{"id":"t1","contaOrigem":"CC-1","contaDestino":"CC-2","valorEmCentavos":100,` +
			`"moeda":"BRL","status":"REJEITADA","clienteId":"loja","criadaEm":"2026-12-01T10:00:00Z","atualizadaEm":"2026-12-01T10:00:01Z"}`},
		{"a captured hold", hold, `{"id":"t1","contaOrigem":"CC-1","contaDestino":"CC-2","valorEmCentavos":100,"moeda":"BRL",` +
			`"status":"LIQUIDADA","captura":"MANUAL","expiraEm":"2026-12-08T10:00:00Z","valorLiquidadoEmCentavos":60,"clienteId":"loja",` +
			`"criadaEm":"2026-12-01T10:00:00Z","atualizadaEm":"2026-12-01T10:00:01Z"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("body\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
