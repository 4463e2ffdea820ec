package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
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
	log := slog.New(slog.DiscardHandler)
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

// documented is every shared kind's problem as CONTRACTS.md and docs/api.md
// give it: status, Retry-After ("-": none), type, title; in the order of
// sharedKinds.
const documented = `
400 - malformed-request Malformed request
400 - invalid-idempotency-key Missing or invalid Idempotency-Key
400 - invalid-id Invalid id
401 - unauthorized Unauthorized
403 - insufficient-scope Insufficient scope
404 - not-found Not found
405 - method-not-allowed Method not allowed
408 - request-timeout Request timeout
409 1 request-in-progress Request in progress
409 - conflict Conflict
413 - payload-too-large Payload too large
415 - unsupported-media-type Unsupported media type
422 - validation-failed Validation failed
422 - idempotency-key-reused Idempotency-Key reused with another payload
429 - rate-limited Too many requests
503 2 service-unavailable Service unavailable
503 2 overloaded Overloaded
500 - internal-error Internal error`

var sharedKinds = []errkind.Kind{errkind.Malformed, errkind.InvalidKey, errkind.InvalidID, errkind.Unauthorized,
	errkind.Forbidden, errkind.NotFound, errkind.MethodNotAllowed, errkind.Timeout, errkind.InProgress, errkind.Conflict,
	errkind.TooLarge, errkind.UnsupportedMedia, errkind.Validation, errkind.KeyReused, errkind.RateLimited,
	errkind.Unavailable, errkind.Overloaded, errkind.Internal}

type kindCase struct {
	name       string
	err        error
	want       httpapi.Problem
	retryAfter string
}

// TestEveryKindAnswersItsProblem: each kind, shared or a service's own,
// is answered with its documented status, type and title, its detail and
// fields as the error says, and Retry-After where the kind carries one;
// an error without a kind, or of a kind the table does not hold, is a 500
// that tells nothing of its cause.
func TestEveryKindAnswersItsProblem(t *testing.T) {
	t.Parallel()
	const base = "https://paysuite.dev/problems/"
	var cases []kindCase
	rows := strings.Split(strings.TrimSpace(documented), "\n")
	if len(rows) != len(sharedKinds) {
		t.Fatalf("%d documented problems for %d shared kinds", len(rows), len(sharedKinds))
	}
	for i, row := range rows {
		f := strings.SplitN(row, " ", 4)
		status, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, kindCase{f[2], &errkind.Error{Kind: sharedKinds[i], Detail: "d"},
			httpapi.Problem{Type: base + f[2], Title: f[3], Status: status, Detail: "d"}, strings.Trim(f[1], "-")})
	}
	own := errkind.Refine(errkind.Validation, "deposit-over-ceiling", "Deposit over the ceiling of one deposit")
	fields := []errkind.FieldError{{Field: "valorEmCentavos", Message: "must be at most 10"}}
	internal := httpapi.Problem{Type: base + "internal-error", Title: "Internal error", Status: 500, Detail: "internal error"}
	cases = append(cases, []kindCase{
		{"fields", &errkind.Error{Kind: errkind.Validation, Detail: "d", Fields: fields},
			httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422, Detail: "d", Errors: fields}, ""},
		{"a service's own kind", &errkind.Error{Kind: own, Detail: "d", Fields: fields},
			httpapi.Problem{Type: base + "deposit-over-ceiling", Title: "Deposit over the ceiling of one deposit", Status: 422, Detail: "d", Errors: fields}, ""},
		{"a wrapped kind tells its own detail", fmt.Errorf("read x: %w", errkind.Errorf(errkind.NotFound, "no x")),
			httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "no x"}, ""},
		{"a Whole kind tells the whole error", fmt.Errorf("%w: the amount differs", &errkind.Error{Kind: errkind.Conflict, Detail: "not the same", Whole: true}),
			httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "not the same: the amount differs"}, ""},
		{"an error without a kind", fmt.Errorf("insert row: %w", errors.New("password=hunter2")), internal, ""},
		{"a kind the table does not hold", &errkind.Error{Kind: errkind.Refine(errkind.Kind{}, "made-up", "Made up"), Detail: "password=hunter2"}, internal, ""},
		{"the zero kind", &errkind.Error{Detail: "password=hunter2"}, internal, ""},
	}...)
	for _, tt := range cases {
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

// overloaded is a 503 of its own type, distinct from an outage's, and
// keeps the Retry-After its writer sized; an outage's 503 gets the fixed
// one.
func TestOverloadedIsDistinctFromAnOutage(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	write := func(retry string, err error) (*httptest.ResponseRecorder, httpapi.Problem) {
		w := httptest.NewRecorder()
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		httpapi.WriteError(w, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/transferencias", nil), log, err)
		var p httpapi.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		return w, p
	}
	w, p := write("7", errkind.Errorf(errkind.Overloaded, "behind"))
	if w.Code != http.StatusServiceUnavailable || p.Type != "https://paysuite.dev/problems/overloaded" || w.Header().Get("Retry-After") != "7" {
		t.Errorf("overloaded: %d %+v Retry-After %q; want 503, type .../overloaded, Retry-After 7", w.Code, p, w.Header().Get("Retry-After"))
	}
	w, p = write("", fmt.Errorf("insert: %w", syscall.ECONNREFUSED))
	if w.Code != http.StatusServiceUnavailable || p.Type != "https://paysuite.dev/problems/service-unavailable" || w.Header().Get("Retry-After") != httpapi.RetryAfterSeconds {
		t.Errorf("outage: %d %+v Retry-After %q", w.Code, p, w.Header().Get("Retry-After"))
	}
}
