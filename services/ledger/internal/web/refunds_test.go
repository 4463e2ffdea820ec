package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
)

// A refund's postings show on /lancamentos with the refunded transfer's
// transferenciaId and the refund's estornoId; other postings have no
// estornoId.
func TestRefundPostingsShowTheirRefund(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	for _, id := range []string{"CC-001", "CC-002"} {
		a.do(t, "POST", "/contas", `{"id":"`+id+`","moeda":"BRL"}`)
	}
	if r := a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":1000}`, "Idempotency-Key", uuid.NewString()); r.status != 201 {
		t.Fatalf("deposit: %d %s", r.status, r.rawBody)
	}
	svc := ledger.NewService(a.store, ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}, time.Now)
	tr := ledger.Transfer{ID: uuid.New(), EventID: uuid.New(), Source: "CC-001", Dest: "CC-002", AmountCents: 600, Currency: "BRL",
		ClientID: ledgertest.Client}
	tr.Authorization = ledgertest.Authorize(transfersig.Claim{TransferID: tr.ID, Source: "CC-001", Destination: "CC-002",
		AmountCents: 600, Currency: "BRL", Client: ledgertest.Client})
	if rs, err := svc.Settle(ctx, []ledger.Transfer{tr}); err != nil || rs[0].Outcome != ledger.Settled {
		t.Fatalf("settle: %v %v", rs, err)
	}
	f := ledger.Refund{ID: uuid.New(), TransferID: tr.ID, EventID: uuid.New(), Source: "CC-001", Dest: "CC-002", AmountCents: 250,
		Currency: "BRL", ClientID: ledgertest.Client}
	f.Authorization = ledgertest.AuthorizeRefund(transfersig.RefundClaim{RefundID: f.ID, TransferID: tr.ID, Source: "CC-001",
		Destination: "CC-002", AmountCents: 250, Currency: "BRL", Client: ledgertest.Client})
	if rs, err := svc.Refund(ctx, []ledger.Refund{f}); err != nil || rs[0].Outcome != ledger.RefundSettled {
		t.Fatalf("refund: %v %v", rs, err)
	}
	for account, want := range map[string][]string{
		"CC-001": {"C 250 " + f.ID.String(), "D 600 ", "C 1000 "},
		"CC-002": {"D 250 " + f.ID.String(), "C 600 "},
	} {
		r := a.do(t, "GET", "/contas/"+account+"/lancamentos", "")
		if r.status != 200 {
			t.Fatalf("%s: status %d: %s", account, r.status, r.rawBody)
		}
		items := r.body["itens"].([]any)
		if len(items) != len(want) {
			t.Fatalf("%s: %d postings, want %d: %s", account, len(items), len(want), r.rawBody)
		}
		for i, it := range items {
			m := it.(map[string]any)
			refund, _ := m["estornoId"].(string)
			got := m["tipo"].(string) + " " + itoa(int64(m["valorEmCentavos"].(float64))) + " " + refund
			if got != want[i] {
				t.Errorf("%s posting %d: %q, want %q", account, i, got, want[i])
			}
			if i < len(want)-1 || account == "CC-002" {
				if m["transferenciaId"] != tr.ID.String() {
					t.Errorf("%s posting %d: transferenciaId %v, want the transfer's %s", account, i, m["transferenciaId"], tr.ID)
				}
			}
		}
	}
}
