// Package web is the transfers service's HTTP adapter: POST and GET
// /transferencias as CONTRACTS.md section 1 fixes them, a hold's capture
// and cancellation (section 9, command.go), refunds (section 10,
// refund.go), the listing (section 11, history.go), and the OpenAPI
// document. Errors are written by pkg/httpapi, the suite's one problem
// writer.
package web

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/transfers/internal/opsweb"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// Header names of the idempotency protocol.
const (
	HeaderIdempotencyKey = httpapi.HeaderIdempotencyKey
	HeaderReplayed       = "Idempotent-Replayed"
)

// Handler serves the transfers API.
type Handler struct {
	svc     *transfer.Service
	log     *slog.Logger
	openapi []byte
	admit   Admission
	idem    *IdempotencyMetrics
	history *transfer.History
}

// Admission decides whether a client's new transfer is taken now; when
// not, it gives the Retry-After to send. A request it admitted is Done
// once answered. *admission.Controller is one.
type Admission interface {
	Admit(client string) (bool, time.Duration)
	Done()
}

// WithAdmission makes h shed new transfers that a refuses (503 overloaded,
// before anything is read or written); reads are never shed. It returns h.
func (h *Handler) WithAdmission(a Admission) *Handler {
	h.admit = a
	return h
}

// WithIdempotencyMetrics makes h count on m what Submit decided about the
// key of each POST that reached it. It returns h.
func (h *Handler) WithIdempotencyMetrics(m *IdempotencyMetrics) *Handler {
	h.idem = m
	return h
}

// New returns the handler of svc; openapi is the document served at
// GET /openapi.yaml.
func New(svc *transfer.Service, log *slog.Logger, openapi []byte) *Handler {
	return &Handler{svc: svc, log: log, openapi: openapi}
}

// Routes is the service's route table: each route with the scope it needs
// (CONTRACTS.md section 8).
func (h *Handler) Routes() []auth.Route {
	return []auth.Route{
		{Method: http.MethodPost, Pattern: "/transferencias", Scope: auth.ScopeTransfersCreate, Handler: h.create},
		{Method: http.MethodGet, Pattern: "/transferencias", Scope: auth.ScopeTransfersRead + " " + auth.ScopeOperations, Handler: h.list},
		{Method: http.MethodGet, Pattern: "/transferencias/{id}", Scope: auth.ScopeTransfersRead + " " + auth.ScopeOperations, Handler: h.get},
		{Method: http.MethodPost, Pattern: "/transferencias/{id}/captura", Scope: auth.ScopeTransfersCreate, Handler: h.capture},
		{Method: http.MethodPost, Pattern: "/transferencias/{id}/cancelamento", Scope: auth.ScopeTransfersCreate, Handler: h.cancel},
		{Method: http.MethodPost, Pattern: "/transferencias/{id}/estornos", Scope: auth.ScopeTransfersRefund + " " + auth.ScopeOperations, Handler: h.refund},
		{Method: http.MethodGet, Pattern: "/transferencias/{id}/estornos/{estornoId}",
			Scope: auth.ScopeTransfersRead + " " + auth.ScopeTransfersRefund + " " + auth.ScopeOperations, Handler: h.getRefund},
		{Method: http.MethodGet, Pattern: "/openapi.yaml", Scope: auth.Public, Handler: h.spec},
	}
}

// Mount adds the routes to r, the router of httpapi.NewRouter, whose
// middleware authenticates requests and turns panics into 500 problems.
func (h *Handler) Mount(r chi.Router) {
	auth.Mount(r, h.log, h.Routes())
}

// createRequest is the body of POST /transferencias.
type createRequest struct {
	ContaOrigem     string `json:"contaOrigem"`
	ContaDestino    string `json:"contaDestino"`
	ValorEmCentavos int64  `json:"valorEmCentavos"`
	Moeda           string `json:"moeda"`
	Captura         string `json:"captura"`
	ExpiraEm        string `json:"expiraEm"`
}

// createResponse is the body of the 202.
type createResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// transferResponse is the body of GET /transferencias/{id}: the fields of
// a transfer without its client or request id, which only operators see.
type transferResponse struct {
	opsapi.Transfer
	opsapi.TransferTimes
}

// DecodeRequest decodes a POST /transferencias body: strict JSON (one
// object, no unknown fields, no nulls, integers only). Errors are
// *errkind.Error of errkind.Malformed (400) with field errors. The transfer
// rules are not checked here: Submit checks them, once, for every caller.
func DecodeRequest(body []byte) (transfer.Request, error) {
	var in createRequest
	if err := httpapi.DecodeStrict(body, &in); err != nil {
		return transfer.Request{}, err
	}
	return transfer.Request{
		Source:      in.ContaOrigem,
		Destination: in.ContaDestino,
		AmountCents: in.ValorEmCentavos,
		Currency:    in.Moeda,
		Capture:     in.Captura,
		ExpiresAt:   in.ExpiraEm,
	}, nil
}

// create is an audited write, get a read; both need a principal in the
// request context (pkg/auth).
func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	auth.Audited(h.log, "transfer.create", h.createAs)(w, r)
}

func (h *Handler) createAs(w http.ResponseWriter, r *http.Request, p auth.Principal, audit *auth.AuditRecord) {
	if h.admit != nil {
		if ok, retry := h.admit.Admit(p.Subject); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(retry/time.Second)))
			httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Overloaded,
				"the service is behind with the transfers it has taken; retry after the Retry-After seconds"))
			return
		}
		defer h.admit.Done()
	}
	id, err := httpapi.IdempotencyKey(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	audit.Resource("transfer_id", id)
	body, err := httpapi.ReadJSONBody(w, r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	req, err := DecodeRequest(body)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	first, err := json.Marshal(createResponse{ID: id.String(), Status: string(transfer.StatusPending)})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	resp, replayed, err := h.svc.Submit(r.Context(), transfer.Submission{
		ID:        id,
		Client:    p.Subject,
		RequestID: httpapi.RequestIDFrom(r.Context()),
		Request:   req,
		Response:  transfer.Response{StatusCode: http.StatusAccepted, Body: append(first, '\n')},
	})
	h.idem.Submitted(replayed, err)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	writeStored(w, resp, replayed, "/transferencias/"+id.String())
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	v, id, ok := h.readerOf(w, r)
	if !ok {
		return
	}
	t, err := h.svc.Get(r.Context(), id, v)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := view(t)
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// readerOf is who reads the transfer of a read's path, and that transfer's
// id; on an error it writes the problem and returns false.
func (h *Handler) readerOf(w http.ResponseWriter, r *http.Request) (transfer.Viewer, uuid.UUID, bool) {
	p, ok := auth.FromContext(r.Context())
	if !ok {
		auth.Unauthenticated(w, r, h.log)
		return transfer.Viewer{}, uuid.Nil, false
	}
	id, err := httpapi.PathUUID(r, "id", "transfer id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return transfer.Viewer{}, uuid.Nil, false
	}
	return transfer.Viewer{Client: p.Subject, All: p.Operator()}, id, true
}

// view is the body that shows t to its client.
func view(t transfer.Transfer) transferResponse {
	return transferResponse{Transfer: opsweb.View(t),
		TransferTimes: opsapi.TransferTimes{CriadaEm: opsapi.Time(t.CreatedAt), AtualizadaEm: opsapi.Time(t.UpdatedAt)}}
}

func (h *Handler) spec(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(h.openapi)
}
