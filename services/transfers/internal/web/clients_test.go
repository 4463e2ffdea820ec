package web_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/test/support/logtest"
)

// as returns the headers of a request by client (operator: with the
// operacoes scope).
func as(client string, operator bool) map[string]string {
	h := map[string]string{headerClient: client}
	if operator {
		h[headerOperator] = "true"
	}
	return h
}

func (h *harness) postAs(tb testing.TB, client, key, body string) response {
	tb.Helper()
	return do(tb, http.MethodPost, h.url+"/transferencias", map[string]string{"Content-Type": "application/json",
		"Idempotency-Key": key, headerClient: client}, []byte(body))
}

// sameProblem compares two problems but for what names the request.
var sameProblem = cmpopts.IgnoreFields(httpapi.Problem{}, "Instance", "RequestID")

// TestClientsAreKeptApart: a client reads only its own transfers, another
// client's transfer is exactly as unknown as a missing one, an operator
// reads every one, and a request without a principal gets 401.
func TestClientsAreKeptApart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := uuid.NewString()
	if r := h.postAs(t, "ana", id, validBody); r.status != http.StatusAccepted {
		t.Fatalf("POST as ana = %d %s", r.status, r.body)
	}
	unknown := do(t, http.MethodGet, h.url+"/transferencias/"+uuid.NewString(), as("bruno", false), nil)
	if unknown.status != http.StatusNotFound {
		t.Fatalf("GET of an unknown id = %d, want 404", unknown.status)
	}
	tests := []struct {
		name     string
		header   map[string]string
		status   int
		notFound bool // the exact problem of an unknown id
	}{
		{"the creator", as("ana", false), http.StatusOK, false},
		{"another client", as("bruno", false), http.StatusNotFound, true},
		{"an operator", as("ops", true), http.StatusOK, false},
		{"no principal", as(noClient, false), http.StatusUnauthorized, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, http.MethodGet, h.url+"/transferencias/"+id, tc.header, nil)
			if r.status != tc.status {
				t.Fatalf("GET = %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.notFound {
				if diff := cmp.Diff(unknown.problem(t), r.problem(t), sameProblem); diff != "" {
					t.Errorf("another client's transfer differs from an unknown one (-unknown +got):\n%s", diff)
				}
			}
			if r.status == http.StatusOK && !strings.Contains(string(r.body), `"id":"`+id+`"`) {
				t.Errorf("GET body %s does not hold the transfer", r.body)
			}
		})
	}
}

// TestKeyOfAnotherClient: a key another client already used is 422 with
// the problem of a key reused with another body, whatever the body, and
// changes nothing.
func TestKeyOfAnotherClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	key := uuid.NewString()
	if r := h.postAs(t, "ana", key, validBody); r.status != http.StatusAccepted {
		t.Fatalf("POST as ana = %d %s", r.status, r.body)
	}
	otherBody := strings.Replace(validBody, "30000", "30001", 1)
	reused := h.postAs(t, "ana", key, otherBody)
	if reused.status != http.StatusUnprocessableEntity {
		t.Fatalf("ana reusing her key with another body = %d, want 422", reused.status)
	}
	before := []int{h.count(t, "transferencia"), h.count(t, "outbox_event")}
	for name, body := range map[string]string{"same body": validBody, "other body": otherBody} {
		t.Run(name, func(t *testing.T) {
			r := h.postAs(t, "bruno", key, body)
			if r.status != http.StatusUnprocessableEntity {
				t.Fatalf("POST as bruno = %d %s, want 422", r.status, r.body)
			}
			if diff := cmp.Diff(reused.problem(t), r.problem(t), sameProblem); diff != "" {
				t.Errorf("another client's key differs from a reused key (-reused +got):\n%s", diff)
			}
			if r.header.Get("Location") != "" || r.header.Get("Idempotent-Replayed") != "" {
				t.Errorf("the 422 carries Location %q / Idempotent-Replayed %q", r.header.Get("Location"), r.header.Get("Idempotent-Replayed"))
			}
		})
	}
	if after := []int{h.count(t, "transferencia"), h.count(t, "outbox_event")}; !cmp.Equal(before, after) {
		t.Errorf("rows (transferencia, outbox_event) went from %v to %v", before, after)
	}
	// The transfer is still ana's, and only hers.
	if r := do(t, http.MethodGet, h.url+"/transferencias/"+key, as("ana", false), nil); r.status != http.StatusOK {
		t.Errorf("ana's GET after the attempts = %d", r.status)
	}
	if r := do(t, http.MethodGet, h.url+"/transferencias/"+key, as("bruno", false), nil); r.status != http.StatusNotFound {
		t.Errorf("bruno's GET after the attempts = %d", r.status)
	}
}

