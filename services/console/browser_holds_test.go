package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/e2e"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestConsoleHoldJourney drives the journey page of holds in Chromium
// against the real suite: a reserved hold shows its reservation, its
// expiry and the wait for its closing; once captured in part it shows the
// amount captured of the amount reserved and the postings; a cancelled
// one its cancellation.
func TestConsoleHoldJourney(t *testing.T) {
	e, accounts := journeyEnv(t, "HOLD", "SHOP")
	s, src, dst := e.suite, accounts[0], accounts[1]

	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	post := func(path string, body any) {
		t.Helper()
		r, err := s.Do(t.Context(), s.Transfers, http.MethodPost, path, uuid.NewString(), body)
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("POST %s = %v %v: %s", path, r.Status, err, r.Body)
		}
	}
	hold := func(cents int64) string {
		t.Helper()
		id := uuid.NewString()
		r, err := s.Do(t.Context(), s.Transfers, http.MethodPost, "/transferencias", id, map[string]any{"contaOrigem": src, "contaDestino": dst,
			"valorEmCentavos": cents, "moeda": "BRL", "captura": events.CaptureManual, "expiraEm": expires.Format(time.RFC3339)})
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("POST /transferencias (hold) = %v %v: %s", r.Status, err, r.Body)
		}
		return id
	}
	waitStatus := func(id, want string) {
		t.Helper()
		poll.Until(t, 30*time.Second, id+" "+want, func() (bool, string) {
			st := s.Transfer(t, id).Status
			return st == want, st
		})
	}
	steps := func() []string {
		return value(t, e, "steps", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#steps > li')].map(li => li.className + '|' + li.querySelector('h2').firstChild.textContent.trim())`))
	}
	hasStep := func(want string) {
		t.Helper()
		got := steps()
		for _, s := range got {
			if s == want {
				return
			}
		}
		t.Errorf("steps = %q, want one %q", got, want)
	}

	captured, cancelled := hold(20_000), hold(10_000)
	waitStatus(captured, "RESERVADA")
	waitStatus(cancelled, "RESERVADA")

	t.Run("reserved hold shows its reservation and expiry", func(t *testing.T) {
		e.find(t, captured)
		if got := e.text(t, "#status"); got != "RESERVADA" {
			t.Errorf("status = %q, want RESERVADA", got)
		}
		if got, want := e.text(t, "#expires"), expires.Format("2006-01-02 15:04:05.000 UTC"); got != want {
			t.Errorf("expires = %q, want %q", got, want)
		}
		hasStep("step done|Ledger reservation")
		hasStep("step waiting|Capture, cancellation or expiry")
		stepsSay(t, e, "reserved 200.00 BRL on "+src+" until ", "waiting for a capture, a cancellation or the expiry")
		e.screenshot(t, "journey-hold.png")
	})

	post("/transferencias/"+captured+"/captura", map[string]any{"valorEmCentavos": 5_000})
	post("/transferencias/"+cancelled+"/cancelamento", nil)
	waitStatus(captured, "LIQUIDADA")
	waitStatus(cancelled, "CANCELADA")

	t.Run("captured in part shows the amount and the postings", func(t *testing.T) {
		e.find(t, captured)
		if got := e.text(t, "#captured"); got != "50.00 BRL" {
			t.Errorf("captured = %q, want 50.00 BRL", got)
		}
		hasStep("step done|Captured")
		stepsSay(t, e, "captured 50.00 BRL of the 200.00 BRL reserved; the other 150.00 BRL released", "debit", "credit", "950.00 BRL")
		e.screenshot(t, "journey-hold-captured.png")
	})

	t.Run("cancelled hold shows its cancellation", func(t *testing.T) {
		e.find(t, cancelled)
		if got := e.text(t, "#status"); got != "CANCELADA" {
			t.Errorf("status = %q, want CANCELADA", got)
		}
		hasStep("step done|Cancelled")
		stepsSay(t, e, "cancelled by the client: the 100.00 BRL reserved released")
	})
}

// journeyEnv starts the suite and the console in Chromium, signs the
// operator in, and opens one BRL account per prefix (its name made unique),
// as client A, funding the first with 1,000.00; it returns them in order.
func journeyEnv(t *testing.T, prefixes ...string) (*env, []string) {
	t.Helper()
	s := e2e.NewSuite(t, e2e.Options{Partitions: 2})
	e := &env{suite: s, url: startConsole(t, s, &logtest.Buffer{}), operator: s.Issuer.Token(t, "ana", auth.ScopeOperations), browser: newBrowser(t)}
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	accounts := make([]string, len(prefixes))
	for i, p := range prefixes {
		accounts[i] = p + "-" + suffix
		s.OpenAccount(t, accounts[i], "BRL")
	}
	s.Deposit(t, accounts[0], 100_000)
	e.signIn(t, e.operator)
	return e, accounts
}

// stepsSay checks that the journey's steps say each of wants.
func stepsSay(t *testing.T, e *env, wants ...string) {
	t.Helper()
	page := e.text(t, "#steps")
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("journey lacks %q:\n%s", w, page)
		}
	}
}
