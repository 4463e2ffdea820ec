package web_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
	"github.com/paysuite/payments/test/support/poll"
)

// The clients of the refund tests: the payer (defaultClient) pays
// holderClient's account; strangerClient is neither.
const (
	holderClient   = "client-b"
	strangerClient = "client-c"
	operatorClient = "operator"
)

// settledTransfer creates a transfer of 30000 cents by the default client
// and settles it as the ledger's TransferenciaLiquidada would, naming
// holderClient the destination's titular.
func (h *harness) settledTransfer(tb testing.TB) string {
	tb.Helper()
	id := uuid.NewString()
	if r := h.post(tb, id, validBody); r.status != http.StatusAccepted {
		tb.Fatalf("POST = %d %s", r.status, r.body)
	}
	h.apply(tb, id, transfer.Result{Status: transfer.StatusSettled, DestHolder: holderClient})
	return id
}

// refund posts a refund of transfer id with key as client (an operator
// when client is operatorClient); body may be nil.
func (h *harness) refund(tb testing.TB, id, key, client string, body []byte) response {
	tb.Helper()
	hdr := map[string]string{}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	if body != nil {
		hdr["Content-Type"] = "application/json"
	}
	setClient(hdr, client)
	return do(tb, http.MethodPost, h.url+"/transferencias/"+id+"/estornos", hdr, body)
}

// getRefund reads refund key of transfer id as client.
func (h *harness) getRefund(tb testing.TB, id, key, client string) response {
	tb.Helper()
	hdr := map[string]string{}
	setClient(hdr, client)
	return do(tb, http.MethodGet, h.url+"/transferencias/"+id+"/estornos/"+key, hdr, nil)
}

func setClient(hdr map[string]string, client string) {
	switch client {
	case "":
	case operatorClient:
		hdr[headerClient], hdr[headerOperator] = operatorClient, "true"
	default:
		hdr[headerClient] = client
	}
}

