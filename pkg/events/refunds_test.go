package events_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
)

// TestDecodeRefunds: the refund payloads decode with their required
// fields, and EstornoRejeitado takes only the motivos of section 10.
func TestDecodeRefunds(t *testing.T) {
	const (
		ids = `"eventoId":"6f1c1a4e-5b1e-4a57-9a43-0c2c6bd2a001","estornoId":"6f1c1a4e-5b1e-4a57-9a43-0c2c6bd2a003","transferenciaId":"6f1c1a4e-5b1e-4a57-9a43-0c2c6bd2a002"`
		at  = `"ocorridoEm":"2026-12-05T01:00:00Z"`
	)
	requested := func(b []byte) error { var e events.RefundRequested; return events.Decode(b, &e) }
	settled := func(b []byte) error { var e events.RefundSettled; return events.Decode(b, &e) }
	rejected := func(b []byte) error { var e events.RefundRejected; return events.Decode(b, &e) }
	tests := []struct {
		name   string
		decode func([]byte) error
		json   string
		ok     bool
	}{
		{"requested", requested, `{` + ids + `,"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":5,"moeda":"BRL","clienteId":"b",` + at + `}`, true},
		{"requested without estornoId", requested, `{"eventoId":"6f1c1a4e-5b1e-4a57-9a43-0c2c6bd2a001","transferenciaId":"6f1c1a4e-5b1e-4a57-9a43-0c2c6bd2a002","contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":5,"moeda":"BRL",` + at + `}`, false},
		{"requested without an amount", requested, `{` + ids + `,"contaOrigem":"CC-001","contaDestino":"CC-002","moeda":"BRL",` + at + `}`, false},
		{"settled", settled, `{` + ids + `,"valorEmCentavos":5,` + at + `}`, true},
		{"settled without an amount", settled, `{` + ids + `,` + at + `}`, false},
		{"rejected, exceeds", rejected, `{` + ids + `,"motivo":"VALOR_EXCEDE_ESTORNAVEL",` + at + `}`, true},
		{"rejected, not settled", rejected, `{` + ids + `,"motivo":"TRANSFERENCIA_NAO_LIQUIDADA",` + at + `}`, true},
		{"rejected, funds", rejected, `{` + ids + `,"motivo":"SALDO_INSUFICIENTE",` + at + `}`, true},
		{"rejected, another motivo", rejected, `{` + ids + `,"motivo":"EXPIRADA",` + at + `}`, false},
	}
	for _, tc := range tests {
		err := tc.decode([]byte(tc.json))
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, events.ErrMalformed) {
			t.Errorf("%s: %v does not wrap ErrMalformed", tc.name, err)
		}
	}
}

// TestCheckRefundResultID: a refund result's id is derived from the
// refund's id and its kind, and nothing else passes.
func TestCheckRefundResultID(t *testing.T) {
	refund := uuid.New()
	if err := events.CheckRefundResultID(events.TypeRefundSettled, events.DerivedID(events.KindRefundSettled, refund), refund); err != nil {
		t.Error(err)
	}
	if err := events.CheckRefundResultID(events.TypeRefundRejected, events.DerivedID(events.KindRefundRejected, refund), refund); err != nil {
		t.Error(err)
	}
	for name, err := range map[string]error{
		"settled with the rejected id": events.CheckRefundResultID(events.TypeRefundSettled, events.DerivedID(events.KindRefundRejected, refund), refund),
		"another refund's id":          events.CheckRefundResultID(events.TypeRefundSettled, events.DerivedID(events.KindRefundSettled, uuid.New()), refund),
		"not a refund result":          events.CheckRefundResultID(events.TypeSettled, events.DerivedID(events.KindRefundSettled, refund), refund),
	} {
		if !errors.Is(err, events.ErrUnderivedID) || !errors.Is(err, events.ErrMalformed) {
			t.Errorf("%s: %v, want ErrUnderivedID and ErrMalformed", name, err)
		}
	}
}
