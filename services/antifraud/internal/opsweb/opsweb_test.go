package opsweb_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/services/antifraud/internal/opsweb"
	store "github.com/paysuite/payments/services/antifraud/internal/postgres"
	"github.com/paysuite/payments/test/support/opstest"
)

// TestDecisionOfTransfer: the decision with its score, threshold, outcome
// and the rules that fired; unknown and malformed ids are refused.
func TestDecisionOfTransfer(t *testing.T) {
	t.Parallel()
	db := opstest.DB(t, "antifraud")
	id, ev := uuid.New(), uuid.New()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, err := db.Exec(t.Context(), `
INSERT INTO decision (transfer_id, request_event_id, source_account, dest_account, amount_cents, currency, occurred_at,
                      score, threshold, outcome, rules, event_id, decided_at)
VALUES ($1, $2, 'CC-A', 'CC-B', 20000000, 'BRL', $3, 95, 80, 'BLOCKED', '{high_amount}', $4, $3)`, id, uuid.New(), at, ev); err != nil {
		t.Fatal(err)
	}
	ops := opstest.Serve(t, nil, opsweb.Routes(store.NewStore(db, nil), slog.New(slog.DiscardHandler)))
	get := func(path string) (int, opsweb.Decision) {
		var v opsweb.Decision
		return ops.Get(path, &v), v
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
