package web

import (
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/httpapi"
)

// DepositRecord is one deposit as the operator listing shows it: who
// minted how much of which currency into which account, in which request.
type DepositRecord struct {
	ID          uuid.UUID `json:"id"`
	AccountID   string    `json:"contaId"`
	Currency    string    `json:"moeda"`
	AmountCents int64     `json:"valorEmCentavos"`
	ClientID    string    `json:"cliente"`
	// RequestID is empty for a deposit made before request ids were
	// recorded.
	RequestID string    `json:"requestId"`
	CreatedAt time.Time `json:"criadoEm"`
}

// DepositsPage is the body of GET /ops/depositos: the newest deposits,
// newest first.
type DepositsPage struct {
	Items []DepositRecord `json:"itens"`
}

// deposits serves GET /ops/depositos?limite=N (scope operacoes): the
// newest N deposits (default 50, at most 200).
func (h *Handler) deposits(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	ds, err := h.svc.Deposits(r.Context(), limit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	page := DepositsPage{Items: make([]DepositRecord, len(ds))}
	for i, d := range ds {
		page.Items[i] = DepositRecord{ID: d.ID, AccountID: d.AccountID, Currency: d.Currency, AmountCents: d.AmountCents,
			ClientID: d.ClientID, RequestID: d.RequestID, CreatedAt: d.CreatedAt.UTC()}
	}
	httpapi.WriteJSON(w, http.StatusOK, page)
}