// refundRows counts the refunds of transfer id and their outbox rows.
func (h *harness) refundRows(tb testing.TB, id string) (refunds, outboxed int) {
	tb.Helper()
	err := h.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM estorno WHERE transferencia_id = ($1::text)::uuid),
		(SELECT count(*) FROM outbox_event WHERE event_type = $2
			AND aggregate_id IN (SELECT id::text FROM estorno WHERE transferencia_id = ($1::text)::uuid))`,
		id, events.TypeRefundRequested).Scan(&refunds, &outboxed)
	if err != nil {
		tb.Fatal(err)
	}
	return refunds, outboxed
}

// refundEvent reads the outbox row of refund key.
func (h *harness) refundEvent(tb testing.TB, key string) (topic, msgKey string, ev events.RefundRequested) {
	tb.Helper()
	var payload []byte
	var typ string
	if err := h.pool.QueryRow(context.Background(), `SELECT topic, key, event_type, payload FROM outbox_event WHERE aggregate_id = $1`,
		key).Scan(&topic, &msgKey, &typ, &payload); err != nil {
		tb.Fatal(err)
	}
	if typ != events.TypeRefundRequested {
		tb.Errorf("outbox row of refund %s is %s", key, typ)
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		tb.Fatal(err)
	}
	return topic, msgKey, ev
}

// TestRefund: the destination's titular refunds part of a settled
// transfer (202 PENDENTE, Location, its EstornoSolicitado in the outbox,
// keyed by contaOrigem and signed for the ledger), written once whatever
// the replays; the same key with another amount, for another transfer or
// by another client is 422; a second refund with no amount takes all that
// remains, and a third is 422 refund-exceeds-refundable. The refund reads
// as PENDENTE for its creator.
func TestRefund(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.settledTransfer(t)
	key := uuid.NewString()
	body := []byte(`{"valorEmCentavos":10000}`)
	first := h.refund(t, id, key, holderClient, body)
	if first.status != http.StatusAccepted || first.header.Get(web.HeaderReplayed) != "" {
		t.Fatalf("refund = %d %s, want a first 202", first.status, first.body)
	}
	if want := `{"id":"` + key + `","transferenciaId":"` + id + `","status":"PENDENTE"}` + "\n"; string(first.body) != want {
		t.Errorf("202 body %s, want %s", first.body, want)
	}
	if loc := first.header.Get("Location"); loc != "/transferencias/"+id+"/estornos/"+key {
		t.Errorf("Location = %q", loc)
	}
	topic, msgKey, ev := h.refundEvent(t, key)
	if topic != testTopics.RefundRequested || msgKey != "CC-001" || ev.RefundID.String() != key || ev.TransferID.String() != id ||
		ev.SourceAccount != "CC-001" || ev.DestAccount != "CC-002" || ev.AmountCents != 10000 || ev.Currency != "BRL" ||
		ev.ClientID != holderClient || ev.Operator {
		t.Errorf("outbox row on %s keyed %s: %+v", topic, msgKey, ev)
	}
	verifier, err := transfersig.NewVerifier(map[string]ed25519.PublicKey{testKey.KeyID(): testKey.Public()})
	if err != nil {
		t.Fatal(err)
	}
	claim := transfersig.RefundClaim{RefundID: ev.RefundID, TransferID: ev.TransferID, Source: ev.SourceAccount, Destination: ev.DestAccount,
		AmountCents: ev.AmountCents, Currency: ev.Currency, Client: ev.ClientID, Operator: ev.Operator}
	if err := verifier.VerifyRefund(claim, ev.Authorization); err != nil {
		t.Errorf("the refund's signature does not verify: %v", err)
	}
	claim.Operator = true
	if err := verifier.VerifyRefund(claim, ev.Authorization); err == nil {
		t.Error("the signature verifies with the operator flag flipped")
	}

	replay := h.refund(t, id, key, holderClient, []byte(`{ "valorEmCentavos" : 10000 }`))
	if replay.status != http.StatusAccepted || replay.header.Get(web.HeaderReplayed) != "true" || string(replay.body) != string(first.body) ||
		replay.header.Get("Location") != first.header.Get("Location") {
		t.Errorf("replay = %d %v %s, want the first 202 replayed", replay.status, replay.header, replay.body)
	}
	reused := httpapi.TypeURI(errkind.KeyReused)
	wantProblem(t, "same key, other amount", h.refund(t, id, key, holderClient, []byte(`{"valorEmCentavos":10001}`)), 422, reused)
	wantProblem(t, "same key, no amount", h.refund(t, id, key, holderClient, nil), 422, reused)
	wantProblem(t, "same key, another transfer", h.refund(t, h.settledTransfer(t), key, holderClient, body), 422, reused)
	wantProblem(t, "same key, an operator", h.refund(t, id, key, operatorClient, body), 422, reused)

	r := h.getRefund(t, id, key, holderClient)
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); r.status != http.StatusOK || err != nil {
		t.Fatalf("GET refund = %d %s", r.status, r.body)
	}
	for _, f := range []string{"criadoEm", "atualizadoEm"} {
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got[f])); err != nil {
			t.Errorf("%s = %v", f, got[f])
		}
		delete(got, f)
	}
	if want := map[string]any{"id": key, "transferenciaId": id, "valorEmCentavos": float64(10000), "status": "PENDENTE"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET refund = %v, want %v", got, want)
	}

	rest := uuid.NewString()
	if r := h.refund(t, id, rest, holderClient, nil); r.status != http.StatusAccepted {
		t.Fatalf("refund of the rest = %d %s", r.status, r.body)
	}
	if _, _, ev := h.refundEvent(t, rest); ev.AmountCents != 20000 {
		t.Errorf("refund with no amount asked %d, want the 20000 that remained", ev.AmountCents)
	}
	wantProblem(t, "a refund once nothing remains", h.refund(t, id, uuid.NewString(), holderClient, nil), 422,
		httpapi.TypeURI(transfer.KindRefundExceeds))
	wantProblem(t, "one cent once nothing remains", h.refund(t, id, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":1}`)), 422,
		httpapi.TypeURI(transfer.KindRefundExceeds))
	if e, o := h.refundRows(t, id); e != 2 || o != 2 {
		t.Errorf("%d refunds, %d outbox rows; want 2 and 2", e, o)
	}
}

