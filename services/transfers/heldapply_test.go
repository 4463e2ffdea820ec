package transfers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/e2e"
)

// TestHeldResultAppliedFromTheLedgersRecord runs the four services: the
// transfers service reads the ledger's record of a transfer from the
// real ledger over HTTP, with the operator's own token, and applies a held
// result only when the transfer row and the held row match that record in
// every field. Each case names its transfer: the ledger's record (stored
// in the ledger's database before the transfer is posted, so the ledger
// takes the posted transfer for a redelivery and decides nothing more),
// the transfer as the client posts it, and the held result. The operator
// names the held result and the decision only: a query that forges the
// ledger's record is refused and changes nothing.
func TestHeldResultAppliedFromTheLedgersRecord(t *testing.T) {
	t.Parallel()
	s := e2e.NewSuite(t, e2e.Options{Partitions: 1})
	operator := s.As(e2e.Client{Name: "ana", Bearer: s.Issuer.Bearer(t, "ana", auth.ScopeOperations)})
	const src, dst, cents = "CC-HA-1", "CC-HA-2", int64(4_200)

	// record is the ledger's record of a transfer; held is the result the
	// transfers service holds for it.
	type record struct {
		client, src, dst string
		cents            int64
		result, reason   string
		request          uuid.UUID
	}
	type held struct {
		status, reason string
		request        uuid.UUID
	}
	ctx := t.Context()
	// prepare stores rec in the ledger and posts the transfer as
	// cliente-a (which the ledger will take for a duplicate), then holds h
	// for it; it returns the held event id and the transfer id. With no
	// rec nothing is posted either (the ledger would decide it): the held
	// result names a transfer that neither service knows.
	prepare := func(t *testing.T, rec *record, h held) (uuid.UUID, uuid.UUID) {
		t.Helper()
		id := uuid.New()
		if rec != nil {
			var reason, request any
			if rec.reason != "" {
				reason = rec.reason
			}
			if rec.request != uuid.Nil {
				request = rec.request
			}
			if _, err := s.Ledger.DB.Exec(ctx, `
INSERT INTO processed_transfer (transfer_id, result, reason, source_account, dest_account, amount_cents, currency, event_id,
    client_id, request_event_id)
VALUES ($1, $2, $3, $4, $5, $6, 'BRL', $7, $8, $9)`, id, rec.result, reason, rec.src, rec.dst, rec.cents, uuid.New(),
				rec.client, request); err != nil {
				t.Fatal(err)
			}
		}
		if rec != nil {
			r, err := s.PostTransfer(ctx, id.String(), e2e.TransferRequest{From: src, To: dst, AmountCents: cents, Currency: "BRL"})
			if err != nil || r.Status != http.StatusAccepted {
				t.Fatalf("POST /transferencias = %d %v: %s", r.Status, err, r.Body)
			}
		}
		ev := uuid.New()
		var reason, request any
		if h.reason != "" {
			reason = h.reason
		}
		if h.request != uuid.Nil {
			request = h.request
		}
		typ := events.TypeSettled
		if h.status == e2e.StatusRejected {
			typ = events.TypeRejected
		}
		if _, err := s.Transfers.DB.Exec(ctx, `
INSERT INTO resultado_retido (evento_id, tipo, transferencia_id, status, motivo, payload, evento_solicitacao_id)
VALUES ($1, $2, $3, $4, $5, '{}', $6)`, ev, typ, id, h.status, reason, request); err != nil {
			t.Fatal(err)
		}
		return ev, id
	}
	apply := func(t *testing.T, ev uuid.UUID, query url.Values) (int, string) {
		t.Helper()
		path := "/ops/resultados-retidos/" + ev.String() + "/aplicar"
		if len(query) > 0 {
			path += "?" + query.Encode()
		}
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := operator.Do(c, s.Transfers, http.MethodPost, path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status, string(r.Body)
	}
	// status reads the transfer as the transfers database has it.
	status := func(t *testing.T, id uuid.UUID) (string, string) {
		t.Helper()
		var st, motivo string
		if err := s.Transfers.DB.QueryRow(ctx, `SELECT status, COALESCE(motivo_rejeicao, '') FROM transferencia WHERE id = $1`,
			id).Scan(&st, &motivo); err != nil {
			t.Fatal(err)
		}
		return st, motivo
	}
	resolution := func(t *testing.T, ev uuid.UUID) string {
		t.Helper()
		var res string
		if err := s.Transfers.DB.QueryRow(ctx, `SELECT COALESCE(resolucao, '') FROM resultado_retido WHERE evento_id = $1`,
			ev).Scan(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	request := uuid.New()
	settled := record{client: s.A.Name, src: src, dst: dst, cents: cents, result: e2e.StatusSettled, request: request}
	with := func(f func(*record)) *record { r := settled; f(&r); return &r }

	// Refusals: each answers 409 naming what differs (or that there is no
	// record), leaves the transfer PENDENTE and the result held.
	for _, tc := range []struct {
		name string
		rec  *record
		held held
		want string
	}{
		{"the ledger's record names another client", with(func(r *record) { r.client = s.B.Name }), held{status: e2e.StatusSettled, request: request}, "clienteId"},
		{"the ledger settled another amount", with(func(r *record) { r.cents = cents + 1 }), held{status: e2e.StatusSettled, request: request}, "valorEmCentavos"},
		{"the ledger settled to another account", with(func(r *record) { r.dst = "CC-HA-9" }), held{status: e2e.StatusSettled, request: request}, "contaDestino"},
		{"the ledger debited another account", with(func(r *record) { r.src = "CC-HA-8" }), held{status: e2e.StatusSettled, request: request}, "contaOrigem"},
		{"the ledger rejected it", with(func(r *record) { r.result, r.reason = e2e.StatusRejected, events.ReasonInsufficientFunds }),
			held{status: e2e.StatusSettled, request: request}, "result"},
		{"the held result answers another request", &settled, held{status: e2e.StatusSettled, request: uuid.New()}, "eventoSolicitacaoId"},
		{"the ledger has no record", nil, held{status: e2e.StatusSettled, request: request}, "no record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, id := prepare(t, tc.rec, tc.held)
			if code, body := apply(t, ev, nil); code != http.StatusConflict || !strings.Contains(body, tc.want) {
				t.Errorf("apply = %d %s, want 409 naming %q", code, body, tc.want)
			}
			if tc.rec != nil {
				if st, _ := status(t, id); st != e2e.StatusPending {
					t.Errorf("the transfer is %s after a refused apply, want PENDENTE", st)
				}
			}
			if res := resolution(t, ev); res != "" {
				t.Errorf("the held result is %s after a refused apply, want held", res)
			}
		})
	}

	t.Run("a forged query string cannot change the outcome", func(t *testing.T) {
		// The ledger rejected the transfer; a result saying LIQUIDADA is
		// held for it. A caller with an operacoes token sends a "ledger's
		// record" that agrees with the held result.
		ev, id := prepare(t, with(func(r *record) { r.result, r.reason = e2e.StatusRejected, events.ReasonInsufficientFunds }),
			held{status: e2e.StatusSettled, request: request})
		forged := url.Values{"contaOrigem": {src}, "contaDestino": {dst}, "valorEmCentavos": {"4200"}, "moeda": {"BRL"},
			"resultado": {e2e.StatusSettled}, "motivo": {"INC-1"}}
		if code, body := apply(t, ev, forged); code != http.StatusBadRequest || !strings.Contains(body, "resultado") {
			t.Errorf("apply with a forged record = %d %s, want 400 naming the parameters", code, body)
		}
		if code, _ := apply(t, ev, url.Values{"motivo": {"INC-1"}}); code != http.StatusConflict {
			t.Errorf("apply = %d, want 409: the ledger rejected it", code)
		}
		if st, _ := status(t, id); st != e2e.StatusPending {
			t.Errorf("the transfer is %s, want PENDENTE", st)
		}
	})

	t.Run("a client's token cannot apply", func(t *testing.T) {
		ev, id := prepare(t, &settled, held{status: e2e.StatusSettled, request: request})
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		client := s.As(e2e.Client{Name: s.A.Name, Bearer: s.Issuer.Bearer(t, s.A.Name, auth.ScopeTransfersCreate, auth.ScopeTransfersRead)})
		r, err := client.Do(c, s.Transfers, http.MethodPost, "/ops/resultados-retidos/"+ev.String()+"/aplicar", "", nil)
		if err != nil || r.Status != http.StatusForbidden {
			t.Errorf("apply with cliente-a's token = %d %v, want 403", r.Status, err)
		}
		if st, _ := status(t, id); st != e2e.StatusPending {
			t.Errorf("the transfer is %s, want PENDENTE", st)
		}
	})

	t.Run("a matching record applies the ledger's own outcome", func(t *testing.T) {
		rejected := with(func(r *record) { r.result, r.reason = e2e.StatusRejected, events.ReasonInsufficientFunds })
		ev, id := prepare(t, rejected, held{status: e2e.StatusRejected, reason: events.ReasonInsufficientFunds, request: request})
		if code, body := apply(t, ev, url.Values{"motivo": {"INC-2"}}); code != http.StatusOK {
			t.Fatalf("apply = %d %s, want 200", code, body)
		}
		if st, motivo := status(t, id); st != e2e.StatusRejected || motivo != events.ReasonInsufficientFunds {
			t.Errorf("the transfer is %s %s, want REJEITADA %s", st, motivo, events.ReasonInsufficientFunds)
		}
		if res := resolution(t, ev); res != "APLICADO" {
			t.Errorf("the held result is %q, want APLICADO", res)
		}

		// A record the ledger kept before it stored request ids matches on
		// the other fields; while the ledger is down nothing is decided.
		old := with(func(r *record) { r.request = uuid.Nil })
		ev, id = prepare(t, old, held{status: e2e.StatusSettled, request: request})
		s.Ledger.Stop()
		code, body := apply(t, ev, nil)
		s.Ledger.Start()
		if code != http.StatusServiceUnavailable {
			t.Errorf("apply while the ledger is down = %d %s, want 503", code, body)
		}
		if st, _ := status(t, id); st != e2e.StatusPending {
			t.Errorf("the transfer is %s after the ledger was down, want PENDENTE", st)
		}
		var out struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		code, body = apply(t, ev, nil)
		if err := json.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil || out.ID != id.String() || out.Status != e2e.StatusSettled {
			t.Fatalf("apply = %d %s, want 200 LIQUIDADA", code, body)
		}
		if code, _ := apply(t, ev, nil); code != http.StatusConflict {
			t.Errorf("a second apply = %d, want 409", code)
		}
		if logs := s.Transfers.Logs(2000); !strings.Contains(logs, "held_result.apply") || !strings.Contains(logs, "client=ana") {
			t.Errorf("no audit line of the apply naming the operator")
		}
	})
}
