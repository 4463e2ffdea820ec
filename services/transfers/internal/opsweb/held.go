package opsweb

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// HeldStore is what the held-results routes need (postgres.Store).
type HeldStore interface {
	ListHeld(ctx context.Context, limit int) ([]transfer.HeldResult, error)
	GetHeld(ctx context.Context, eventID uuid.UUID) (transfer.HeldResult, error)
	ApplyHeld(ctx context.Context, eventID uuid.UUID, ledger transfer.Settlement, res transfer.Resolution) (transfer.Transfer, error)
	DiscardHeld(ctx context.Context, eventID uuid.UUID, res transfer.Resolution) error
}

// Ledger reads the ledger's own record of a transfer, as the operator
// whose bearer token it is given (ledgerhttp.Client). Errors:
// transfer.ErrNoSettlement when the ledger never decided the transfer;
// any other error means the record could not be read.
type Ledger interface {
	Settlement(ctx context.Context, bearer string, id uuid.UUID) (transfer.Settlement, error)
}

// Paths of the held-results routes.
const (
	PathHeld        = opsapi.PathHeld
	PathHeldOne     = PathHeld + "/{id}"
	PathHeldApply   = PathHeldOne + "/aplicar"
	PathHeldDiscard = PathHeldOne + "/descartar"
)

// heldRoutes are the routes of held results: list, one, apply (against
// ledger's record), discard.
func heldRoutes(store HeldStore, ledger Ledger, log *slog.Logger) []auth.Route {
	h := &heldHandler{store: store, ledger: ledger, log: log}
	return []auth.Route{
		{Method: http.MethodGet, Pattern: PathHeld, Scope: auth.ScopeOperations, Handler: h.list},
		{Method: http.MethodGet, Pattern: PathHeldOne, Scope: auth.ScopeOperations,
			Handler: opsapi.GetByID(log, "event id",
				// store is read at request time: routes of a nil store can be listed.
				func(ctx context.Context, id uuid.UUID) (transfer.HeldResult, error) { return store.GetHeld(ctx, id) },
				func(_ uuid.UUID, x transfer.HeldResult) any { return toHeld(x) })},
		{Method: http.MethodPost, Pattern: PathHeldApply, Scope: auth.ScopeOperations,
			Handler: auth.Audited(log, "held_result.apply", h.apply)},
		{Method: http.MethodPost, Pattern: PathHeldDiscard, Scope: auth.ScopeOperations,
			Handler: auth.Audited(log, "held_result.discard", h.discard)},
	}
}

type heldHandler struct {
	store  HeldStore
	ledger Ledger
	log    *slog.Logger
}

func toHeld(h transfer.HeldResult) opsapi.Held {
	out := opsapi.Held{EventoID: h.EventID.String(), Tipo: h.Type, TransferenciaID: h.TransferID.String(),
		Status: string(h.Status), Motivo: h.Reason, Payload: h.Payload, RecebidoEm: opsapi.Time(h.ReceivedAt),
		Resolucao: h.Resolution, ResolvidoPor: h.ResolvedBy, MotivoResolucao: h.Note}
	if !json.Valid(out.Payload) {
		out.Payload = json.RawMessage("null")
	}
	if h.Resolution != "" {
		out.ResolvidoEm = opsapi.Time(h.ResolvedAt)
	}
	if h.Transfer != nil {
		t := fromTransfer(*h.Transfer)
		out.Transferencia = &t
	}
	return out
}

// View is t as every view of a transfer shows it, the public one included.
func View(t transfer.Transfer) opsapi.Transfer {
	v := opsapi.Transfer{ID: t.ID.String(), ContaOrigem: t.Source, ContaDestino: t.Destination,
		ValorEmCentavos: t.AmountCents, Moeda: t.Currency, Status: string(t.Status), Captura: t.Capture,
		ValorLiquidadoEmCentavos: t.SettledCents, ValorEstornadoEmCentavos: t.RefundedCents}
	if t.Status == transfer.StatusRejected {
		v.Motivo = t.Reason
	}
	if !t.ExpiresAt.IsZero() {
		v.ExpiraEm = opsapi.Time(t.ExpiresAt)
	}
	return v
}

func fromTransfer(t transfer.Transfer) opsapi.OperatorTransfer {
	return opsapi.OperatorTransfer{
		Transfer:      View(t),
		ClienteID:     t.Client,
		RequestID:     t.RequestID,
		TransferTimes: opsapi.TransferTimes{CriadaEm: opsapi.Time(t.CreatedAt), AtualizadaEm: opsapi.Time(t.UpdatedAt)},
	}
}

