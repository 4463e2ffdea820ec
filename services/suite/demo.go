package suite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/apiclient"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/events"
)

// DemoTransfer is one scripted transfer and what must become of it.
type DemoTransfer struct {
	Name        string
	From, To    string
	AmountCents int64
	Currency    string
	WantStatus  string
	WantReason  string
}

// Demo is the scripted flow: accounts opened and funded through the ledger
// API, transfers through the transfers API, three holds (one captured in
// part, one cancelled, one left to expire HoldExpiry after its request,
// which the demo waits for), two refunds of the settled transfer (one in
// part that settles, one over what remains that is refused), then the
// final statuses and balances,
// reserved and available ones included, checked against what the
// contracts promise; and the door closed to a request without a token or
// without the scope it needs.
type Demo struct {
	Transfers string // base URL of the transfers service
	Ledger    string // base URL of the ledger service
	Out       io.Writer
	// Token is the bearer token of the demo's client (DemoClient, with
	// DemoScopes); ReaderToken one of a second client holding only the
	// read scopes (ReaderClient); MinterToken the one of the client that
	// funds accounts (MinterClient, with MinterScopes only: minting is
	// never held with transferencias:criar); RefundToken the demo
	// client's token with RefundScopes only, with which it refunds, as the
	// titular of the account its settled transfer paid.
	Token, ReaderToken, MinterToken, RefundToken string
	// Timeout bounds the wait for every transfer to reach a final status
	// (for the expiring hold: the wait after its expiraEm).
	Timeout time.Duration
	client  *http.Client
	// From and To are the funded account and the one it paid, once Run
	// opened them (the closing hint names them).
	From, To string
}

// The demo's three clients and their scopes.
const (
	DemoClient   = "demo"
	ReaderClient = "demo-leitura"
	MinterClient = "demo-tesouraria"
	// OperatorClient is the demo's operator, who signs in to the console.
	OperatorClient = "operador"
)

// DemoScopes are the demo client's scopes, ReaderScopes the second
// client's, MinterScopes the third's.
var (
	DemoScopes   = []string{auth.ScopeAccountsAdmin, auth.ScopeAccountsRead, auth.ScopeTransfersCreate, auth.ScopeTransfersRead}
	ReaderScopes = []string{auth.ScopeAccountsRead, auth.ScopeTransfersRead}
	MinterScopes = []string{auth.ScopeAccountsDeposit}
)

