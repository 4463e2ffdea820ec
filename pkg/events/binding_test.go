package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
)

// TestCheckResultID: a settlement's id is the one derived with
// KindSettled, a rejection's one of antifraud's or the ledger's; any other
// id (random, another transfer's, another kind's) is refused as malformed.
func TestCheckResultID(t *testing.T) {
	tr, other := uuid.New(), uuid.New()
	tests := []struct {
		typ string
		id  uuid.UUID
		ok  bool
	}{
		{events.TypeSettled, events.DerivedID(events.KindSettled, tr), true},
		{events.TypeRejected, events.DerivedID(events.KindRejectedLedger, tr), true},
		{events.TypeRejected, events.DerivedID(events.KindRejectedAntifraud, tr), true},
		{events.TypeSettled, events.DerivedID(events.KindRejectedLedger, tr), false},
		{events.TypeRejected, events.DerivedID(events.KindSettled, tr), false},
		{events.TypeSettled, events.DerivedID(events.KindAnalysed, tr), false},
		{events.TypeSettled, events.DerivedID(events.KindSettled, other), false},
		{events.TypeSettled, uuid.New(), false},
		{events.TypeAnalysed, events.DerivedID(events.KindAnalysed, tr), false},
	}
	for _, tt := range tests {
		err := events.CheckResultID(tt.typ, tt.id, tr)
		if tt.ok != (err == nil) {
			t.Errorf("CheckResultID(%s, %s) = %v, want ok %v", tt.typ, tt.id, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, events.ErrUnderivedID) || !errors.Is(err, events.ErrMalformed)) {
			t.Errorf("CheckResultID error %v wraps neither ErrUnderivedID nor ErrMalformed", err)
		}
	}
}

// TestRequestEventIDIsAdditive: eventoSolicitacaoId is written when known
// and left out otherwise (the record of before), and a record without it
// decodes with uuid.Nil.
func TestRequestEventIDIsAdditive(t *testing.T) {
	tr, req := uuid.New(), uuid.New()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	with, err := json.Marshal(events.Settled{EventID: events.DerivedID(events.KindSettled, tr), TransferID: tr, OccurredAt: at, RequestEventID: req})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(with), `"eventoSolicitacaoId":"`+req.String()+`"`) {
		t.Errorf("payload %s lacks eventoSolicitacaoId", with)
	}
	without, err := json.Marshal(events.Rejected{EventID: uuid.New(), TransferID: tr, Reason: "X", OccurredAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(without), "eventoSolicitacaoId") {
		t.Errorf("payload %s names an unknown binding", without)
	}
	var a events.Analysed
	if err := events.Decode([]byte(`{"eventoId":"`+uuid.NewString()+`","transferenciaId":"`+tr.String()+
		`","contaOrigem":"A","contaDestino":"B","valorEmCentavos":1,"moeda":"BRL","scoreRisco":1,"ocorridoEm":"2026-12-04T10:00:00Z"}`), &a); err != nil {
		t.Fatal(err)
	}
	if a.RequestEventID != uuid.Nil {
		t.Errorf("a record without the field decoded with binding %s", a.RequestEventID)
	}
	var s events.Settled
	if err := events.Decode(with, &s); err != nil || s.RequestEventID != req {
		t.Errorf("decode = %v, binding %s; want %s", err, s.RequestEventID, req)
	}
}
