package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/validate"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// WithHistory makes h answer GET /transferencias from l. It returns h.
func (h *Handler) WithHistory(l *transfer.History) *Handler {
	h.history = l
	return h
}

// historyResponse is the body of GET /transferencias: a page of
// transfers, each as GET /transferencias/{id} shows it, and the cursor of
// the next page (null on the last).
type historyResponse struct {
	Itens         []transferResponse `json:"itens"`
	ProximoCursor *string            `json:"proximoCursor"`
}

// historyParams are the query parameters GET /transferencias takes; any
// other is refused, so that a misspelt filter is not silently ignored.
var historyParams = []string{"conta", "status", "desde", "ate", "limite", "cursor", "cliente"}

// list is GET /transferencias (CONTRACTS.md section 11).
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	p, ok := auth.FromContext(r.Context())
	if !ok {
		auth.Unauthenticated(w, r, h.log)
		return
	}
	f, limit, cursor, err := historyQuery(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if h.history == nil {
		httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Internal, "no listing configured"))
		return
	}
	page, err := h.history.List(r.Context(), transfer.Viewer{Client: p.Subject, All: p.Operator()}, f, limit, cursor)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := historyResponse{Itens: make([]transferResponse, 0, len(page.Items))}
	for _, t := range page.Items {
		out.Itens = append(out.Itens, view(t))
	}
	if page.Next != "" {
		out.ProximoCursor = &page.Next
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// historyQuery reads the listing's query parameters: every one at most
// once, in its shape; each error is a 400 naming its parameter.
func historyQuery(r *http.Request) (f transfer.Filter, limit int, cursor string, err error) {
	for name := range r.URL.Query() {
		if !slices.Contains(historyParams, name) {
			return f, 0, "", param(name, "is not a parameter of this listing (conta, status, desde, ate, limite, cursor, cliente)")
		}
	}
	get := func(name string) string {
		if err != nil {
			return ""
		}
		v, given, gerr := httpapi.SearchParam(r, name)
		switch {
		case gerr != nil:
			err = gerr
		case given && v == "" && slices.Contains(nonEmptyParams, name):
			// Given empty, a typed parameter is malformed, never absent.
			err = param(name, "must not be empty; leave it out for no filter")
		}
		return v
	}
	account, statuses, since, until, lim, cursor, client :=
		get("conta"), get("status"), get("desde"), get("ate"), get("limite"), get("cursor"), get("cliente")
	if err != nil {
		return f, 0, "", err
	}
	if account != "" && !validate.AccountID(account) {
		return f, 0, "", param("conta", validate.AccountRule)
	}
	f.Account, f.Client = account, client
	if len(client) > transfer.MaxHolderLen {
		return f, 0, "", param("cliente", "must be a client id of at most 255 bytes")
	}
	if statuses != "" {
		for _, s := range strings.Split(statuses, ",") {
			if !slices.Contains(transfer.Statuses, transfer.Status(s)) {
				return f, 0, "", param("status", "must be one or more of PENDENTE, RESERVADA, LIQUIDADA, REJEITADA, CANCELADA, EXPIRADA, separated by commas")
			}
			f.Statuses = append(f.Statuses, transfer.Status(s))
		}
	}
	if f.Since, err = instant("desde", since); err != nil {
		return f, 0, "", err
	}
	if f.Until, err = instant("ate", until); err != nil {
		return f, 0, "", err
	}
	limit = transfer.DefaultHistoryLimit
	if lim != "" {
		if limit, err = strconv.Atoi(lim); err != nil || limit < 1 || limit > transfer.MaxHistoryLimit {
			return f, 0, "", param("limite", "must be an integer from 1 to "+strconv.Itoa(transfer.MaxHistoryLimit))
		}
	}
	return f, limit, cursor, nil
}

// nonEmptyParams are the listing's parameters whose shape an empty value
// breaks (an account id, an instant, an integer).
var nonEmptyParams = []string{"conta", "desde", "ate", "limite"}

// instant is the RFC 3339 time v of parameter name, the zero time when v
// is empty.
func instant(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.Year() < 1 || t.Year() > 9998 {
		return time.Time{}, param(name, "must be an RFC 3339 time, such as 2026-11-29T22:00:00Z")
	}
	return t, nil
}

// param is the 400 of query parameter name, which message explains.
func param(name, message string) error { return transfer.BadParam(name, message) }
