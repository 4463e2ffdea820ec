package web

import (
	"encoding/json"
	"net/http"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// captureRequest is the optional body of POST /transferencias/{id}/captura.
type captureRequest struct {
	ValorEmCentavos *int64 `json:"valorEmCentavos"`
}

// capture and cancel are audited writes: a hold's commands (CONTRACTS.md
// section 9).
func (h *Handler) capture(w http.ResponseWriter, r *http.Request) {
	auth.Audited(h.log, "transfer.capture", func(w http.ResponseWriter, r *http.Request, p auth.Principal, audit *auth.AuditRecord) {
		h.command(w, r, p, audit, transfer.CommandCapture)
	})(w, r)
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	auth.Audited(h.log, "transfer.cancel", func(w http.ResponseWriter, r *http.Request, p auth.Principal, audit *auth.AuditRecord) {
		h.command(w, r, p, audit, transfer.CommandCancel)
	})(w, r)
}

// command takes a capture or a cancellation: the Idempotency-Key names the
// command, the path the transfer. A capture's body is optional; a
// cancellation's, when sent, must be an empty object. The 202 (and each
// replay) carries the transfer as it was when the command was accepted.
func (h *Handler) command(w http.ResponseWriter, r *http.Request, p auth.Principal, audit *auth.AuditRecord, kind transfer.CommandKind) {
	id, key, ok := h.commandKeys(w, r, audit, "command_id")
	if !ok {
		return
	}
	var in captureRequest
	var into any = &in
	if kind == transfer.CommandCancel {
		into = nil
	}
	if err := decodeOptional(w, r, into); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	resp, replayed, err := h.svc.Command(r.Context(), transfer.CommandSubmission{
		ID: key, TransferID: id, Kind: kind, AmountCents: in.ValorEmCentavos, Client: p.Subject,
		Render: func(t transfer.Transfer) (transfer.Response, error) {
			b, err := json.Marshal(view(t))
			return transfer.Response{StatusCode: http.StatusAccepted, Body: append(b, '\n')}, err
		},
	})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	writeStored(w, resp, replayed, "")
}

// decodeOptional reads a command's or a refund's body into in: none at
// all (no Content-Type, no bytes) is an empty one; otherwise strict JSON,
// as POST /transferencias, with no field when in is nil (a cancellation).
func decodeOptional(w http.ResponseWriter, r *http.Request, in any) error {
	if r.ContentLength <= 0 && len(r.Header.Values("Content-Type")) == 0 {
		return nil
	}
	body, err := httpapi.ReadJSONBody(w, r)
	if err != nil || len(body) == 0 {
		return err
	}
	if in == nil {
		return httpapi.DecodeStrict(body, &struct{}{})
	}
	return httpapi.DecodeStrict(body, in)
}

// commandKeys reads a command's or a refund's transfer id (the path) and
// its Idempotency-Key, and names both in audit (the key as keyName); on
// an error it writes the problem and returns false.
func (h *Handler) commandKeys(w http.ResponseWriter, r *http.Request, audit *auth.AuditRecord, keyName string) (id, key uuid.UUID, ok bool) {
	id, err := httpapi.PathUUID(r, "id", "transfer id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return id, key, false
	}
	audit.Resource("transfer_id", id)
	key, err = httpapi.IdempotencyKey(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return id, key, false
	}
	audit.Resource(keyName, key)
	return id, key, true
}

// writeStored writes resp, an idempotent request's answer (the stored one
// when replayed, which says so), with location when not empty.
func writeStored(w http.ResponseWriter, resp transfer.Response, replayed bool, location string) {
	if replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if location != "" {
		w.Header().Set("Location", location)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(resp.Body)
}
