package web_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// TestTransferErrorsCarryTheirProblems: each error of the transfers
// domain, wrapped as the store wraps it, is answered through the one
// writer with the status, type, title, detail and fields the API
// documents (CONTRACTS.md section 1, openapi.yaml), and Retry-After: 1 on
// a key in progress.
func TestTransferErrorsCarryTheirProblems(t *testing.T) {
	t.Parallel()
	const base = "https://paysuite.dev/problems/"
	for _, tt := range []struct {
		err        error
		want       httpapi.Problem
		retryAfter string
	}{
		{transfer.Request{Source: "CC-1", Destination: "CC-1", AmountCents: 1, Currency: "BRL"}.Validate(time.Now()),
			httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422, Detail: "the transfer breaks the rules of its fields",
				Errors: []errkind.FieldError{{Field: "contaDestino", Message: "must differ from contaOrigem"}}}, ""},
		{transfer.ErrKeyReused, httpapi.Problem{Type: base + "idempotency-key-reused", Title: "Idempotency-Key reused with another payload", Status: 422,
			Detail: "this Idempotency-Key was already used with a different request body"}, ""},
		{transfer.ErrInProgress, httpapi.Problem{Type: base + "request-in-progress", Title: "Request in progress", Status: 409,
			Detail: "a request with this Idempotency-Key is still in progress; retry later"}, "1"},
		{transfer.ErrNotFound, httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "no transfer with this id"}, ""},
		{transfer.ErrHeldNotFound, httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "no held result has this event id"}, ""},
		{transfer.ErrHeldResolved, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409,
			Detail: "the held result was already applied or discarded"}, ""},
		{transfer.ErrNoSettlement, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409,
			Detail: "the ledger has no record of this transfer id: there is no outcome to apply; the result stays held"}, ""},
	} {
		t.Run(tt.err.Error(), func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/transferencias", nil)
			httpapi.WriteError(rec, req, slog.New(slog.DiscardHandler), fmt.Errorf("create: %w", tt.err))
			var got httpapi.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			tt.want.Instance = "/transferencias"
			if diff := cmp.Diff(tt.want, got); diff != "" || rec.Code != tt.want.Status {
				t.Errorf("status %d, problem mismatch (-want +got):\n%s", rec.Code, diff)
			}
			if ra := rec.Header().Get("Retry-After"); ra != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", ra, tt.retryAfter)
			}
		})
	}
	// A transfer that is not the one the ledger settled: the operator is
	// told what differs, whatever the store wrapped around it.
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/ops/resultados-retidos/x/aplicar", nil)
	httpapi.WriteError(rec, req, slog.New(slog.DiscardHandler), fmt.Errorf("%w: the amount differs", transfer.ErrNotTheSettledTransfer))
	var got httpapi.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := "the transfer is not the one the ledger settled, so the result stays held: the amount differs"; rec.Code != 409 ||
		got.Type != base+"conflict" || got.Detail != want {
		t.Errorf("not the settled transfer: %d %+v, want 409 conflict %q", rec.Code, got, want)
	}
}
