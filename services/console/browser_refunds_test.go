package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/test/e2e"
	"github.com/paysuite/payments/test/support/poll"
)

// TestConsoleRefundJourney drives the journey page of a refunded transfer
// in Chromium against the real suite: a partial refund that settles and
// one the ledger rejects (the destination spent the money in between)
// show with their amounts, statuses (the rejection's motivo) and times,
// and the summary shows the amount refunded.
func TestConsoleRefundJourney(t *testing.T) {
	e, accounts := journeyEnv(t, "PAYER", "SHOP", "ELSE") // client A is the titular of all three
	s, src, dst, other := e.suite, accounts[0], accounts[1], accounts[2]

	paid := transfer(t, s, src, dst, 10_000)
	if paid.Status != e2e.StatusSettled {
		t.Fatalf("transfer = %+v, want LIQUIDADA", paid)
	}
	refund := func(cents int64) string {
		t.Helper()
		key := uuid.NewString()
		r, err := s.Do(t.Context(), s.Transfers, http.MethodPost, "/transferencias/"+paid.ID+"/estornos", key, map[string]int64{"valorEmCentavos": cents})
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("POST estornos (%d) = %v %v: %s", cents, r.Status, err, r.Body)
		}
		return key
	}
	waitRefund := func(key, want string) {
		t.Helper()
		poll.Until(t, 30*time.Second, "refund "+key+" "+want, func() (bool, string) {
			r, err := s.Do(t.Context(), s.Transfers, http.MethodGet, "/transferencias/"+paid.ID+"/estornos/"+key, "", nil)
			var got opsapi.Refund
			if err != nil || r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
				return false, string(r.Body)
			}
			return got.Status == want, got.Status
		})
	}

	settled := refund(3_000)
	waitRefund(settled, "LIQUIDADO")
	// The destination spends what it has left (70.00), so the next refund,
	// within what remains refundable, finds no balance at the ledger.
	if spent := transfer(t, s, dst, other, 7_000); spent.Status != e2e.StatusSettled {
		t.Fatalf("spending transfer = %+v, want LIQUIDADA", spent)
	}
	rejected := refund(5_000)
	waitRefund(rejected, "REJEITADO")

	e.find(t, paid.ID)
	if got := e.text(t, "#refunded"); got != "30.00 BRL" {
		t.Errorf("refunded = %q, want 30.00 BRL", got)
	}
	rows := value(t, e, "refund rows", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#refunds tr.refund')].map(tr => [...tr.cells].map(c => c.textContent.trim()).join('|'))`))
	if len(rows) != 2 {
		t.Fatalf("refund rows = %q, want 2", rows)
	}
	for i, want := range []struct{ id, amount, status string }{
		{settled, "30.00 BRL", "LIQUIDADO"},
		{rejected, "50.00 BRL", "REJEITADO: SALDO_INSUFICIENTE"},
	} {
		cells := strings.Split(rows[i], "|")
		if len(cells) != 5 || cells[0] != want.id || cells[1] != want.amount || cells[2] != want.status {
			t.Errorf("refund row %d = %q, want %s %s %s", i, rows[i], want.id, want.amount, want.status)
			continue
		}
		for _, at := range cells[3:] {
			if !strings.HasSuffix(at, " UTC") {
				t.Errorf("refund row %d: time %q, want a UTC clock", i, at)
			}
		}
	}
	e.screenshot(t, "journey-refunds.png")
}
