package web_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/web"
)

// history is an account CC-001 with deposits and transfers in and out,
// and the instants around them (read from the database's clock, which
// stamps postings).
type history struct {
	a       *api
	before  time.Time // before the account existed
	marks   []time.Time
	balance []int64 // balance at marks[i]
}

func newHistory(t *testing.T) *history {
	t.Helper()
	h := &history{a: newAPI(t)}
	h.before = h.now(t)
	for _, id := range []string{"CC-001", "CC-002"} {
		h.a.do(t, "POST", "/contas", `{"id":"`+id+`","moeda":"BRL"}`)
	}
	h.mark(t, 0)
	balance := int64(0)
	for i := range 4 {
		r := h.a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":1000}`, "Idempotency-Key", uuid.NewString())
		if r.status != 201 {
			t.Fatalf("deposit: %d %s", r.status, r.rawBody)
		}
		balance += 1000
		h.mark(t, balance)
		src, dst, d := "CC-001", "CC-002", -int64(100+i)
		if i%2 == 1 {
			src, dst, d = dst, src, int64(10+i)
		}
		h.settle(t, src, dst, max(d, -d))
		balance += d
		h.mark(t, balance)
	}
	return h
}

func (h *history) now(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := h.a.db.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

func (h *history) mark(t *testing.T, balance int64) {
	t.Helper()
	h.marks = append(h.marks, h.now(t))
	h.balance = append(h.balance, balance)
}

func (h *history) settle(t *testing.T, src, dst string, cents int64) {
	t.Helper()
	tr := ledger.Transfer{ID: uuid.New(), EventID: uuid.New(), Source: src, Dest: dst, AmountCents: cents, Currency: "BRL", ClientID: ledgertest.Client}
	tr.Authorization = ledgertest.Authorize(transfersig.Claim{TransferID: tr.ID, Source: src, Destination: dst,
		AmountCents: cents, Currency: "BRL", Client: ledgertest.Client})
	rs, err := h.a.store.Settle(context.Background(), []ledger.Transfer{tr}, ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}.Decider(time.Now()))
	if err != nil || rs[0].Outcome != ledger.Settled {
		t.Fatalf("settle: %v %v", rs, err)
	}
}

func instant(t time.Time) string { return url.QueryEscape(t.UTC().Format(time.RFC3339Nano)) }

func TestBalanceAt(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	for i, m := range h.marks {
		r := h.a.do(t, "GET", "/contas/CC-001/saldo?em="+instant(m), "")
		want := map[string]any{"id": "CC-001", "moeda": "BRL", "em": m.UTC().Format(time.RFC3339Nano), "saldoEmCentavos": float64(h.balance[i])}
		if diff := cmp.Diff(want, r.body); r.status != 200 || diff != "" {
			t.Errorf("mark %d: %d, mismatch (-want +got):\n%s", i, r.status, diff)
		}
	}
	now := h.a.do(t, "GET", "/contas/CC-001", "")
	for _, c := range []struct {
		name string
		em   string
		want float64
	}{
		{"before the account existed", instant(h.before), 0},
		{"long before", "1970-01-01T00:00:00Z", 0},
		{"in the future: the balance now", instant(time.Now().Add(time.Hour)), now.body["saldoEmCentavos"].(float64)},
		{"with an offset", url.QueryEscape(h.marks[2].In(time.FixedZone("BRT", -3*3600)).Format(time.RFC3339Nano)), float64(h.balance[2])},
	} {
		r := h.a.do(t, "GET", "/contas/CC-001/saldo?em="+c.em, "")
		if r.status != 200 || r.body["saldoEmCentavos"] != c.want {
			t.Errorf("%s: %d %s, want %v", c.name, r.status, r.rawBody, c.want)
		}
	}
	// A posting's own instant is exclusive: the balance before it; a
	// microsecond later, its running balance.
	page := h.a.do(t, "GET", "/contas/CC-001/lancamentos?limite=1", "")
	last := page.body["itens"].([]any)[0].(map[string]any)
	at, err := time.Parse(time.RFC3339Nano, last["criadoEm"].(string))
	if err != nil {
		t.Fatal(err)
	}
	after := last["saldoAposEmCentavos"].(float64)
	signed := last["valorEmCentavos"].(float64)
	if last["tipo"] == "D" {
		signed = -signed
	}
	for _, c := range []struct {
		at   time.Time
		want float64
	}{{at, after - signed}, {at.Add(time.Microsecond), after}} {
		r := h.a.do(t, "GET", "/contas/CC-001/saldo?em="+instant(c.at), "")
		if r.body["saldoEmCentavos"] != c.want {
			t.Errorf("at %v: %s, want %v", c.at, r.rawBody, c.want)
		}
	}
	for _, q := range []string{"", "?em=", "?em=yesterday", "?em=2026-01-02", "?em=2026-01-02T10:00:00", "?em=2026-01-02T10:00:00Z&em=2026-01-03T10:00:00Z"} {
		r := h.a.do(t, "GET", "/contas/CC-001/saldo"+q, "")
		if isProblem(t, r, http.StatusBadRequest, "malformed-request") && !strings.Contains(r.rawBody, `"em"`) {
			t.Errorf("%q: %s, want a field error on em", q, r.rawBody)
		}
	}
}

