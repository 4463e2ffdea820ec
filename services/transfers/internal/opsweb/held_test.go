package opsweb_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/services/transfers/internal/opsweb"
	tpg "github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/test/support/opstest"
)

// ledgerRecords is the Ledger of these tests: the ledger's records by
// transfer id (the real ledger over HTTP is in the service's
// TestHeldResultAppliedFromTheLedgersRecord); fail, when set, is its
// answer to every read.
type ledgerRecords struct {
	records map[uuid.UUID]transfer.Settlement
	fail    error
}

func (l *ledgerRecords) Settlement(_ context.Context, _ string, id uuid.UUID) (transfer.Settlement, error) {
	if l.fail != nil {
		return transfer.Settlement{}, l.fail
	}
	s, ok := l.records[id]
	if !ok {
		return transfer.Settlement{}, transfer.ErrNoSettlement
	}
	return s, nil
}

// TestHeldResultsAppliedOnlyToTheSettledTransfer: a result held for an
// unknown transfer is listed; once a client's retry recreates the transfer,
// it is applied only when the transfer is the one the ledger's record
// describes (id, accounts, amount, currency, client, result): a recreated
// transfer with another amount keeps PENDENTE and the result stays held;
// the same transfer takes the ledger's result (LIQUIDADA) and the held row
// is resolved, by the operator, once. The operator's parameters name the
// held result and the decision (and a reason): any other is refused. No
// record, or no answer from the ledger, changes nothing. A discarded result
// changes no transfer. Every action is audited.
func TestHeldResultsAppliedOnlyToTheSettledTransfer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := opstest.DB(t, "transfers")
	store := tpg.NewStore(db, outbox.New(db), "transferencias-projecao", nil, 0)
	svc := transfer.NewService(store, events.Topics{Requested: "requested"}, authtest.NewTransferKey(t))
	var audit bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&audit, nil))
	same, other := uuid.New(), uuid.New()
	// The ledger's records of what it settled under each id: "other" was
	// settled with another amount than its recreated transfer's.
	settled := func(id uuid.UUID) transfer.Settlement {
		return transfer.Settlement{TransferID: id, Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL",
			Client: "loja", Result: transfer.StatusSettled}
	}
	ledger := &ledgerRecords{records: map[uuid.UUID]transfer.Settlement{same: settled(same), other: settled(other)}}
	ops := opstest.Serve(t, log, opsweb.Routes(store, ledger, log))
	hold := func(r transfer.Result) {
		t.Helper()
		if out, _, err := store.ApplyResults(ctx, []transfer.Result{r}); err != nil || len(out) != 1 || out[0] != transfer.Held {
			t.Fatalf("ApplyResults = %v, %v; want Held", out, err)
		}
	}
	create := func(id uuid.UUID, amount int64) {
		t.Helper()
		if _, _, err := svc.Submit(ctx, transfer.Submission{ID: id, Client: "loja",
			Request:  transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: amount, Currency: "BRL"},
			Response: transfer.Response{StatusCode: 202, Body: []byte("{}")}}); err != nil {
			t.Fatal(err)
		}
	}
	applies := 0
	apply := func(ev uuid.UUID, q url.Values, out any) int {
		applies++
		return ops.Call(http.MethodPost, "/ops/resultados-retidos/"+ev.String()+"/aplicar?"+q.Encode(), out)
	}
	reason := url.Values{"motivo": {"INC-7"}}
	status := func(id uuid.UUID) transfer.Status {
		t.Helper()
		tr, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status
	}

	evSame, evOther := uuid.New(), uuid.New()
	hold(transfer.Result{EventID: evSame, TransferID: same, Status: transfer.StatusSettled, Type: events.TypeSettled,
		Payload: []byte(`{"eventoId":"` + evSame.String() + `","transferenciaId":"` + same.String() + `","ocorridoEm":"2026-12-01T10:00:00Z"}`)})
	hold(transfer.Result{EventID: evOther, TransferID: other, Status: transfer.StatusSettled})

	var list opsapi.HeldList
	if code := ops.Call(http.MethodGet, "/ops/resultados-retidos", &list); code != http.StatusOK || len(list.Resultados) != 2 {
		t.Fatalf("GET list = %d %+v, want 2 held", code, list)
	}
	if h := list.Resultados[0]; h.EventoID != evSame.String() || h.Transferencia != nil || h.Status != "LIQUIDADA" ||
		h.Tipo != events.TypeSettled || !strings.Contains(string(h.Payload), same.String()) {
		t.Errorf("first held = %+v", h)
	}

	// No transfer has the id yet: nothing to apply it to.
	if code := apply(evSame, reason, nil); code != http.StatusConflict {
		t.Errorf("apply before the transfer exists = %d, want 409", code)
	}
	// The client's retry recreates "same" with the settled body, "other"
	// with another amount than the ledger settled.
	create(same, 30000)
	create(other, 100)
	if code := apply(evOther, reason, nil); code != http.StatusConflict {
		t.Errorf("apply to a transfer of another amount = %d, want 409", code)
	}
	if s := status(other); s != transfer.StatusPending {
		t.Errorf("the transfer of another amount is %s, want PENDENTE", s)
	}
	// A ledger's record of another transfer id, result, currency, account
	// or client is refused too.
	for name, change := range map[string]func(*transfer.Settlement){
		"transfer id": func(s *transfer.Settlement) { s.TransferID = other },
		"result": func(s *transfer.Settlement) {
			s.Result, s.Reason = transfer.StatusRejected, events.ReasonInsufficientFunds
		},
		"currency":    func(s *transfer.Settlement) { s.Currency = "USD" },
		"destination": func(s *transfer.Settlement) { s.Destination = "CC-009" },
		"client":      func(s *transfer.Settlement) { s.Client = "outra-loja" },
		"not final":   func(s *transfer.Settlement) { s.Result = "EM_PROCESSAMENTO" },
	} {
		rec := settled(same)
		change(&rec)
		ledger.records[same] = rec
		if code := apply(evSame, reason, nil); code != http.StatusConflict {
			t.Errorf("apply with the ledger's record of another %s: %d, want 409", name, code)
		}
	}
	delete(ledger.records, same)
	if code := apply(evSame, reason, nil); code != http.StatusConflict {
		t.Errorf("apply without a ledger's record = %d, want 409", code)
	}
	ledger.records[same] = settled(same)
	ledger.fail = errors.New("connection refused")
	if code := apply(evSame, reason, nil); code != http.StatusServiceUnavailable {
		t.Errorf("apply while the ledger cannot be read = %d, want 503", code)
	}
	ledger.fail = nil
	// The caller's copy of the ledger's record is refused, whatever it says.
	forged := url.Values{"contaOrigem": {"CC-001"}, "contaDestino": {"CC-002"}, "valorEmCentavos": {"30000"},
		"moeda": {"BRL"}, "resultado": {"LIQUIDADA"}}
	if code := apply(evSame, forged, nil); code != http.StatusBadRequest {
		t.Errorf("apply with a record in the query = %d, want 400", code)
	}
	if s := status(same); s != transfer.StatusPending {
		t.Fatalf("after refused applies the transfer is %s, want PENDENTE", s)
	}

	var applied opsapi.OperatorTransfer
	if code := apply(evSame, reason, &applied); code != http.StatusOK || applied.Status != "LIQUIDADA" || applied.ID != same.String() {
		t.Fatalf("apply to the settled transfer = %d %+v, want 200 LIQUIDADA", code, applied)
	}
	if s := status(same); s != transfer.StatusSettled {
		t.Errorf("the settled transfer is %s, want LIQUIDADA", s)
	}
	var one opsapi.Held
	if code := ops.Call(http.MethodGet, "/ops/resultados-retidos/"+evSame.String(), &one); code != http.StatusOK ||
		one.Resolucao != transfer.ResolutionApplied || one.ResolvidoPor != "ana" || one.MotivoResolucao != "INC-7" || one.ResolvidoEm == "" {
		t.Errorf("GET the applied one = %d %+v", code, one)
	}
	if code := apply(evSame, reason, nil); code != http.StatusConflict {
		t.Errorf("a second apply = %d, want 409", code)
	}

	// The other one stays held, listed with the transfer that has its id.
	list = opsapi.HeldList{}
	if code := ops.Call(http.MethodGet, "/ops/resultados-retidos", &list); code != http.StatusOK || len(list.Resultados) != 1 ||
		list.Resultados[0].EventoID != evOther.String() || list.Resultados[0].Transferencia == nil ||
		list.Resultados[0].Transferencia.ValorEmCentavos != 100 {
		t.Fatalf("GET list after the apply = %d %+v, want the other one with its transfer", code, list)
	}
	var discarded opsapi.Held
	if code := ops.Call(http.MethodPost, "/ops/resultados-retidos/"+evOther.String()+"/descartar?motivo=not+ours", &discarded); code != http.StatusOK ||
		discarded.Resolucao != transfer.ResolutionDiscarded || discarded.ResolvidoPor != "ana" {
		t.Errorf("discard = %d %+v", code, discarded)
	}
	if s := status(other); s != transfer.StatusPending {
		t.Errorf("discarding changed the transfer to %s", s)
	}
	if code := ops.Call(http.MethodPost, "/ops/resultados-retidos/"+evOther.String()+"/descartar", nil); code != http.StatusConflict {
		t.Errorf("a second discard = %d, want 409", code)
	}
	if code := ops.Call(http.MethodPost, "/ops/resultados-retidos/"+evOther.String()+"/descartar?resultado=LIQUIDADA", nil); code != http.StatusBadRequest {
		t.Errorf("a discard with another parameter than motivo = %d, want 400", code)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/ops/resultados-retidos/" + uuid.NewString(), http.StatusNotFound},
		{http.MethodPost, "/ops/resultados-retidos/" + uuid.NewString() + "/descartar", http.StatusNotFound},
		{http.MethodGet, "/ops/resultados-retidos/x", http.StatusBadRequest},
		{http.MethodGet, "/ops/resultados-retidos?limite=0", http.StatusUnprocessableEntity},
	} {
		if code := ops.Call(tc.method, tc.path, nil); code != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, code, tc.want)
		}
	}
	if n, err := store.CountHeld(ctx); err != nil || n != 0 {
		t.Errorf("CountHeld = %d, %v; want 0", n, err)
	}
	// One audit line per action, with the operator and the event.
	lines := strings.Count(audit.String(), `"action":"held_result.apply"`)
	if lines != applies || !strings.Contains(audit.String(), `"client":"ana"`) || !strings.Contains(audit.String(), `"evento_id":"`+evSame.String()+`"`) {
		t.Errorf("%d apply audit lines, want %d:\n%s", lines, applies, audit.String())
	}
}
