// Package web is the ledger's HTTP API (CONTRACTS.md sections 2 and 11):
// open accounts, deposit from the funding account, read balances (now or
// at an instant), postings and statements, and list deposits for
// operators.
// Errors are problem+json through pkg/httpapi's one writer; the domain's
// errors carry their kinds.
package web

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// HeaderIdempotencyKey is the deposit's idempotency key (a UUID, also the
// deposit id).
const HeaderIdempotencyKey = httpapi.HeaderIdempotencyKey

// HeaderReplayed marks a response replayed from an earlier request with the
// same key.
const HeaderReplayed = "Idempotent-Replayed"

// Handler serves the accounts API.
type Handler struct {
	svc *ledger.Service
	log *slog.Logger
}

// New returns the handler of svc.
func New(svc *ledger.Service, log *slog.Logger) *Handler {
	return &Handler{svc: svc, log: log}
}

// Table is the accounts API's route table, with the operator listing of
// deposits: each route with the scope it needs (CONTRACTS.md section 8).
func (h *Handler) Table() []auth.Route {
	return []auth.Route{
		{Method: http.MethodPost, Pattern: "/contas", Scope: auth.ScopeAccountsAdmin, Handler: h.openAccount},
		{Method: http.MethodGet, Pattern: "/contas/{id}", Scope: auth.ScopeAccountsRead + " " + auth.ScopeOperations, Handler: h.account},
		{Method: http.MethodPost, Pattern: "/contas/{id}/depositos", Scope: auth.ScopeAccountsDeposit, Handler: h.deposit},
		{Method: http.MethodGet, Pattern: "/contas/{id}/lancamentos", Scope: auth.ScopeAccountsRead + " " + auth.ScopeOperations, Handler: h.postings},
		{Method: http.MethodGet, Pattern: "/contas/{id}/saldo", Scope: auth.ScopeAccountsRead + " " + auth.ScopeOperations, Handler: h.balanceAt},
		{Method: http.MethodGet, Pattern: "/contas/{id}/extrato", Scope: auth.ScopeAccountsRead + " " + auth.ScopeOperations, Handler: h.statement},
		{Method: http.MethodGet, Pattern: "/ops/depositos", Scope: auth.ScopeOperations, Handler: h.deposits},
	}
}

// Routes mounts the API on r, the router of httpapi.NewRouter, whose
// middleware authenticates requests.
func (h *Handler) Routes(r chi.Router) {
	auth.Mount(r, h.log, h.Table())
}

// AccountResponse is an account on the wire. Holder (titular) is additive
// to CONTRACTS.md section 2; absent for an account without one.
type AccountResponse struct {
	ID           string `json:"id"`
	Currency     string `json:"moeda"`
	BalanceCents int64  `json:"saldoEmCentavos"`
	Holder       string `json:"titular,omitempty"`
}

// AccountBalanceResponse is GET /contas/{id}: the account with its
// reserved and available balances (CONTRACTS.md section 9), as the account
// row keeps them.
type AccountBalanceResponse struct {
	AccountResponse
	ReservedCents  int64 `json:"reservadoEmCentavos"`
	AvailableCents int64 `json:"disponivelEmCentavos"`
}

// DepositResponse is a deposit on the wire. BalanceAfterCents, the
// account's balance after the deposit, is there only for the account's
// titular (or an operator): a minting client learns nothing else of an
// account it does not hold.
type DepositResponse struct {
	ID                uuid.UUID `json:"id"`
	AccountID         string    `json:"contaId"`
	AmountCents       int64     `json:"valorEmCentavos"`
	BalanceAfterCents *int64    `json:"saldoEmCentavos,omitempty"`
	CreatedAt         time.Time `json:"criadoEm"`
}

// PostingResponse is a posting on the wire, in /lancamentos and in the
// statement. TransferID holds the deposit id for a deposit's posting, and
// the refunded transfer's id for a refund's, whose RefundID (estornoId)
// is set (nil and absent otherwise). BalanceAfterCents is the account's
// balance right after the posting. A new field goes into postingResponse
// and csvRow.
type PostingResponse struct {
	ID                int64      `json:"id"`
	TransferID        uuid.UUID  `json:"transferenciaId"`
	RefundID          *uuid.UUID `json:"estornoId,omitempty"`
	Direction         string     `json:"tipo"`
	AmountCents       int64      `json:"valorEmCentavos"`
	BalanceAfterCents int64      `json:"saldoAposEmCentavos"`
	CreatedAt         time.Time  `json:"criadoEm"`
}

// PostingsPage is one page of postings, newest first; NextCursor is null on
// the last page.
type PostingsPage struct {
	Items      []PostingResponse `json:"itens"`
	NextCursor *string           `json:"proximoCursor"`
}

type openAccountRequest struct {
	ID       string `json:"id"`
	Currency string `json:"moeda"`
	// Holder is the titular; absent: the calling client.
	Holder *string `json:"titular"`
}

type depositRequest struct {
	AmountCents int64 `json:"valorEmCentavos"`
}

// openAccount and deposit are audited writes that need a principal in the
// request context (pkg/auth).
func (h *Handler) openAccount(w http.ResponseWriter, r *http.Request) {
	auth.Audited(h.log, "account.open", h.openAccountAs)(w, r)
}

