// Package opsapi holds the operator endpoints every service shares, behind
// the operacoes scope (CONTRACTS.md section 8): the backlog of the
// service's outbox, the outbox events of one transfer, and the audited
// requeue of a DEAD event. Each service adds Routes to its own route table;
// the console reads them with the operator's token.
package opsapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/outbox"
)

// Paths of the shared operator endpoints.
const (
	PathBacklog = "/ops/outbox"
	PathEvents  = "/ops/outbox/transferencias/{id}"
	PathRequeue = "/ops/outbox/{id}/reenfileirar"
)

// DeadListLimit bounds the DEAD events a backlog answer lists.
const DeadListLimit = 50

// Backlog is the body of GET /ops/outbox.
type Backlog struct {
	Pendentes               int64       `json:"pendentes"`
	IdadeMaisAntigaSegundos float64     `json:"idadeMaisAntigaSegundos"`
	Mortos                  int64       `json:"mortos"`
	ChavesRetidas           int64       `json:"chavesRetidas"`
	EventosMortos           []DeadEvent `json:"eventosMortos"`
}

// DeadEvent is a DEAD outbox event in a Backlog.
type DeadEvent struct {
	ID            string `json:"id"`
	Topico        string `json:"topico"`
	Chave         string `json:"chave"`
	Tipo          string `json:"tipo"`
	Tentativas    int    `json:"tentativas"`
	Recusas       int    `json:"recusas"`
	Erro          string `json:"erro"`
	EnfileiradoEm string `json:"enfileiradoEm"`
}

// Events is the body of GET /ops/outbox/transferencias/{id}.
type Events struct {
	Eventos []Event `json:"eventos"`
}

// Event is one outbox event of a transfer.
type Event struct {
	ID            string `json:"id"`
	Topico        string `json:"topico"`
	Chave         string `json:"chave"`
	Tipo          string `json:"tipo"`
	Status        string `json:"status"`
	Tentativas    int    `json:"tentativas"`
	Erro          string `json:"erro,omitempty"`
	EnfileiradoEm string `json:"enfileiradoEm"`
	PublicadoEm   string `json:"publicadoEm,omitempty"`
	// Traceparent is the event's W3C trace context, when traced.
	Traceparent string `json:"traceparent,omitempty"`
}

// Requeued is the body of POST /ops/outbox/{id}/reenfileirar.
type Requeued struct {
	Reenfileirados int64 `json:"reenfileirados"`
}

// Handler serves the shared operator endpoints of one service's outbox.
type Handler struct {
	ob  *outbox.Outbox
	log *slog.Logger
}

// Routes returns the shared operator routes on ob, each behind the
// operacoes scope, for the service's route table.
func Routes(ob *outbox.Outbox, log *slog.Logger) []auth.Route {
	h := &Handler{ob: ob, log: log}
	return []auth.Route{
		{Method: http.MethodGet, Pattern: PathBacklog, Scope: auth.ScopeOperations, Handler: h.backlog},
		{Method: http.MethodGet, Pattern: PathEvents, Scope: auth.ScopeOperations, Handler: h.events},
		{Method: http.MethodPost, Pattern: PathRequeue, Scope: auth.ScopeOperations,
			Handler: auth.Audited(log, "outbox.requeue", h.requeue)},
	}
}

// ErrNoOperator answers an operator action whose token names no operator
// (no sub): every such action records who did it.
var ErrNoOperator = errkind.Errorf(errkind.Validation, "the token names no operator (sub)")

// Time formats t the way every JSON body of the suite does.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (h *Handler) backlog(w http.ResponseWriter, r *http.Request) {
	s, err := h.ob.Stats(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	dead, err := h.ob.ListDead(r.Context(), DeadListLimit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := Backlog{
		Pendentes:               s.Pending,
		IdadeMaisAntigaSegundos: s.OldestAge.Seconds(),
		Mortos:                  s.Dead,
		ChavesRetidas:           s.KeysHeldBack,
		EventosMortos:           make([]DeadEvent, len(dead)),
	}
	for i, d := range dead {
		out.EventosMortos[i] = DeadEvent{
			ID: d.ID.String(), Topico: d.Topic, Chave: d.Key, Tipo: d.Type, Tentativas: d.Attempts,
			Recusas: d.Refusals, Erro: d.LastError, EnfileiradoEm: Time(d.EnqueuedAt),
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.PathUUID(r, "id", "transfer id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	evs, err := h.ob.EventsOf(r.Context(), id.String())
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := Events{Eventos: make([]Event, len(evs))}
	for i, e := range evs {
		out.Eventos[i] = Event{ID: e.ID.String(), Topico: e.Topic, Chave: e.Key, Tipo: e.Type, Status: e.Status,
			Tentativas: e.Attempts, Erro: e.LastError, EnfileiradoEm: Time(e.EnqueuedAt), Traceparent: e.Traceparent}
		if e.PublishedAt != nil {
			out.Eventos[i].PublicadoEm = Time(*e.PublishedAt)
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// requeue moves one DEAD event back to PENDING, as the operator named by
// the token. Requeueing an event that is not DEAD (any more) changes
// nothing and answers 0: a double click is applied once.
func (h *Handler) requeue(w http.ResponseWriter, r *http.Request, p auth.Principal, a *auth.AuditRecord) {
	id, err := httpapi.PathUUID(r, "id", "event id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	a.Resource("evento_id", id)
	if p.Subject == "" {
		httpapi.WriteError(w, r, h.log, ErrNoOperator)
		return
	}
	n, err := h.ob.Requeue(r.Context(), outbox.RequeueFilter{ID: id},
		outbox.Audit{Operator: p.Subject, Reason: r.URL.Query().Get("motivo")})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	a.Resource("requeued", n)
	httpapi.WriteJSON(w, http.StatusOK, Requeued{Reenfileirados: n})
}
