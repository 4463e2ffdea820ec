package opsapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/httpapi"
)

// GetByID is the handler of an operator GET of one record by the UUID in
// its {id} path parameter: 400 naming what when the parameter is not a
// UUID; otherwise read with it, the error as httpapi.WriteError writes it
// when read fails (a not-found error of the domain carries its kind), and
// 200 with the JSON of view(id, record) on success.
func GetByID[R any](log *slog.Logger, what string, read func(context.Context, uuid.UUID) (R, error),
	view func(uuid.UUID, R) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := httpapi.PathUUID(r, "id", what)
		if err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		rec, err := read(r.Context(), id)
		if err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, view(id, rec))
	}
}
