package ledger_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestHistoryOfSettledTransfers: transfers settled from the analisada
// topic, in one batch, show their running balances in /lancamentos, and
// the running service answers /saldo?em= and /extrato from them. The
// postings of one transaction share one stamp (one instant): the balance
// at it is the one before them, a microsecond later the one after them.
// The statement over the whole history opens at 0, its postings
// step from balance to balance, and it closes at the balance GET
// /contas/{id} shows.
func TestHistoryOfSettledTransfers(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.openAccount(t, "CC-001", 100_000)
	s.openAccount(t, "CC-002", 0)
	var since time.Time
	if err := s.db.QueryRow(context.Background(), "SELECT clock_timestamp() - interval '1 minute'").Scan(&since); err != nil {
		t.Fatal(err)
	}
	s.produce(t, s.analysed(t, uuid.New(), "CC-001", "CC-002", 30_000), s.analysed(t, uuid.New(), "CC-001", "CC-002", 20_000),
		s.analysed(t, uuid.New(), "CC-001", "CC-002", 1_000))
	poll.True(t, 60*time.Second, "three transfers settled", func() bool { return s.balance(t, "CC-001") == 49_000 })

	st, page := s.call(t, "GET", "/contas/CC-001/lancamentos", "")
	items, _ := page["itens"].([]any)
	if st != http.StatusOK || len(items) != 4 {
		t.Fatalf("/lancamentos: %d %v", st, page)
	}
	newest := items[0].(map[string]any)
	if newest["saldoAposEmCentavos"] != 49_000.0 {
		t.Errorf("the newest posting's running balance %v, want 49000", newest["saldoAposEmCentavos"])
	}
	at, err := time.Parse(time.RFC3339Nano, newest["criadoEm"].(string))
	if err != nil {
		t.Fatal(err)
	}
	// The balance at the newest posting's own stamp is the running balance
	// of the newest posting stamped before it (the postings of its batch
	// share its stamp).
	before := 0.0
	for _, it := range items {
		m := it.(map[string]any)
		if stamp, _ := time.Parse(time.RFC3339Nano, m["criadoEm"].(string)); stamp.Before(at) {
			before = m["saldoAposEmCentavos"].(float64)
			break
		}
	}
	for _, c := range []struct {
		em   time.Time
		want float64
	}{{since, 0}, {at, before}, {at.Add(time.Microsecond), 49_000}} {
		st, body := s.call(t, "GET", "/contas/CC-001/saldo?em="+url.QueryEscape(c.em.Format(time.RFC3339Nano)), "")
		if st != http.StatusOK || body["saldoEmCentavos"] != c.want {
			t.Errorf("/saldo at %v: %d %v, want %v", c.em, st, body, c.want)
		}
	}
	to := at.Add(time.Second)
	st, stmt := s.call(t, "GET", "/contas/CC-001/extrato?desde="+url.QueryEscape(since.Format(time.RFC3339Nano))+
		"&ate="+url.QueryEscape(to.Format(time.RFC3339Nano)), "")
	postings, _ := stmt["itens"].([]any)
	if st != http.StatusOK || stmt["saldoInicialEmCentavos"] != 0.0 || stmt["saldoFinalEmCentavos"] != 49_000.0 || len(postings) != 4 {
		t.Fatalf("/extrato: %d %v", st, stmt)
	}
	run := 0.0
	for _, p := range postings {
		m := p.(map[string]any)
		if m["tipo"] == "D" {
			run -= m["valorEmCentavos"].(float64)
		} else {
			run += m["valorEmCentavos"].(float64)
		}
		if m["saldoAposEmCentavos"] != run {
			t.Errorf("posting %v: running balance %v, the statement's sum %v", m["id"], m["saldoAposEmCentavos"], run)
		}
	}
	st, csvBody := s.call(t, "GET", "/contas/CC-001/extrato?formato=csv&desde="+url.QueryEscape(since.Format(time.RFC3339Nano))+
		"&ate="+url.QueryEscape(to.Format(time.RFC3339Nano)), "")
	lines := strings.Split(strings.TrimSpace(csvBody["raw"].(string)), "\n")
	if st != http.StatusOK || len(lines) != 5 || lines[0] != "criadoEm,id,tipo,valorEmCentavos,transferenciaId,estornoId,saldoAposEmCentavos" ||
		!strings.HasSuffix(lines[4], ",49000") {
		t.Errorf("/extrato csv: %d %q", st, lines)
	}
	ledgertest.CheckInvariants(t, s.db)
}