// RunDemo runs the script once and returns an error when an expectation
// did not hold.
func (d *Demo) Run(ctx context.Context) error {
	if d.client == nil {
		d.client = &http.Client{Timeout: 10 * time.Second}
	}
	if d.Timeout <= 0 {
		d.Timeout = 2 * time.Minute
	}
	run := shortID()
	acct := func(n string) string { return "DEMO-" + run + "-" + n }
	a, b, c, usd := acct("A"), acct("B"), acct("C"), acct("USD")
	d.From, d.To = a, b

	fmt.Fprintf(d.Out, "\n== Demo run %s\n", run)
	fmt.Fprintln(d.Out, "-- opening and funding accounts (ledger API)")
	for _, o := range []struct{ id, cur string }{{a, "BRL"}, {b, "BRL"}, {c, "BRL"}, {usd, "USD"}} {
		if _, err := d.call(ctx, http.MethodPost, d.Ledger+"/contas", "", map[string]any{"id": o.id, "moeda": o.cur}, http.StatusCreated); err != nil {
			return err
		}
		fmt.Fprintf(d.Out, "   opened %s (%s)\n", o.id, o.cur)
	}
	if _, err := d.callAs(ctx, d.MinterToken, http.MethodPost, d.Ledger+"/contas/"+a+"/depositos", uuid.NewString(),
		map[string]any{"valorEmCentavos": 100_000}, http.StatusCreated); err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "   deposited R$ 1.000,00 into %s (as %s, scope %s)\n", a, MinterClient, auth.ScopeAccountsDeposit)

	// The holds first: the one left to expire starts its minute now.
	holds := demoHolds(time.Now())
	if err := d.submitHolds(ctx, holds, a, b); err != nil {
		return err
	}

	script := []DemoTransfer{
		{"settled", a, b, 30_000, "BRL", "LIQUIDADA", ""},
		{"blocked by antifraud (R$ 100.000,00)", a, b, 10_000_000, "BRL", "REJEITADA", events.ReasonBlockedByAntifraud},
		{"insufficient funds", c, a, 5_000, "BRL", "REJEITADA", events.ReasonInsufficientFunds},
		{"unknown destination account", a, acct("NOPE"), 1_000, "BRL", "REJEITADA", events.ReasonAccountNotFound},
		{"currency mismatch", a, usd, 1_000, "BRL", "REJEITADA", events.ReasonCurrencyMismatch},
	}
	fmt.Fprintln(d.Out, "-- submitting transfers (POST /transferencias)")
	ids := make([]string, len(script))
	var first map[string]any
	var firstKey string
	for i, t := range script {
		key := uuid.NewString()
		body := map[string]any{"contaOrigem": t.From, "contaDestino": t.To, "valorEmCentavos": t.AmountCents, "moeda": t.Currency}
		resp, err := d.call(ctx, http.MethodPost, d.Transfers+"/transferencias", key, body, http.StatusAccepted)
		if err != nil {
			return err
		}
		ids[i] = key
		if i == 0 {
			first, firstKey = resp.body, key
		}
		fmt.Fprintf(d.Out, "   %-38s %s -> 202 %v\n", t.Name, key, resp.body["status"])
	}
	// The idempotent replay: the same key and body again.
	s := script[0]
	replay, err := d.call(ctx, http.MethodPost, d.Transfers+"/transferencias", firstKey,
		map[string]any{"contaOrigem": s.From, "contaDestino": s.To, "valorEmCentavos": s.AmountCents, "moeda": s.Currency}, http.StatusAccepted)
	if err != nil {
		return err
	}
	var failures []string
	if replay.header.Get("Idempotent-Replayed") != "true" || fmt.Sprint(replay.body) != fmt.Sprint(first) {
		failures = append(failures, "the replay of the first transfer did not return the stored response with Idempotent-Replayed: true")
	}
	fmt.Fprintf(d.Out, "   %-38s %s -> 202, Idempotent-Replayed: %s\n", "idempotent replay of the first", firstKey, replay.header.Get("Idempotent-Replayed"))

	fmt.Fprintln(d.Out, "-- waiting for the results (GET /transferencias/{id})")
	final, err := d.waitFor(ctx, ids, "transfers final", time.Now().Add(d.Timeout), func(st string) bool { return st != statusPending })
	if err != nil {
		return err
	}
	refunds, err := d.askRefunds(ctx, ids[0])
	if err != nil {
		return err
	}
	holdFails, err := d.closeHolds(ctx, holds, a)
	if err != nil {
		return err
	}
	failures = append(failures, holdFails...)

	fmt.Fprintln(d.Out, "-- authentication (every request but health and metrics carries a bearer token)")
	body := map[string]any{"contaOrigem": a, "contaDestino": b, "valorEmCentavos": 1, "moeda": "BRL"}
	if _, err := d.callAs(ctx, "", http.MethodPost, d.Transfers+"/transferencias", uuid.NewString(), body, http.StatusUnauthorized); err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "   %-38s -> 401\n", "a transfer without a token")
	if _, err := d.callAs(ctx, d.ReaderToken, http.MethodPost, d.Transfers+"/transferencias", uuid.NewString(), body, http.StatusForbidden); err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "   %-38s -> 403 insufficient_scope\n", "a transfer as "+ReaderClient+" (reader)")
	if _, err := d.call(ctx, http.MethodPost, d.Ledger+"/contas/"+a+"/depositos", uuid.NewString(),
		map[string]any{"valorEmCentavos": 1}, http.StatusForbidden); err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "   %-38s -> 403 insufficient_scope\n", "a deposit as "+DemoClient+" (no "+auth.ScopeAccountsDeposit+")")
	if _, err := d.callAs(ctx, d.ReaderToken, http.MethodGet, d.Ledger+"/contas/"+a, "", nil, http.StatusNotFound); err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "   %-38s -> 404\n", "a balance of "+DemoClient+"'s read as "+ReaderClient)
	if _, err := d.call(ctx, http.MethodPost, d.Transfers+"/transferencias/"+ids[0]+"/estornos", uuid.NewString(),
		map[string]any{"valorEmCentavos": 1}, http.StatusForbidden); err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "   %-38s -> 403 insufficient_scope\n", "a refund as "+DemoClient+" (no "+auth.ScopeTransfersRefund+")")

	refundFails, err := d.settleRefunds(ctx, refunds)
	if err != nil {
		return err
	}
	failures = append(failures, refundFails...)

	if err := d.awaitExpiry(ctx, holds); err != nil {
		return err
	}
	failures = append(failures, holdFailures(holds)...)

	fmt.Fprintln(d.Out, "-- results")
	tw := tabwriter.NewWriter(d.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   TRANSFER\tSTATUS\tMOTIVO\tEXPECTED\t")
	for i, t := range script {
		st, _ := final[i]["status"].(string)
		reason, _ := final[i]["motivo"].(string)
		want := strings.TrimSpace(t.WantStatus + " " + t.WantReason)
		mark := "ok"
		if st != t.WantStatus || reason != t.WantReason {
			mark = "MISMATCH"
			failures = append(failures, fmt.Sprintf("%s: got %s %s, want %s", t.Name, st, reason, want))
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%s\t%s\n", t.Name, st, reason, want, mark)
	}
	for _, h := range holds {
		st, _ := h.Final["status"].(string)
		mark := "ok"
		if st != h.WantStatus {
			mark = "MISMATCH"
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%s\t%s\n", h.Name, st, "", h.WantStatus, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Every hold ended: nothing stays reserved, and only the captured
	// part of one moved; the partial refund moved back from b to a.
	captured, refunded := float64(capturedCents(holds)), float64(RefundCents)
	fmt.Fprintln(d.Out, "-- balances (GET /contas/{id}): saldo, reservado")
	for _, want := range []struct {
		id    string
		cents float64
	}{{a, 70_000 - captured + refunded}, {b, 30_000 + captured - refunded}, {c, 0}, {usd, 0}} {
		r, err := d.call(ctx, http.MethodGet, d.Ledger+"/contas/"+want.id, "", nil, http.StatusOK)
		if err != nil {
			return err
		}
		got, _ := r.body["saldoEmCentavos"].(float64)
		reserved, _ := r.body["reservadoEmCentavos"].(float64)
		available, _ := r.body["disponivelEmCentavos"].(float64)
		mark := "ok"
		if got != want.cents || reserved != 0 || available != got {
			mark = "MISMATCH"
			failures = append(failures, fmt.Sprintf("balance of %s: got saldo %.0f, reservado %.0f, disponivel %.0f; want saldo %.0f, nothing reserved",
				want.id, got, reserved, available, want.cents))
		}
		fmt.Fprintf(d.Out, "   %-20s %12.0f cents (%v), reservado %.0f  %s\n", want.id, got, r.body["moeda"], reserved, mark)
	}
	if len(failures) > 0 {
		return fmt.Errorf("demo expectations failed:\n  %s", strings.Join(failures, "\n  "))
	}
	fmt.Fprintln(d.Out, "== every expectation held")
	return nil
}

type response struct {
	body   map[string]any
	header http.Header
}

// Hint tells how to try the running suite by hand: a token command and a
// transfer between two accounts the demo opened.
func (d *Demo) Hint(w io.Writer) {
	fmt.Fprintf(w, "\nThe suite keeps serving. Try (from the repository root):\n"+
		"  TOKEN=$(go run ./services/suite/cmd/payments auth token --client %s --scopes %s)\n"+
		"  curl -si -X POST %s/transferencias -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' \\\n"+
		"    -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" \\\n"+
		"    -d '{\"contaOrigem\":\"%s\",\"contaDestino\":\"%s\",\"valorEmCentavos\":1000,\"moeda\":\"BRL\"}'\n"+
		"  curl -s %s/contas/%s -H \"Authorization: Bearer $TOKEN\"\n"+
		"Press Ctrl+C to stop.\n",
		DemoClient, strings.Join(DemoScopes, ","), d.Transfers, d.From, d.To, d.Ledger, d.From)
}

// call sends a JSON request as the demo's client and checks the status.
func (d *Demo) call(ctx context.Context, method, url, idemKey string, body any, want int) (response, error) {
	return d.callAs(ctx, d.Token, method, url, idemKey, body, want)
}

// callAs sends a JSON request with token ("" for none) and checks the
// status.
func (d *Demo) callAs(ctx context.Context, token, method, url, idemKey string, body any, want int) (response, error) {
	c := apiclient.Client{HTTP: d.client}
	if token != "" {
		c.Authorization = apiclient.Bearer(token)
	}
	resp, err := c.Do(ctx, method, url, idemKey, body)
	if err != nil {
		return response{}, err
	}
	raw := resp.Body
	okStatus := resp.Status == want || (want == http.StatusCreated && method == http.MethodPost && resp.Status == http.StatusOK && strings.HasSuffix(url, "/contas"))
	if !okStatus {
		return response{}, fmt.Errorf("%s %s: status %d, want %d: %s", method, url, resp.Status, want, strings.TrimSpace(string(raw)))
	}
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return response{}, fmt.Errorf("%s %s: %w", method, url, err)
		}
	}
	return response{body: m, header: resp.Header}, nil
}

func shortID() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "000000"
	}
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
