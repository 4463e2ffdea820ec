package events_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
)

// TestDecodeHolds: the hold payloads decode with their required fields,
// and captura takes only its two values (absent is AUTOMATICA).
func TestDecodeHolds(t *testing.T) {
	const (
		id  = `"eventoId":"6f1c1a4e-5b1e-4a57-9a43-0c2c6bd2a001","transferenciaId":"6f1c1a4e-5b1e-4a57-9a43-0c2c6bd2a002"`
		at  = `"ocorridoEm":"2026-11-29T22:00:00Z"`
		req = id + `,"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":5,"moeda":"BRL",` + at
	)
	tests := []struct {
		name   string
		decode func([]byte) error
		json   string
		ok     bool
	}{
		{"analysed without captura", analysed, `{` + req + `,"scoreRisco":10}`, true},
		{"analysed, a hold", analysed, `{` + req + `,"scoreRisco":10,"captura":"MANUAL","expiraEm":"2026-12-06T22:00:00Z"}`, true},
		{"analysed, automatic", analysed, `{` + req + `,"scoreRisco":10,"captura":"AUTOMATICA"}`, true},
		{"analysed, another captura", analysed, `{` + req + `,"scoreRisco":10,"captura":"manual"}`, false},
		{"requested, another captura", requested, `{` + req + `,"captura":"LATER"}`, false},
		{"reserved", reserved, `{` + id + `,"valorEmCentavos":5,"expiraEm":"2026-12-06T22:00:00Z",` + at + `}`, true},
		{"reserved without expiraEm", reserved, `{` + id + `,"valorEmCentavos":5,` + at + `}`, false},
		{"capture", capture, `{` + id + `,"contaOrigem":"CC-001","valorEmCentavos":5,"clienteId":"a",` + at + `}`, true},
		{"capture without an amount", capture, `{` + id + `,"contaOrigem":"CC-001",` + at + `}`, false},
		{"cancel", cancel, `{` + id + `,"contaOrigem":"CC-001",` + at + `}`, true},
		{"cancel without contaOrigem", cancel, `{` + id + `,` + at + `}`, false},
		{"cancelled, expired", cancelled, `{` + id + `,"motivo":"EXPIRADA",` + at + `}`, true},
		{"cancelled by the client", cancelled, `{` + id + `,"motivo":"CANCELADA_PELO_CLIENTE",` + at + `}`, true},
		{"cancelled, another motivo", cancelled, `{` + id + `,"motivo":"SALDO_INSUFICIENTE",` + at + `}`, false},
	}
	for _, tt := range tests {
		err := tt.decode([]byte(tt.json))
		if tt.ok != (err == nil) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, events.ErrMalformed) {
			t.Errorf("%s: %v does not wrap ErrMalformed", tt.name, err)
		}
	}
}

func analysed(b []byte) error  { return events.Decode(b, &events.Analysed{}) }
func requested(b []byte) error { return events.Decode(b, &events.Requested{}) }
func reserved(b []byte) error  { return events.Decode(b, &events.Reserved{}) }
func capture(b []byte) error   { return events.Decode(b, &events.CaptureRequested{}) }
func cancel(b []byte) error    { return events.Decode(b, &events.CancelRequested{}) }
func cancelled(b []byte) error { return events.Decode(b, &events.Cancelled{}) }

// TestCheckResultIDOfHolds: a reservation's and a cancellation's ids are
// derived with their own kinds, and no other kind's id passes for them.
func TestCheckResultIDOfHolds(t *testing.T) {
	tr := uuid.New()
	tests := []struct {
		typ  string
		kind string
		ok   bool
	}{
		{events.TypeReserved, events.KindReserved, true},
		{events.TypeCancelled, events.KindCancelled, true},
		{events.TypeReserved, events.KindSettled, false},
		{events.TypeCancelled, events.KindRejectedLedger, false},
		{events.TypeSettled, events.KindCancelled, false},
	}
	for _, tt := range tests {
		if err := events.CheckResultID(tt.typ, events.DerivedID(tt.kind, tr), tr); tt.ok != (err == nil) {
			t.Errorf("CheckResultID(%s, id of %s) = %v, want ok %v", tt.typ, tt.kind, err, tt.ok)
		}
	}
}

// TestTopicsOfHolds: the hold topics are CONTRACTS.md section 9's and
// take a suffix like the others.
func TestTopicsOfHolds(t *testing.T) {
	want := []string{"pagamentos.transferencia.reservada.v1", "pagamentos.transferencia.captura-solicitada.v1",
		"pagamentos.transferencia.cancelamento-solicitado.v1", "pagamentos.transferencia.cancelada.v1"}
	got := events.DefaultTopics.Holds()
	suffixed := events.DefaultTopics.WithSuffix(".x").Holds()
	for i := range want {
		if got[i] != want[i] || suffixed[i] != want[i]+".x" {
			t.Errorf("topic %d: %s and %s, want %s and %s.x", i, got[i], suffixed[i], want[i], want[i])
		}
	}
}
