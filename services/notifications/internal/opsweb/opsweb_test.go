package opsweb_test

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/services/notifications/internal/opsweb"
	store "github.com/paysuite/payments/services/notifications/internal/postgres"
	"github.com/paysuite/payments/test/support/opstest"
)

// TestNotificationsOfTransfer: each notification of a transfer with its
// channel, outcome and attempts, each attempt with its topic; none for another transfer; a malformed id
// is refused.
func TestNotificationsOfTransfer(t *testing.T) {
	t.Parallel()
	db := opstest.DB(t, "notifications")
	id, event, other := uuid.New(), uuid.New(), uuid.New()
	if _, err := db.Exec(t.Context(), `
INSERT INTO notification (event_id, transfer_id, event_type, source_account, channel, status, attempts, delivered_at, last_error)
VALUES ($1, $2, 'TransferenciaLiquidada', 'CC-A', 'webhook', 'DELIVERED', 2, now(), NULL),
       ($3, $4, 'TransferenciaLiquidada', 'CC-B', 'webhook', 'FAILED', 4, NULL, 'HTTP 500')`, event, id, other, uuid.New()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(t.Context(), `
INSERT INTO notification_attempt (event_id, attempt, transfer_id, channel, topic, outcome, error, at)
VALUES ($1, 2, $2, 'webhook', 't-retry-1000', 'DELIVERED', NULL, '2026-01-02T10:00:01Z'),
       ($1, 1, $2, 'webhook', 't', 'FAILED', 'HTTP 503', '2026-01-02T10:00:00Z'),
       ($3, 1, $4, 'webhook', 't', 'FAILED', 'HTTP 500', now())`, event, id, other, uuid.New()); err != nil {
		t.Fatal(err)
	}
	ops := opstest.Serve(t, nil, opsweb.Routes(store.New(db), slog.New(slog.DiscardHandler)))
	get := func(path string) (int, opsweb.Notifications) {
		var v opsweb.Notifications
		return ops.Get(path, &v), v
	}
	code, got := get("/ops/notificacoes/" + id.String())
	if code != http.StatusOK || len(got.Notificacoes) != 1 {
		t.Fatalf("GET = %d %+v, want one notification", code, got)
	}
	if n := got.Notificacoes[0]; n.Canal != "webhook" || n.Status != "DELIVERED" || n.Tentativas != 2 || n.EntregueEm == "" {
		t.Errorf("notification = %+v", n)
	}
	wantAttempts := []opsweb.Attempt{
		{Tentativa: 1, Canal: "webhook", Topico: "t", Resultado: "FAILED", Erro: "HTTP 503", Em: "2026-01-02T10:00:00Z"},
		{Tentativa: 2, Canal: "webhook", Topico: "t-retry-1000", Resultado: "DELIVERED", Em: "2026-01-02T10:00:01Z"},
	}
	if diff := cmp.Diff(wantAttempts, got.Notificacoes[0].Historico); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if code, none := get("/ops/notificacoes/" + uuid.NewString()); code != http.StatusOK || len(none.Notificacoes) != 0 {
		t.Errorf("another transfer: %d %+v, want 200 and none", code, none)
	}
	if code, _ := get("/ops/notificacoes/x"); code != http.StatusBadRequest {
		t.Errorf("malformed id = %d, want 400", code)
	}
}