// TestRefundRefusals: what a refund is refused with, each writing nothing;
// a refused key is not remembered.
func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	pending := uuid.NewString()
	if r := h.post(t, pending, validBody); r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	rejected := uuid.NewString()
	if r := h.post(t, rejected, validBody); r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	h.apply(t, rejected, transfer.Result{Status: transfer.StatusRejected, Reason: events.ReasonInsufficientFunds})
	reserved := h.reservedHold(t)
	settled := h.settledTransfer(t)
	notSettled, exceeds := httpapi.TypeURI(transfer.KindNotSettled), httpapi.TypeURI(transfer.KindRefundExceeds)
	notFound, validation, malformed := httpapi.TypeURI(errkind.NotFound), httpapi.TypeURI(errkind.Validation), httpapi.TypeURI(errkind.Malformed)
	for _, tt := range []struct {
		name, id, key, client string
		body                  []byte
		status                int
		typ                   string
	}{
		{"a pending transfer, by an operator", pending, uuid.NewString(), operatorClient, nil, 409, notSettled},
		{"a rejected transfer, by an operator", rejected, uuid.NewString(), operatorClient, nil, 409, notSettled},
		{"a reserved hold, by an operator", reserved, uuid.NewString(), operatorClient, nil, 409, notSettled},
		{"a pending transfer, by its payer", pending, uuid.NewString(), "", nil, 404, notFound},
		{"a settled transfer, by its payer", settled, uuid.NewString(), "", nil, 404, notFound},
		{"a settled transfer, by another client", settled, uuid.NewString(), strangerClient, nil, 404, notFound},
		{"an unknown transfer", uuid.NewString(), uuid.NewString(), operatorClient, nil, 404, notFound},
		{"more than was settled", settled, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":30001}`), 422, exceeds},
		{"zero", settled, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":0}`), 422, validation},
		{"a negative amount", settled, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":-5}`), 422, validation},
		{"an amount over 10^15", settled, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":1000000000000001}`), 422, validation},
		{"a fraction", settled, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":1.5}`), 400, malformed},
		{"a string", settled, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":"5"}`), 400, malformed},
		{"an unknown field", settled, uuid.NewString(), holderClient, []byte(`{"valor":5}`), 400, malformed},
		{"transfer id not a UUID", "x", uuid.NewString(), holderClient, nil, 400, httpapi.TypeURI(errkind.InvalidID)},
		{"no key", settled, "", holderClient, nil, 400, httpapi.TypeURI(errkind.InvalidKey)},
	} {
		wantProblem(t, tt.name, h.refund(t, tt.id, tt.key, tt.client, tt.body), tt.status, tt.typ)
	}
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM estorno) +
		(SELECT count(*) FROM outbox_event WHERE event_type = $1)`, events.TypeRefundRequested).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d refund or refund outbox rows after refusals, %v; want 0", n, err)
	}
	key := uuid.NewString()
	wantProblem(t, "over what was settled", h.refund(t, settled, key, holderClient, []byte(`{"valorEmCentavos":30001}`)), 422, exceeds)
	if r := h.refund(t, settled, key, holderClient, []byte(`{"valorEmCentavos":30000}`)); r.status != http.StatusAccepted {
		t.Errorf("corrected refund = %d %s, want 202", r.status, r.body)
	}
}

// TestRefundOfACapturedHold: a captured hold refunds at most what its
// capture settled, not what was reserved.
func TestRefundOfACapturedHold(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.reservedHold(t)
	h.apply(t, id, transfer.Result{Status: transfer.StatusSettled, SettledCents: 12000, DestHolder: holderClient})
	wantProblem(t, "over the capture", h.refund(t, id, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":12001}`)), 422,
		httpapi.TypeURI(transfer.KindRefundExceeds))
	key := uuid.NewString()
	if r := h.refund(t, id, key, holderClient, nil); r.status != http.StatusAccepted {
		t.Fatalf("refund = %d %s", r.status, r.body)
	}
	if _, _, ev := h.refundEvent(t, key); ev.AmountCents != 12000 {
		t.Errorf("the whole refund of the capture asked %d, want 12000", ev.AmountCents)
	}
}

// TestConcurrentRefunds: many refunds of one transfer at once, each with
// its own key, together asking for more than it settled: exactly as many
// are accepted as fit (the transfer's row lock orders them), every other
// is 422 refund-exceeds-refundable; one refund row and one outbox row per
// accepted one.
func TestConcurrentRefunds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.settledTransfer(t)
	const n = 20
	start := make(chan struct{})
	results := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			client := holderClient
			if i%2 == 1 {
				client = operatorClient
			}
			results[i] = h.refund(t, id, uuid.NewString(), client, []byte(`{"valorEmCentavos":7000}`))
		})
	}
	close(start)
	wg.Wait()
	accepted := 0
	for i, r := range results {
		if r.status == http.StatusAccepted {
			accepted++
			continue
		}
		wantProblem(t, fmt.Sprintf("refund %d", i), r, 422, httpapi.TypeURI(transfer.KindRefundExceeds))
	}
	if accepted != 4 { // 4 x 7000 <= 30000 < 5 x 7000
		t.Errorf("%d accepted, want 4", accepted)
	}
	if e, o := h.refundRows(t, id); e != 4 || o != 4 {
		t.Errorf("%d refunds, %d outbox rows; want 4 and 4", e, o)
	}
}

