package opsweb_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/opsweb"
	store "github.com/paysuite/payments/services/ledger/internal/postgres"
	"github.com/paysuite/payments/test/pgtest"
)

// TestSettlementWithBalancesAfter: the settlement of a transfer lists its
// two postings with each account's balance right after it, not the
// balance now; a rejection has no postings; each says what it was asked
// to move; bad ids are refused.
func TestSettlementWithBalancesAfter(t *testing.T) {
	t.Parallel()
	db, err := postgres.Open(t.Context(), pgtest.NewDSN(t, migrations.ForService("ledger")...), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO account (id, currency) VALUES ('CC-A', 'BRL'), ('CC-B', 'BRL')`)
	post := func(entry uuid.UUID, typ, account, dir string, cents int64) {
		exec(`INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents) VALUES ($1, $2, $3, $4, $5)`,
			typ, entry, account, dir, cents)
	}
	post(uuid.New(), "DEPOSIT", "CC-A", "C", 1000)
	first, second, rejected := uuid.New(), uuid.New(), uuid.New()
	for _, tr := range []uuid.UUID{first, second} {
		exec(`INSERT INTO processed_transfer (transfer_id, result, source_account, dest_account, amount_cents, currency, event_id)
VALUES ($1, 'LIQUIDADA', 'CC-A', 'CC-B', 300, 'BRL', $2)`, tr, uuid.New())
		post(tr, "TRANSFER", "CC-A", "D", 300)
		post(tr, "TRANSFER", "CC-B", "C", 300)
	}
	exec(`INSERT INTO processed_transfer (transfer_id, result, reason, source_account, dest_account, amount_cents, currency, event_id)
VALUES ($1, 'REJEITADA', 'SALDO_INSUFICIENTE', 'CC-A', 'CC-B', 9999, 'BRL', $2)`, rejected, uuid.New())

	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			next.ServeHTTP(w, req.WithContext(auth.WithPrincipal(req.Context(), auth.Principal{Subject: "ana", Scopes: []string{auth.ScopeOperations}})))
		})
	})
	auth.Mount(r, slog.New(slog.DiscardHandler), opsweb.Routes(store.New(db, nil), slog.New(slog.DiscardHandler)))
	get := func(path string) (int, opsweb.Settlement) {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
		var s opsweb.Settlement
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, s
	}
	ignore := cmpopts.IgnoreFields(opsweb.Posting{}, "CriadoEm")
	for _, tc := range []struct {
		name     string
		id       uuid.UUID
		result   string
		postings []opsweb.Posting
	}{
		{"first settlement", first, "LIQUIDADA", []opsweb.Posting{
			{Conta: "CC-A", Direcao: "D", ValorEmCentavos: 300, SaldoApos: 700},
			{Conta: "CC-B", Direcao: "C", ValorEmCentavos: 300, SaldoApos: 300}}},
		{"second settlement", second, "LIQUIDADA", []opsweb.Posting{
			{Conta: "CC-A", Direcao: "D", ValorEmCentavos: 300, SaldoApos: 400},
			{Conta: "CC-B", Direcao: "C", ValorEmCentavos: 300, SaldoApos: 600}}},
		{"rejection", rejected, "REJEITADA", []opsweb.Posting{}},
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
