package web

import (
	"encoding/json"
	"net/http"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/opsweb"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// refundAccepted is the body of a refund's 202.
type refundAccepted struct {
	ID              string `json:"id"`
	TransferenciaID string `json:"transferenciaId"`
	Status          string `json:"status"`
}

// refund is an audited write (CONTRACTS.md section 10): the
// Idempotency-Key names the refund, the path the transfer; the body
// (valorEmCentavos) is optional, as a capture's.
func (h *Handler) refund(w http.ResponseWriter, r *http.Request) {
	auth.Audited(h.log, "transfer.refund", h.refundAs)(w, r)
}

func (h *Handler) refundAs(w http.ResponseWriter, r *http.Request, p auth.Principal, audit *auth.AuditRecord) {
	id, key, ok := h.commandKeys(w, r, audit, "refund_id")
	if !ok {
		return
	}
	var in captureRequest // the same optional valorEmCentavos
	if err := decodeOptional(w, r, &in); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	first, err := json.Marshal(refundAccepted{ID: key.String(), TransferenciaID: id.String(), Status: string(transfer.RefundPending)})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	resp, replayed, err := h.svc.Refund(r.Context(), transfer.RefundSubmission{
		ID: key, TransferID: id, AmountCents: in.ValorEmCentavos, Client: p.Subject, Operator: p.Operator(),
		Response: transfer.Response{StatusCode: http.StatusAccepted, Body: append(first, '\n')},
	})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	writeStored(w, resp, replayed, "/transferencias/"+id.String()+"/estornos/"+key.String())
}

func (h *Handler) getRefund(w http.ResponseWriter, r *http.Request) {
	v, id, ok := h.readerOf(w, r)
	if !ok {
		return
	}
	refundID, err := httpapi.PathUUID(r, "estornoId", "refund id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	e, err := h.svc.GetRefund(r.Context(), id, refundID, v)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, opsweb.RefundView(e))
}
