package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
)

// TestAccountShowsReservedAndAvailable: GET /contas/{id} shows the
// reserved amount of the account's open holds and its available balance,
// from the account row, and follows the hold when it is captured.
func TestAccountShowsReservedAndAvailable(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`)
	a.do(t, "POST", "/contas", `{"id":"CC-002","moeda":"BRL"}`)
	a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":1000}`, "Idempotency-Key", uuid.NewString())
	ctx := context.Background()
	now := time.Now()
	rules := ledger.Rules{Topics: ledgertest.Topics, Ownership: ledger.OwnershipOff}
	h := ledger.Transfer{ID: uuid.New(), EventID: uuid.New(), Source: "CC-001", Dest: "CC-002", AmountCents: 300,
		Currency: "BRL", ClientID: ledgertest.Client, Hold: true, ExpiresAt: now.Add(time.Hour)}
	if rs, err := a.store.Settle(ctx, []ledger.Transfer{h}, rules.Decider(now)); err != nil || rs[0].Outcome != ledger.Reserved {
		t.Fatalf("hold: %v, %v", rs, err)
	}
	want := map[string]any{"id": "CC-001", "moeda": "BRL", "titular": ledgertest.Client,
		"saldoEmCentavos": 1000.0, "reservadoEmCentavos": 300.0, "disponivelEmCentavos": 700.0}
	if r := a.do(t, "GET", "/contas/CC-001", ""); r.status != 200 || cmp.Diff(want, r.body) != "" {
		t.Errorf("while held: %d, mismatch (-want +got):\n%s", r.status, cmp.Diff(want, r.body))
	}
	c := ledger.Command{Kind: ledger.Capture, TransferID: h.ID, EventID: uuid.New(), Source: "CC-001", AmountCents: 100}
	if rs, err := a.store.CloseReservations(ctx, []ledger.Command{c}, rules.Closer(now)); err != nil || rs[0].Outcome != ledger.Settled {
		t.Fatalf("capture: %v, %v", rs, err)
	}
	want["saldoEmCentavos"], want["reservadoEmCentavos"], want["disponivelEmCentavos"] = 900.0, 0.0, 900.0
	if r := a.do(t, "GET", "/contas/CC-001", ""); r.status != 200 || cmp.Diff(want, r.body) != "" {
		t.Errorf("after a capture of 100: %d, mismatch (-want +got):\n%s", r.status, cmp.Diff(want, r.body))
	}
}