func (h *Handler) deposit(w http.ResponseWriter, r *http.Request) {
	auth.Audited(h.log, "account.deposit", h.depositAs)(w, r)
}

func (h *Handler) openAccountAs(w http.ResponseWriter, r *http.Request, p auth.Principal, audit *auth.AuditRecord) {
	var req openAccountRequest
	if !h.decode(w, r, &req) {
		return
	}
	if ledger.ValidAccountID(req.ID) {
		audit.Resource("account_id", req.ID)
	}
	holder := p.Subject
	if req.Holder != nil {
		holder = *req.Holder
	}
	a, outcome, err := h.svc.OpenAccount(r.Context(), req.ID, req.Currency, holder, p.Operator())
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	// A claim gives an account opened before ownership its titular, who
	// may then debit it: it is audited as a claim of its own, with the
	// titular given.
	if outcome == ledger.OpenClaimed {
		audit.Action("account.claim")
		audit.Resource("titular", a.Holder)
	}
	audit.Resource("outcome", outcome.String())
	status := http.StatusOK
	if outcome == ledger.OpenCreated {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/contas/"+url.PathEscape(a.ID))
	httpapi.WriteJSON(w, status, accountResponse(a))
}

func (h *Handler) account(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.PathParam(r, "id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	a, err := h.svc.Account(r.Context(), id, reader(r))
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, AccountBalanceResponse{AccountResponse: accountResponse(a),
		ReservedCents: a.ReservedCents, AvailableCents: a.AvailableCents()})
}

func (h *Handler) depositAs(w http.ResponseWriter, r *http.Request, p auth.Principal, audit *auth.AuditRecord) {
	id, err := httpapi.PathParam(r, "id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if ledger.ValidAccountID(id) {
		audit.Resource("account_id", id)
	}
	key, err := httpapi.IdempotencyKey(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	audit.Resource("deposit_id", key)
	var req depositRequest
	if !h.decode(w, r, &req) {
		return
	}
	d, replayed, err := h.svc.Deposit(r.Context(), ledger.DepositRequest{ID: key, AccountID: id, AmountCents: req.AmountCents,
		ClientID: p.Subject, RequestID: httpapi.RequestIDFrom(r.Context())})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	resp := DepositResponse{ID: d.ID, AccountID: d.AccountID, AmountCents: d.AmountCents, CreatedAt: d.CreatedAt.UTC()}
	if d.BalanceVisibleTo(ledger.Reader{Client: p.Subject, Operator: p.Operator()}) {
		resp.BalanceAfterCents = &d.BalanceAfterCents
	}
	httpapi.WriteJSON(w, http.StatusCreated, resp)
}

func (h *Handler) postings(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.PathParam(r, "id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	limit, err := limitParam(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var before int64
	v, _, err := httpapi.SearchParam(r, "cursor")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if v != "" {
		if before, err = decodeCursor(v); err != nil {
			httpapi.WriteError(w, r, h.log, &errkind.Error{Kind: errkind.Malformed, Detail: "invalid query parameter",
				Fields: []errkind.FieldError{{Field: "cursor", Message: "is not a cursor this API returned"}}})
			return
		}
	}
	ps, more, err := h.svc.Postings(r.Context(), id, before, limit, reader(r))
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	page := PostingsPage{Items: make([]PostingResponse, len(ps))}
	for i, p := range ps {
		page.Items[i] = postingResponse(p)
	}
	if more {
		c := encodeCursor(ps[len(ps)-1].ID)
		page.NextCursor = &c
	}
	httpapi.WriteJSON(w, http.StatusOK, page)
}

// The cursor is opaque to clients: the id of the last posting of a page,
// versioned so that its form can change.
const cursorPrefix = "v1:"

func encodeCursor(lastID int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(lastID, 10)))
}

func decodeCursor(s string) (int64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, fmt.Errorf("decode cursor: %w", err)
	}
	v, ok := strings.CutPrefix(string(raw), cursorPrefix)
	if !ok {
		return 0, errors.New("cursor version")
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, errors.New("cursor position")
	}
	return id, nil
}

// reader is the caller of r as a reader of accounts; a request without a
// principal (which the scope check in front of every route refuses) reads
// nothing.
func reader(r *http.Request) ledger.Reader {
	p, _ := auth.FromContext(r.Context())
	return ledger.Reader{Client: p.Subject, Operator: p.Operator()}
}

func accountResponse(a ledger.Account) AccountResponse {
	return AccountResponse{ID: a.ID, Currency: a.Currency, BalanceCents: a.BalanceCents, Holder: a.Holder}
}

// limitParam reads the page size of a listing: the query parameter limite,
// given at most once, an integer when given (an empty value is not), and
// ledger.DefaultPageSize when absent. The service checks its range.
func limitParam(r *http.Request) (int, error) {
	v, given, err := httpapi.SearchParam(r, "limite")
	if err != nil || !given {
		return ledger.DefaultPageSize, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &errkind.Error{Kind: errkind.Malformed, Detail: "invalid query parameter",
			Fields: []errkind.FieldError{{Field: "limite", Message: "must be an integer"}}}
	}
	return n, nil
}

// decode reads the request's JSON body into dst, strictly (see
// httpapi.DecodeStrict); false when it answered the request with the
// error instead.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	body, err := httpapi.ReadJSONBody(w, r)
	if err == nil {
		err = httpapi.DecodeStrict(body, dst)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return false
	}
	return true
}