// statementJSON is the JSON statement as a client decodes it.
type statementJSON struct {
	Conta   string                `json:"conta"`
	Moeda   string                `json:"moeda"`
	Desde   time.Time             `json:"desde"`
	Ate     time.Time             `json:"ate"`
	Opening int64                 `json:"saldoInicialEmCentavos"`
	Items   []web.PostingResponse `json:"itens"`
	Closing int64                 `json:"saldoFinalEmCentavos"`
}

func (a *api) get(tb testing.TB, path string) (int, http.Header, []byte) {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, a.srv.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return res.StatusCode, res.Header, body
}

func TestStatement(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	from, to := h.marks[1], h.marks[len(h.marks)-2] // not the first deposit, not the last transfer
	path := "/contas/CC-001/extrato?desde=" + instant(from) + "&ate=" + instant(to)
	r := h.a.do(t, "GET", path, "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %s", r.status, r.header.Get("Content-Type"), r.rawBody)
	}
	var s statementJSON
	if err := json.Unmarshal([]byte(r.rawBody), &s); err != nil {
		t.Fatal(err)
	}
	if s.Conta != "CC-001" || s.Moeda != "BRL" || !s.Desde.Equal(from) || !s.Ate.Equal(to) {
		t.Errorf("head: %+v", s)
	}
	if s.Opening != h.balance[1] || s.Closing != h.balance[len(h.marks)-2] || len(s.Items) != 6 {
		t.Errorf("opening %d closing %d, %d postings; want %d %d 6", s.Opening, s.Closing, len(s.Items), h.balance[1], h.balance[len(h.marks)-2])
	}
	// Opening plus the postings is the closing, each step the posting's
	// running balance, oldest first; the ends are /saldo's.
	run := s.Opening
	for i, p := range s.Items {
		if p.Direction == "D" {
			run -= p.AmountCents
		} else {
			run += p.AmountCents
		}
		if p.BalanceAfterCents != run || (i > 0 && p.ID <= s.Items[i-1].ID) || p.CreatedAt.Before(from) || !p.CreatedAt.Before(to) {
			t.Errorf("posting %d: %+v, running balance %d", i, p, run)
		}
	}
	if run != s.Closing {
		t.Errorf("opening plus postings %d, closing %d", run, s.Closing)
	}
	for _, end := range []struct {
		at   time.Time
		want int64
	}{{from, s.Opening}, {to, s.Closing}} {
		b := h.a.do(t, "GET", "/contas/CC-001/saldo?em="+instant(end.at), "")
		if b.body["saldoEmCentavos"] != float64(end.want) {
			t.Errorf("/saldo at %v: %s, statement says %d", end.at, b.rawBody, end.want)
		}
	}
	// /lancamentos shows the same postings, newest first.
	page := h.a.do(t, "GET", "/contas/CC-001/lancamentos?limite=200", "")
	byID := map[float64]map[string]any{}
	for _, it := range page.body["itens"].([]any) {
		m := it.(map[string]any)
		byID[m["id"].(float64)] = m
	}
	for _, p := range s.Items {
		if l := byID[float64(p.ID)]; l == nil || l["saldoAposEmCentavos"] != float64(p.BalanceAfterCents) || l["criadoEm"] != p.CreatedAt.Format(time.RFC3339Nano) {
			t.Errorf("posting %d in /lancamentos: %v, in the statement %+v", p.ID, l, p)
		}
	}

	// The CSV has the header row and the same postings, line by line.
	status, header, body := h.a.get(t, path+"&formato=csv")
	if status != 200 || header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("csv: %d %s %s", status, header.Get("Content-Type"), body)
	}
	lines, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"criadoEm", "id", "tipo", "valorEmCentavos", "transferenciaId", "estornoId", "saldoAposEmCentavos"}}
	for _, p := range s.Items {
		want = append(want, []string{p.CreatedAt.Format(time.RFC3339Nano), strconv.FormatInt(p.ID, 10), p.Direction,
			strconv.FormatInt(p.AmountCents, 10), p.TransferID.String(), "", strconv.FormatInt(p.BalanceAfterCents, 10)})
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("csv mismatch (-want +got):\n%s", diff)
	}

	// Another client's account is unknown, in either format, as for GET
	// /contas/{id}.
	for _, f := range []string{"", "&formato=csv"} {
		other := h.a.do(t, "GET", path+f, "", headerClient, "bruno")
		if isProblem(t, other, http.StatusNotFound, "not-found") && strings.Contains(other.rawBody, "saldo") {
			t.Errorf("another client: %s", other.rawBody)
		}
	}

	// An empty range: opening = closing, no postings.
	status, _, body = h.a.get(t, "/contas/CC-001/extrato?desde=2000-01-01T00:00:00Z&ate=2000-01-02T00:00:00Z")
	if want := `{"conta":"CC-001","moeda":"BRL","desde":"2000-01-01T00:00:00Z","ate":"2000-01-02T00:00:00Z","saldoInicialEmCentavos":0,"itens":[],"saldoFinalEmCentavos":0}` + "\n"; status != 200 || string(body) != want {
		t.Errorf("empty statement: %d %s, want %s", status, body, want)
	}
}

func TestStatementErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`)
	const d, e = "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"
	for _, c := range []struct {
		query  string
		status int
		field  string
	}{
		{"?ate=" + e, 400, "desde"},
		{"?desde=" + d, 400, "ate"},
		{"?desde=hoje&ate=" + e, 400, "desde"},
		{"?desde=" + d + "&ate=" + e + "&formato=xml", 400, "formato"},
		{"?desde=" + d + "&ate=" + e + "&formato=csv&formato=json", 400, "formato"},
		{"?desde=" + e + "&ate=" + d, 422, "ate"},
		{"?desde=" + d + "&ate=" + d, 422, "ate"},
		{"?desde=2024-01-01T00:00:00Z&ate=" + e, 422, "ate"},
	} {
		r := a.do(t, "GET", "/contas/CC-001/extrato"+c.query, "")
		if r.status != c.status || r.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(r.rawBody, fmt.Sprintf("%q", c.field)) {
			t.Errorf("%s: %d %s, want %d naming %s", c.query, r.status, r.rawBody, c.status, c.field)
		}
	}
	if r := a.do(t, "GET", "/contas/CC-001/extrato?desde="+d+"&ate=2027-01-01T00:00:00Z", ""); r.status != 200 {
		t.Errorf("366 days: %d %s, want 200", r.status, r.rawBody)
	}
}
