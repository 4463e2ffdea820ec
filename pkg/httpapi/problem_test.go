package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// A database that refuses writes because it is a standby (25006), that is
// shutting down (57P01) or not accepting connections yet (57P03) is an
// outage: the client is told 503 with Retry-After and retries the same
// request; any other database error stays a 500.
func TestWriteErrorStandbyIsUnavailable(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		code string
		want int
	}{
		{"25006", http.StatusServiceUnavailable},
		{"57P01", http.StatusServiceUnavailable},
		{"57P03", http.StatusServiceUnavailable},
		{"22P02", http.StatusInternalServerError},
	} {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/transferencias", nil)
			err := fmt.Errorf("insert transfer: %w", &pgconn.PgError{Code: tt.code, Message: "cannot execute INSERT in a read-only transaction"})
			httpapi.WriteError(rec, req, log, err)
			if rec.Code != tt.want {
				t.Errorf("SQLSTATE %s: status %d, want %d", tt.code, rec.Code, tt.want)
			}
			if got := rec.Header().Get("Retry-After"); (tt.want == http.StatusServiceUnavailable) != (got != "") {
				t.Errorf("SQLSTATE %s: Retry-After %q", tt.code, got)
			}
		})
	}
}

// TestEveryKindAnswersItsProblem: each kind, shared or a service's own,
// is answered with the status, type and title the API documents
// (CONTRACTS.md, docs/api.md), its detail and fields as the error says,
// and Retry-After where the kind carries one; an error without a kind,
// or of a kind the table does not hold, is a 500 that tells nothing of
// its cause.
func TestEveryKindAnswersItsProblem(t *testing.T) {
	t.Parallel()
	const base = "https://paysuite.dev/problems/"
	own := errkind.Refine(errkind.Validation, "deposit-over-ceiling", "Deposit over the ceiling of one deposit")
	fields := []errkind.FieldError{{Field: "valorEmCentavos", Message: "must be at most 10"}}
	for _, tt := range []struct {
		name       string
		err        error
		want       httpapi.Problem
		retryAfter string
	}{
		{"malformed", errkind.Errorf(errkind.Malformed, "d"), httpapi.Problem{Type: base + "malformed-request", Title: "Malformed request", Status: 400, Detail: "d"}, ""},
		{"invalid key", errkind.Errorf(errkind.InvalidKey, "d"), httpapi.Problem{Type: base + "invalid-idempotency-key", Title: "Missing or invalid Idempotency-Key", Status: 400, Detail: "d"}, ""},
		{"invalid id", errkind.Errorf(errkind.InvalidID, "d"), httpapi.Problem{Type: base + "invalid-id", Title: "Invalid id", Status: 400, Detail: "d"}, ""},
		{"unauthorized", errkind.Errorf(errkind.Unauthorized, "d"), httpapi.Problem{Type: base + "unauthorized", Title: "Unauthorized", Status: 401, Detail: "d"}, ""},
		{"forbidden", errkind.Errorf(errkind.Forbidden, "d"), httpapi.Problem{Type: base + "insufficient-scope", Title: "Insufficient scope", Status: 403, Detail: "d"}, ""},
		{"not found", errkind.Errorf(errkind.NotFound, "d"), httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "d"}, ""},
		{"method", errkind.Errorf(errkind.MethodNotAllowed, "d"), httpapi.Problem{Type: base + "method-not-allowed", Title: "Method not allowed", Status: 405, Detail: "d"}, ""},
		{"timeout", errkind.Errorf(errkind.Timeout, "d"), httpapi.Problem{Type: base + "request-timeout", Title: "Request timeout", Status: 408, Detail: "d"}, ""},
		{"in progress", errkind.Errorf(errkind.InProgress, "d"), httpapi.Problem{Type: base + "request-in-progress", Title: "Request in progress", Status: 409, Detail: "d"}, "1"},
		{"conflict", errkind.Errorf(errkind.Conflict, "d"), httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "d"}, ""},
		{"too large", errkind.Errorf(errkind.TooLarge, "d"), httpapi.Problem{Type: base + "payload-too-large", Title: "Payload too large", Status: 413, Detail: "d"}, ""},
		{"media", errkind.Errorf(errkind.UnsupportedMedia, "d"), httpapi.Problem{Type: base + "unsupported-media-type", Title: "Unsupported media type", Status: 415, Detail: "d"}, ""},
		{"validation", &errkind.Error{Kind: errkind.Validation, Detail: "d", Fields: fields}, httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422, Detail: "d", Errors: fields}, ""},
		{"key reused", errkind.Errorf(errkind.KeyReused, "d"), httpapi.Problem{Type: base + "idempotency-key-reused", Title: "Idempotency-Key reused with another payload", Status: 422, Detail: "d"}, ""},
		{"rate limited", errkind.Errorf(errkind.RateLimited, "d"), httpapi.Problem{Type: base + "rate-limited", Title: "Too many requests", Status: 429, Detail: "d"}, ""},
		{"unavailable", errkind.Errorf(errkind.Unavailable, "d"), httpapi.Problem{Type: base + "service-unavailable", Title: "Service unavailable", Status: 503, Detail: "d"}, "2"},
		{"overloaded", errkind.Errorf(errkind.Overloaded, "d"), httpapi.Problem{Type: base + "overloaded", Title: "Overloaded", Status: 503, Detail: "d"}, "2"},
		{"internal", errkind.Errorf(errkind.Internal, "internal error"), httpapi.Problem{Type: base + "internal-error", Title: "Internal error", Status: 500, Detail: "internal error"}, ""},
		{"a service's own kind", &errkind.Error{Kind: own, Detail: "d", Fields: fields},
			httpapi.Problem{Type: base + "deposit-over-ceiling", Title: "Deposit over the ceiling of one deposit", Status: 422, Detail: "d", Errors: fields}, ""},
		{"a wrapped kind tells its own detail", fmt.Errorf("read x: %w", errkind.Errorf(errkind.NotFound, "no x")),
			httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "no x"}, ""},
		{"a Whole kind tells the whole error", fmt.Errorf("%w: the amount differs", &errkind.Error{Kind: errkind.Conflict, Detail: "not the same", Whole: true}),
			httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "not the same: the amount differs"}, ""},
		{"an error without a kind", fmt.Errorf("insert row: %w", errors.New("password=hunter2")),
			httpapi.Problem{Type: base + "internal-error", Title: "Internal error", Status: 500, Detail: "internal error"}, ""},
		{"a kind the table does not hold", &errkind.Error{Kind: errkind.Refine(errkind.Kind{}, "made-up", "Made up"), Detail: "password=hunter2"},
			httpapi.Problem{Type: base + "internal-error", Title: "Internal error", Status: 500, Detail: "internal error"}, ""},
		{"the zero kind", &errkind.Error{Detail: "password=hunter2"},
			httpapi.Problem{Type: base + "internal-error", Title: "Internal error", Status: 500, Detail: "internal error"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/things", nil)
			httpapi.WriteError(rec, req, slog.New(slog.DiscardHandler), tt.err)
			var got httpapi.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			tt.want.Instance = "/things"
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problem mismatch (-want +got):\n%s", diff)
			}
			if rec.Code != tt.want.Status || rec.Header().Get("Content-Type") != "application/problem+json" ||
				rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Retry-After") != tt.retryAfter {
				t.Errorf("status %d, headers %v; want %d, problem+json, no-store, Retry-After %q", rec.Code, rec.Header(), tt.want.Status, tt.retryAfter)
			}
			if strings.Contains(rec.Body.String(), "hunter2") {
				t.Errorf("the body tells the cause: %s", rec.Body)
			}
		})
	}
}

// A Retry-After the handler set stays: the admission's jittered one on an
// overloaded answer, for one.
func TestWriteErrorKeepsTheHandlersRetryAfter(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "7")
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/things", nil)
	httpapi.WriteError(rec, req, slog.New(slog.DiscardHandler), errkind.Errorf(errkind.Overloaded, "behind"))
	if got := rec.Header().Get("Retry-After"); rec.Code != http.StatusServiceUnavailable || got != "7" {
		t.Errorf("%d, Retry-After %q; want 503 and 7", rec.Code, got)
	}
}
