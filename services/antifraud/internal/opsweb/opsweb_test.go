package opsweb_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/opsweb"
	store "github.com/paysuite/payments/services/antifraud/internal/postgres"
	"github.com/paysuite/payments/test/pgtest"
)

// TestDecisionOfTransfer: the decision with its score, threshold, outcome
// and the rules that fired; unknown and malformed ids are refused.
func TestDecisionOfTransfer(t *testing.T) {
	t.Parallel()
	db, err := postgres.Open(t.Context(), pgtest.NewDSN(t, migrations.ForService("antifraud")...), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	id, ev := uuid.New(), uuid.New()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, err := db.Exec(t.Context(), `
INSERT INTO decision (transfer_id, request_event_id, source_account, dest_account, amount_cents, currency, occurred_at,
                      score, threshold, outcome, rules, event_id, decided_at)
VALUES ($1, $2, 'CC-A', 'CC-B', 20000000, 'BRL', $3, 95, 80, 'BLOCKED', '{high_amount}', $4, $3)`, id, uuid.New(), at, ev); err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			next.ServeHTTP(w, req.WithContext(auth.WithPrincipal(req.Context(), auth.Principal{Subject: "ana", Scopes: []string{auth.ScopeOperations}})))
		})
	})
	auth.Mount(r, slog.New(slog.DiscardHandler), opsweb.Routes(store.NewStore(db, nil), slog.New(slog.DiscardHandler)))
	get := func(path string) (int, opsweb.Decision) {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
		var d opsweb.Decision
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, d
	}
	code, got := get("/ops/decisoes/" + id.String())
	want := opsweb.Decision{TransferenciaID: id.String(), Pontuacao: 95, Limiar: 80, Resultado: "BLOCKED",
		Regras: []string{"high_amount"}, EventoID: ev.String(), DecididaEm: "2026-12-01T10:00:00Z"}
	if code != http.StatusOK {
		t.Fatalf("GET = %d", code)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision mismatch (-want +got):\n%s", diff)
	}
	for path, want := range map[string]int{
		"/ops/decisoes/" + uuid.NewString(): http.StatusNotFound,
		"/ops/decisoes/123":                 http.StatusBadRequest,
	} {
		if code, _ := get(path); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
}
