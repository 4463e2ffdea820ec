package opsweb_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/opsapi"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/opsweb"
	store "github.com/paysuite/payments/services/ledger/internal/postgres"
	"github.com/paysuite/payments/test/support/opstest"
)

// TestSettlementWithBalancesAfter: the settlement of a transfer lists its
// two postings with each account's balance right after it, not the
// balance now; a rejection has no postings; each says what it was asked
// to move, for which client and request (when kept); bad ids are refused.
func TestSettlementWithBalancesAfter(t *testing.T) {
	t.Parallel()
	db, exec := ledgerDB(t)
	exec(`INSERT INTO account (id, currency) VALUES ('CC-A', 'BRL'), ('CC-B', 'BRL')`)
	post := func(entry uuid.UUID, typ, account, dir string, cents int64) {
		exec(`INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents) VALUES ($1, $2, $3, $4, $5)`,
			typ, entry, account, dir, cents)
	}
	post(uuid.New(), "DEPOSIT", "CC-A", "C", 1000)
	first, second, rejected := uuid.New(), uuid.New(), uuid.New()
	requested := map[uuid.UUID]uuid.UUID{first: uuid.New()} // the second was decided before request ids were kept
	for _, tr := range []uuid.UUID{first, second} {
		var req *uuid.UUID
		if r, ok := requested[tr]; ok {
			req = &r
		}
		exec(`INSERT INTO processed_transfer (transfer_id, result, source_account, dest_account, amount_cents, currency, event_id,
    client_id, request_event_id)
VALUES ($1, 'LIQUIDADA', 'CC-A', 'CC-B', 300, 'BRL', $2, 'loja', $3)`, tr, uuid.New(), req)
		post(tr, "TRANSFER", "CC-A", "D", 300)
		post(tr, "TRANSFER", "CC-B", "C", 300)
	}
	exec(`INSERT INTO processed_transfer (transfer_id, result, reason, source_account, dest_account, amount_cents, currency, event_id)
VALUES ($1, 'REJEITADA', 'SALDO_INSUFICIENTE', 'CC-A', 'CC-B', 9999, 'BRL', $2)`, rejected, uuid.New())

	ops := opstest.Serve(t, nil, opsweb.Routes(store.New(db, nil), slog.New(slog.DiscardHandler)))
	get := func(path string) (int, opsapi.Settlement) {
		var v opsapi.Settlement
		return ops.Get(path, &v), v
	}
	ignore := cmpopts.IgnoreFields(opsapi.Posting{}, "CriadoEm")
	for _, tc := range []struct {
		name     string
		id       uuid.UUID
		result   string
		postings []opsapi.Posting
	}{
		{"first settlement", first, "LIQUIDADA", []opsapi.Posting{
			{Conta: "CC-A", Direcao: "D", ValorEmCentavos: 300, SaldoApos: 700},
			{Conta: "CC-B", Direcao: "C", ValorEmCentavos: 300, SaldoApos: 300}}},
		{"second settlement", second, "LIQUIDADA", []opsapi.Posting{
			{Conta: "CC-A", Direcao: "D", ValorEmCentavos: 300, SaldoApos: 400},
			{Conta: "CC-B", Direcao: "C", ValorEmCentavos: 300, SaldoApos: 600}}},
		{"rejection", rejected, "REJEITADA", []opsapi.Posting{}},
	} {
		code, s := get("/ops/liquidacoes/" + tc.id.String())
		if code != http.StatusOK || s.Resultado != tc.result {
			t.Errorf("%s: %d %s, want 200 %s", tc.name, code, s.Resultado, tc.result)
		}
		amount := int64(300)
		if tc.id == rejected {
			amount = 9999
		}
		if s.ContaOrigem != "CC-A" || s.ContaDestino != "CC-B" || s.ValorEmCentavos != amount || s.Moeda != "BRL" {
			t.Errorf("%s: asked %s -> %s %d %s, want CC-A -> CC-B %d BRL", tc.name, s.ContaOrigem, s.ContaDestino, s.ValorEmCentavos, s.Moeda, amount)
		}
		client, req := "loja", ""
		if tc.id == rejected {
			client = ""
		}
		if r, ok := requested[tc.id]; ok {
			req = r.String()
		}
		if s.TransferenciaID != tc.id.String() || s.ClienteID != client || s.EventoSolicitacaoID != req {
			t.Errorf("%s: transfer %s for client %q, request %q; want %s, %q, %q", tc.name, s.TransferenciaID, s.ClienteID,
				s.EventoSolicitacaoID, tc.id, client, req)
		}
		if diff := cmp.Diff(tc.postings, s.Lancamentos, ignore); diff != "" {
			t.Errorf("%s: postings mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
	for path, want := range map[string]int{
		"/ops/liquidacoes/" + uuid.NewString(): http.StatusNotFound,
		"/ops/liquidacoes/nope":                http.StatusBadRequest,
	} {
		if code, _ := get(path); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
}

// TestSettlementOfHolds: a hold's settlement is RESERVADA with its
// reservation: open until its expiry, or closed (captured with the amount
// posted and the capture's postings, cancelled, expired) with the time
// it closed. An immediate transfer has no reservation.
func TestSettlementOfHolds(t *testing.T) {
	t.Parallel()
	db, exec := ledgerDB(t)
	exec(`INSERT INTO account (id, currency, balance_cents) VALUES ('CC-A', 'BRL', 1000), ('CC-B', 'BRL', 0)`)
	expires := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	closed := expires.Add(-time.Hour)
	open, captured, cancelled, expired, immediate := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	for _, h := range []struct {
		id       uuid.UUID
		state    string
		cents    any
		closedBy any
	}{{open, "open", nil, nil}, {captured, "captured", int64(120), uuid.New()}, {cancelled, "cancelled", nil, uuid.New()}, {expired, "expired", nil, nil}} {
		exec(`INSERT INTO processed_transfer (transfer_id, result, source_account, dest_account, amount_cents, currency, event_id, client_id)
VALUES ($1, 'RESERVADA', 'CC-A', 'CC-B', 300, 'BRL', $2, 'loja')`, h.id, uuid.New())
		var closedAt, closedEvent any
		if h.state != "open" {
			closedAt, closedEvent = closed, uuid.New()
		}
		exec(`INSERT INTO reservation (transfer_id, source_account, dest_account, currency, amount_cents, expires_at, state,
    captured_cents, closed_by, closed_event_id, closed_at)
VALUES ($1, 'CC-A', 'CC-B', 'BRL', 300, $2, $3, $4, $5, $6, $7)`, h.id, expires, h.state, h.cents, h.closedBy, closedEvent, closedAt)
	}
	// CC-A's balance is a deposit's, so that the capture's running
	// balances are not negative.
	exec(`INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents) VALUES
    ('DEPOSIT', gen_random_uuid(), 'CC-A', 'C', 1000), ('TRANSFER', $1, 'CC-A', 'D', 120), ('TRANSFER', $1, 'CC-B', 'C', 120)`, captured)
	exec(`INSERT INTO processed_transfer (transfer_id, result, source_account, dest_account, amount_cents, currency, event_id, client_id)
VALUES ($1, 'LIQUIDADA', 'CC-A', 'CC-B', 1, 'BRL', $2, 'loja')`, immediate, uuid.New())

	ops := opstest.Serve(t, nil, opsweb.Routes(store.New(db, nil), slog.New(slog.DiscardHandler)))
	at, closedAt := opsapi.Time(expires), opsapi.Time(closed)
	for _, tc := range []struct {
		name     string
		id       uuid.UUID
		want     *opsapi.Reservation
		postings int
	}{
		{"open", open, &opsapi.Reservation{ValorEmCentavos: 300, ExpiraEm: at, Estado: "ABERTA"}, 0},
		{"captured in part", captured, &opsapi.Reservation{ValorEmCentavos: 300, ExpiraEm: at, Estado: "CAPTURADA",
			ValorCapturadoEmCentavos: 120, EncerradaEm: closedAt}, 2},
		{"cancelled", cancelled, &opsapi.Reservation{ValorEmCentavos: 300, ExpiraEm: at, Estado: "CANCELADA", EncerradaEm: closedAt}, 0},
		{"expired", expired, &opsapi.Reservation{ValorEmCentavos: 300, ExpiraEm: at, Estado: "EXPIRADA", EncerradaEm: closedAt}, 0},
		{"immediate", immediate, nil, 0},
	} {
		var s opsapi.Settlement
		if code := ops.Get("/ops/liquidacoes/"+tc.id.String(), &s); code != http.StatusOK {
			t.Fatalf("%s: %d, want 200", tc.name, code)
		}
		if tc.want != nil && s.Resultado != "RESERVADA" {
			t.Errorf("%s: resultado %s, want RESERVADA", tc.name, s.Resultado)
		}
		if diff := cmp.Diff(tc.want, s.Reserva); diff != "" {
			t.Errorf("%s: reservation mismatch (-want +got):\n%s", tc.name, diff)
		}
		if len(s.Lancamentos) != tc.postings {
			t.Errorf("%s: %d postings, want %d", tc.name, len(s.Lancamentos), tc.postings)
		}
	}
}

// ledgerDB opens a migrated ledger database and returns it with a function
// that runs a statement on it, failing the test on an error.
func ledgerDB(t *testing.T) (*pg.DB, func(sql string, args ...any)) {
	t.Helper()
	db := opstest.DB(t, "ledger")
	return db, func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}
