package opsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/opsapi"
)

// GetByID answers the view of the record read with the path's UUID, 404
// with its message for a not-found error, the error's own status for
// another kind, 500 for an error without a kind, and 400 naming the
// parameter for an id that is not a UUID.
func TestGetByID(t *testing.T) {
	t.Parallel()
	known, missing, plain, broken := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	read := func(_ context.Context, id uuid.UUID) (string, error) {
		switch id {
		case known:
			return "found", nil
		case missing:
			return "", errkind.Errorf(errkind.NotFound, "nothing has this id")
		case plain:
			return "", errors.New("no such record")
		}
		return "", errkind.Errorf(errkind.Conflict, "busy")
	}
	view := func(id uuid.UUID, rec string) any { return map[string]string{"id": id.String(), "rec": rec} }
	r := chi.NewRouter()
	r.Get("/x/{id}", opsapi.GetByID(slog.New(slog.DiscardHandler), "record id", read, view))
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("GET %s: body %q: %v", path, rec.Body, err)
		}
		return rec.Code, body
	}
	if code, body := get("/x/" + known.String()); code != http.StatusOK || body["id"] != known.String() || body["rec"] != "found" {
		t.Errorf("known: %d %v", code, body)
	}
	if code, body := get("/x/" + missing.String()); code != http.StatusNotFound || body["detail"] != "nothing has this id" {
		t.Errorf("missing: %d %v, want 404 with its message", code, body)
	}
	// An error without a kind is internal.
	if code, _ := get("/x/" + plain.String()); code != http.StatusInternalServerError {
		t.Errorf("an error without a kind: %d, want 500", code)
	}
	if code, _ := get("/x/" + broken.String()); code != http.StatusConflict {
		t.Errorf("a problem from read: %d, want 409", code)
	}
	if code, body := get("/x/123"); code != http.StatusBadRequest || body["detail"] == "" {
		t.Errorf("not a UUID: %d %v, want 400", code, body)
	}
}