// TestRefundInFlight: while a refund's transaction is open, its key is 409
// request-in-progress, and a refund with another key waits for the
// transfer's lock, then sees the first.
func TestRefundInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.settledTransfer(t)
	key := uuid.NewString()
	hd := h.holds.hold(uuid.MustParse(key))
	first := make(chan response, 1)
	go func() { first <- h.refund(t, id, key, holderClient, []byte(`{"valorEmCentavos":20000}`)) }()
	released := false
	t.Cleanup(func() { // a failure below must not leave the first request held
		if !released {
			close(hd.release)
		}
	})
	waitClosed(t, hd.entered, "the refund to reach its commit")
	wantProblem(t, "same key in flight", h.refund(t, id, key, holderClient, []byte(`{"valorEmCentavos":20000}`)), 409,
		httpapi.TypeURI(errkind.InProgress))
	second := make(chan response, 1)
	go func() { second <- h.refund(t, id, uuid.NewString(), holderClient, []byte(`{"valorEmCentavos":20000}`)) }()
	// The second waits on the transfer's row lock, held by the first (a
	// row lock's waiter waits on the holder's transaction id).
	poll.Until(t, 10*time.Second, "the second refund to wait on the transfer's lock", func() (bool, string) {
		select {
		case r := <-second:
			t.Fatalf("the second refund did not wait: %d %s", r.status, r.body)
		default:
		}
		var waiting int
		err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'`).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprint(waiting, err)
	})
	close(hd.release)
	released = true
	if r := <-first; r.status != http.StatusAccepted {
		t.Errorf("first = %d %s", r.status, r.body)
	}
	wantProblem(t, "the second, which no longer fits", <-second, 422, httpapi.TypeURI(transfer.KindRefundExceeds))
}

// TestRefundAuthorization: the destination's titular and operators refund;
// the payer and other clients get 404, as for an unknown transfer. A
// refund reads for its creator, the destination's titular and operators,
// and is 404 for anyone else and under another transfer; the titular
// reads the transfer too.
func TestRefundAuthorization(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.settledTransfer(t)
	notFound := httpapi.TypeURI(errkind.NotFound)
	wantProblem(t, "the payer's refund", h.refund(t, id, uuid.NewString(), "", nil), 404, notFound)
	wantProblem(t, "another client's refund", h.refund(t, id, uuid.NewString(), strangerClient, nil), 404, notFound)
	byHolder, byOperator := uuid.NewString(), uuid.NewString()
	if r := h.refund(t, id, byHolder, holderClient, []byte(`{"valorEmCentavos":100}`)); r.status != http.StatusAccepted {
		t.Fatalf("titular's refund = %d %s", r.status, r.body)
	}
	if r := h.refund(t, id, byOperator, operatorClient, []byte(`{"valorEmCentavos":200}`)); r.status != http.StatusAccepted {
		t.Fatalf("operator's refund = %d %s", r.status, r.body)
	}
	if _, _, ev := h.refundEvent(t, byOperator); !ev.Operator || ev.ClientID != operatorClient {
		t.Errorf("operator's refund event: operador %v clienteId %q", ev.Operator, ev.ClientID)
	}
	for _, tt := range []struct {
		name, refund, client string
		status               int
	}{
		{"the titular's, by the titular", byHolder, holderClient, 200},
		{"the operator's, by its creator", byOperator, operatorClient, 200},
		{"the operator's, by the titular", byOperator, holderClient, 200},
		{"the titular's, by an operator", byHolder, operatorClient, 200},
		{"the titular's, by the payer", byHolder, "", 404},
		{"the titular's, by another client", byHolder, strangerClient, 404},
	} {
		if r := h.getRefund(t, id, tt.refund, tt.client); r.status != tt.status {
			t.Errorf("%s = %d %s, want %d", tt.name, r.status, r.body, tt.status)
		}
	}
	wantProblem(t, "a refund under another transfer", h.getRefund(t, h.settledTransfer(t), byHolder, holderClient), 404, notFound)
	wantProblem(t, "an unknown refund", h.getRefund(t, id, uuid.NewString(), operatorClient), 404, notFound)
	wantProblem(t, "a refund id not a UUID", h.getRefund(t, id, "x", operatorClient), 400, httpapi.TypeURI(errkind.InvalidID))
	hdr := map[string]string{}
	setClient(hdr, holderClient)
	if r := do(t, http.MethodGet, h.url+"/transferencias/"+id, hdr, nil); r.status != http.StatusOK {
		t.Errorf("the titular's GET of the transfer = %d %s", r.status, r.body)
	}
}
