// Package opsweb is the transfers service's operator endpoints (scope
// operacoes), for the console: one transfer with its client, an account's
// transfers, newest first, in pages, a transfer's refunds, and the results held because their
// transfer was unknown, which an operator applies (against the ledger's
// own record of the transfer, read from the ledger) or discards, audited.
package opsweb

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// Page is the body of GET /ops/contas/{id}/transferencias.
type Page struct {
	Transferencias []opsapi.OperatorTransfer `json:"transferencias"`
	// Proxima is the cursor of the next page (query "apos"); empty on the
	// last page.
	Proxima string `json:"proxima,omitempty"`
}

// Page sizes of the account listing.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Store is what the operator routes read and change (postgres.Store).
type Store interface {
	HeldStore
	// Get returns the transfer with its client and request id, or
	// transfer.ErrNotFound.
	Get(ctx context.Context, id uuid.UUID) (transfer.Transfer, error)
	// ByAccount returns at most limit transfers from or to account, newest
	// first, after the transfer created at after with id afterID when
	// after is not nil.
	ByAccount(ctx context.Context, account string, after *time.Time, afterID *uuid.UUID, limit int) ([]transfer.Transfer, error)
	// RefundsOf returns the transfer's refunds, oldest first.
	RefundsOf(ctx context.Context, transferID uuid.UUID) ([]transfer.Refund, error)
}

// Routes returns the transfers service's operator routes on store; a held
// result is applied against ledger's record.
func Routes(store Store, ledger Ledger, log *slog.Logger) []auth.Route {
	h := &handler{store: store, log: log}
	return append([]auth.Route{
		{Method: http.MethodGet, Pattern: "/ops/transferencias/{id}", Scope: auth.ScopeOperations,
			Handler: opsapi.GetByID(log, "transfer id",
				// store is read at request time: routes of a nil store can be listed.
				func(ctx context.Context, id uuid.UUID) (transfer.Transfer, error) { return store.Get(ctx, id) },
				func(_ uuid.UUID, t transfer.Transfer) any { return fromTransfer(t) })},
		{Method: http.MethodGet, Pattern: "/ops/transferencias/{id}/estornos", Scope: auth.ScopeOperations,
			Handler: opsapi.GetByID(log, "transfer id",
				func(ctx context.Context, id uuid.UUID) ([]transfer.Refund, error) { return store.RefundsOf(ctx, id) },
				func(_ uuid.UUID, rs []transfer.Refund) any {
					out := opsapi.Refunds{Estornos: make([]opsapi.Refund, 0, len(rs))}
					for _, e := range rs {
						out.Estornos = append(out.Estornos, RefundView(e))
					}
					return out
				})},
		{Method: http.MethodGet, Pattern: "/ops/contas/{id}/transferencias", Scope: auth.ScopeOperations, Handler: h.byAccount},
	}, heldRoutes(store, ledger, log)...)
}

type handler struct {
	store Store
	log   *slog.Logger
}

func (h *handler) byAccount(w http.ResponseWriter, r *http.Request) {
	account, err := httpapi.PathParam(r, "id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if !validAccount(account) {
		httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.InvalidID, "an account id is 1 to 32 of A-Z a-z 0-9 . _ -"))
		return
	}
	v, given, err := httpapi.SearchParam(r, "limite")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	limit, err := pageLimit(v, given)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var after *time.Time
	var afterID *uuid.UUID
	if v, _, err = httpapi.SearchParam(r, "apos"); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if v != "" {
		at, id, ok := decodeCursor(v)
		if !ok {
			httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Validation, "apos is not a cursor of this listing"))
			return
		}
		after, afterID = &at, &id
	}
	ts, err := h.store.ByAccount(r.Context(), account, after, afterID, limit+1)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := Page{Transferencias: make([]opsapi.OperatorTransfer, 0, len(ts))}
	for _, t := range ts {
		out.Transferencias = append(out.Transferencias, fromTransfer(t))
	}
	if len(ts) > limit {
		out.Transferencias = out.Transferencias[:limit]
		last := ts[limit-1]
		out.Proxima = encodeCursor(last.CreatedAt, last.ID.String())
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// RefundView is e as every view of a refund shows it, the public one
// included.
func RefundView(e transfer.Refund) opsapi.Refund {
	return opsapi.Refund{ID: e.ID.String(), TransferenciaID: e.TransferID.String(), ValorEmCentavos: e.AmountCents,
		Status: string(e.Status), Motivo: e.Reason, CriadoEm: opsapi.Time(e.CreatedAt), AtualizadoEm: opsapi.Time(e.UpdatedAt)}
}

func validAccount(s string) bool { return accountShape.MatchString(s) }

// accountShape is the shape of an account id (CONTRACTS.md section 2).
var accountShape = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// A cursor is the creation time and id of the last transfer of a page.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id))
}

func decodeCursor(s string) (time.Time, uuid.UUID, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, uuid.Nil, false
	}
	ts, rawID, ok := strings.Cut(string(b), "|")
	if !ok {
		return time.Time{}, uuid.Nil, false
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, uuid.Nil, false
	}
	id, ok := httpapi.ParseUUID(rawID)
	return at, id, ok
}

// pageLimit is the page size of the value v of a "limite" parameter:
// DefaultLimit when it was not given, else an integer from 1 to MaxLimit
// (a validation error otherwise).
func pageLimit(v string, given bool) (int, error) {
	if !given {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, errkind.Errorf(errkind.Validation, "limite must be an integer from 1 to %d", MaxLimit)
	}
	return n, nil
}
