package web_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// TestLedgerErrorsCarryTheirProblems: each error of the ledger's domain,
// wrapped as the store wraps it, is answered through the one writer with
// the status, type, title, detail and fields the API documents
// (docs/api.md, openapi.yaml), the ceilings with the ledger's own types.
func TestLedgerErrorsCarryTheirProblems(t *testing.T) {
	t.Parallel()
	const base = "https://paysuite.dev/problems/"
	amount := func(msg string) []errkind.FieldError {
		return []errkind.FieldError{{Field: "valorEmCentavos", Message: msg}}
	}
	for _, tt := range []struct {
		err  error
		want httpapi.Problem
	}{
		{&ledger.ValidationError{Fields: []ledger.FieldError{{Field: "limite", Message: "must be from 1 to 200"}}},
			httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422, Detail: "the request breaks a rule",
				Errors: []errkind.FieldError{{Field: "limite", Message: "must be from 1 to 200"}}}},
		{ledger.ErrAccountNotFound, httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "account not found"}},
		{ledger.ErrCurrencyConflict, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "the account exists with another currency"}},
		{ledger.ErrHolderConflict, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "the account exists with another titular"}},
		{ledger.ErrNoTitular, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409,
			Detail: "the account exists without a titular; only an operator can give it one"}},
		{&ledger.CeilingError{MaxCents: 1000}, httpapi.Problem{Type: base + "deposit-over-ceiling", Title: "Deposit over the ceiling of one deposit",
			Status: 422, Detail: "the deposit is above the ceiling of one deposit", Errors: amount("must be at most 1000")}},
		{&ledger.DailyCeilingError{MaxCents: 10000, Currency: "BRL"}, httpapi.Problem{Type: base + "deposit-over-daily-ceiling",
			Title: "Deposits over the client's daily ceiling", Status: 422,
			Detail: "the deposit would take this client's deposits of BRL today (UTC) over the daily ceiling of 10000 cents; nothing was written"}},
		{ledger.ErrKeyReused, httpapi.Problem{Type: base + "idempotency-key-reused", Title: "Idempotency-Key reused with another payload", Status: 422,
			Detail: "this Idempotency-Key was used for another deposit"}},
		{ledger.ErrFundingAccount, httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422,
			Detail: "funding accounts do not take deposits"}},
		{ledger.ErrBalanceOverflow, httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422,
			Detail: "the deposit would overflow a balance", Errors: amount("too large for this account")}},
		{ledger.ErrNotProcessed, httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "the ledger has not processed this transfer"}},
	} {
		t.Run(tt.err.Error(), func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/contas/CC-1/depositos", nil)
			httpapi.WriteError(rec, req, slog.New(slog.DiscardHandler), fmt.Errorf("deposit: %w", tt.err))
			var got httpapi.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			tt.want.Instance = "/contas/CC-1/depositos"
			if diff := cmp.Diff(tt.want, got); diff != "" || rec.Code != tt.want.Status {
				t.Errorf("status %d, problem mismatch (-want +got):\n%s", rec.Code, diff)
			}
		})
	}
}