func (h *heldHandler) list(w http.ResponseWriter, r *http.Request) {
	v := httpapi.FirstSearchParam(r, "limite")
	limit, err := pageLimit(v, v != "")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	rs, err := h.store.ListHeld(r.Context(), limit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := opsapi.HeldList{Resultados: make([]opsapi.Held, 0, len(rs))}
	for _, x := range rs {
		out.Resultados = append(out.Resultados, toHeld(x))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// apply applies the ledger's outcome to the transfer with the held
// result's id, reading the ledger's own record of that id (with the
// operator's token) and applying it only when the transfer row and the
// held row match it in every field (transfer.CheckSettlement). The
// operator names the held result (the path) and the decision (this
// route), and may give a reason (motivo); any other parameter is refused,
// so that nothing the caller sends can stand for the ledger's record.
func (h *heldHandler) apply(w http.ResponseWriter, r *http.Request, p auth.Principal, a *auth.AuditRecord) {
	id, ok := h.eventID(w, r, a)
	if !ok || !h.onlyReason(w, r) || !h.named(w, r, p) {
		return
	}
	held, err := h.store.GetHeld(r.Context(), id)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	a.Resource("transfer_id", held.TransferID)
	if held.Resolution != "" {
		httpapi.WriteError(w, r, h.log, transfer.ErrHeldResolved)
		return
	}
	// The middleware verified this token; the ledger checks its scope
	// again.
	bearer, _ := auth.BearerToken(r)
	ledger, err := h.ledger.Settlement(r.Context(), bearer, held.TransferID)
	if err != nil && !errors.Is(err, transfer.ErrNoSettlement) {
		h.log.WarnContext(r.Context(), "read the ledger's record failed", "transfer_id", held.TransferID, "err", err)
		err = errkind.Errorf(errkind.Unavailable, "the ledger's record of this transfer could not be read: nothing was changed; try again")
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	t, err := h.store.ApplyHeld(r.Context(), id, ledger, transfer.Resolution{Operator: p.Subject, Note: reason(httpapi.FirstSearchParam(r, "motivo"))})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, fromTransfer(t))
}

func (h *heldHandler) discard(w http.ResponseWriter, r *http.Request, p auth.Principal, a *auth.AuditRecord) {
	id, ok := h.eventID(w, r, a)
	if !ok || !h.onlyReason(w, r) || !h.named(w, r, p) {
		return
	}
	if err := h.store.DiscardHeld(r.Context(), id, transfer.Resolution{Operator: p.Subject, Note: reason(httpapi.FirstSearchParam(r, "motivo"))}); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	x, err := h.store.GetHeld(r.Context(), id)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, toHeld(x))
}

// eventID reads the held result's event id from the path and records it
// on a; false when it answered the request instead (400).
func (h *heldHandler) eventID(w http.ResponseWriter, r *http.Request, a *auth.AuditRecord) (uuid.UUID, bool) {
	id, err := httpapi.PathUUID(r, "id", "event id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return uuid.Nil, false
	}
	a.Resource("evento_id", id)
	return id, true
}

// onlyReason reports whether the query carries no parameter but the
// operator's reason (motivo); false when it answered the request instead
// (400 naming the others).
func (h *heldHandler) onlyReason(w http.ResponseWriter, r *http.Request) bool {
	var others []string
	for k := range r.URL.Query() {
		if k != "motivo" {
			others = append(others, k)
		}
	}
	if len(others) == 0 {
		return true
	}
	slices.Sort(others)
	httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Malformed,
		"unknown parameters %s: a resolution names the held result (path) and the decision (aplicar or descartar), with an optional motivo; the ledger's record is read from the ledger",
		strings.Join(others, ", ")))
	return false
}

// named reports whether p names the operator who resolves (a resolution
// records who); false when it answered the request instead (400).
func (h *heldHandler) named(w http.ResponseWriter, r *http.Request, p auth.Principal) bool {
	if p.Subject == "" {
		httpapi.WriteError(w, r, h.log, opsapi.ErrNoOperator)
		return false
	}
	return true
}

// reason bounds an operator's reason to its column's 200 characters.
func reason(s string) string {
	if len(s) > 200 {
		return strings.ToValidUTF8(s[:200], "")
	}
	return s
}