// TestCreatorIsRecorded: the transfer row and its TransferenciaSolicitada
// carry the client that created it.
func TestCreatorIsRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	key := uuid.NewString()
	if r := h.postAs(t, "ana", key, validBody); r.status != http.StatusAccepted {
		t.Fatalf("POST = %d %s", r.status, r.body)
	}
	var row string
	var payload []byte
	ctx := context.Background()
	if err := h.pool.QueryRow(ctx, `SELECT cliente_id FROM transferencia WHERE id = $1`, key).Scan(&row); err != nil {
		t.Fatal(err)
	}
	if err := h.pool.QueryRow(ctx, `SELECT payload FROM outbox_event WHERE aggregate_id = $1`, key).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatal(err)
	}
	if row != "ana" || ev["clienteId"] != "ana" {
		t.Errorf("cliente_id %q, event clienteId %v; want ana in both", row, ev["clienteId"])
	}
}

func TestPostWithoutPrincipalIs401AndStoresNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	r := h.postAs(t, noClient, uuid.NewString(), validBody)
	if r.status != http.StatusUnauthorized {
		t.Fatalf("POST without a principal = %d %s, want 401", r.status, r.body)
	}
	if p := r.problem(t); p.Status != http.StatusUnauthorized {
		t.Errorf("problem %+v", p)
	}
	if n := h.count(t, "transferencia") + h.count(t, "outbox_event"); n != 0 {
		t.Errorf("%d rows written", n)
	}
}

// TestTransferWritesAreAudited: every POST logs one audit line with the
// client, the request id and the transfer id, and never the token or the
// body.
func TestTransferWritesAreAudited(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	h := newHarness(t, harnessOptions{log: slog.New(slog.NewJSONHandler(&buf, nil))})
	// The requests carry the harness's real token; every JWT starts with
	// the base64url of `{"`, "eyJ", which no log line may hold.
	const token = "eyJ"
	key := uuid.NewString()
	send := func(client, body string) response {
		return do(t, http.MethodPost, h.url+"/transferencias", map[string]string{"Content-Type": "application/json",
			"Idempotency-Key": key, headerClient: client}, []byte(body))
	}
	body := `{"contaOrigem":"CC-SECRET-A","contaDestino":"CC-SECRET-B","valorEmCentavos":7654321,"moeda":"BRL"}`
	rs := []response{send("ana", body), send("ana", body), send("bruno", body)}
	do(t, http.MethodGet, h.url+"/transferencias/"+key, as("ana", false), nil) // reads are not audited

	got := logtest.Audits(t, buf.String())
	want := []map[string]any{
		{"action": "transfer.create", "client": "ana", "request_id": rs[0].header.Get("X-Request-Id"), "status": 202.0, "transfer_id": key},
		{"action": "transfer.create", "client": "ana", "request_id": rs[1].header.Get("X-Request-Id"), "status": 202.0, "transfer_id": key},
		{"action": "transfer.create", "client": "bruno", "request_id": rs[2].header.Get("X-Request-Id"), "status": 422.0, "transfer_id": key},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit lines mismatch (-want +got):\n%s", diff)
	}
	for _, secret := range []string{token, "CC-SECRET", "7654321"} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
