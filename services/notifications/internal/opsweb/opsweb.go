// Package opsweb is notifications' operator read endpoint (scope
// operacoes): the notifications of one transfer with each delivery attempt
// (channel, topic read from, outcome), for the console's journey page. It only reads.
package opsweb

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/notifications/internal/notify"
)

// Notifications is the body of GET /ops/notificacoes/{id}.
type Notifications struct {
	Notificacoes []Notification `json:"notificacoes"`
}

// Notification is one event's notification: one per result event.
type Notification struct {
	EventoID     string `json:"eventoId"`
	TipoEvento   string `json:"tipoEvento"`
	Canal        string `json:"canal"`
	Status       string `json:"status"`
	Tentativas   int    `json:"tentativas"`
	EntregueEm   string `json:"entregueEm,omitempty"`
	Erro         string `json:"erro,omitempty"`
	CriadaEm     string `json:"criadaEm"`
	AtualizadaEm string `json:"atualizadaEm"`
	// Historico is each attempt, oldest first.
	Historico []Attempt `json:"historico"`
}

// Attempt is one attempt to notify an event.
type Attempt struct {
	Tentativa int    `json:"tentativa"`
	Canal     string `json:"canal"`
	// Topico is the topic the record was read from: the main topic or one
	// of its retry topics.
	Topico    string `json:"topico"`
	Resultado string `json:"resultado"`
	Erro      string `json:"erro,omitempty"`
	Em        string `json:"em"`
}

// Store reads the notification log (postgres.Store).
type Store interface {
	// Records returns the notifications of a transfer with their attempts.
	Records(ctx context.Context, transferID uuid.UUID) ([]notify.Record, error)
}

// Routes returns notifications' operator routes on store.
func Routes(store Store, log *slog.Logger) []auth.Route {
	return []auth.Route{{Method: http.MethodGet, Pattern: "/ops/notificacoes/{id}", Scope: auth.ScopeOperations,
		Handler: opsapi.GetByID(log, "transfer id",
			// store is read at request time: Routes(nil, ...) lists the routes.
			func(ctx context.Context, id uuid.UUID) ([]notify.Record, error) { return store.Records(ctx, id) },
			func(_ uuid.UUID, rs []notify.Record) any {
				out := Notifications{Notificacoes: make([]Notification, 0, len(rs))}
				for _, n := range rs {
					out.Notificacoes = append(out.Notificacoes, notification(n))
				}
				return out
			})}}
}

func notification(r notify.Record) Notification {
	n := Notification{EventoID: r.EventID.String(), TipoEvento: r.EventType, Canal: r.Channel, Status: string(r.Status),
		Tentativas: r.Attempts, Erro: r.LastError, CriadaEm: opsapi.Time(r.CreatedAt), AtualizadaEm: opsapi.Time(r.UpdatedAt),
		Historico: make([]Attempt, 0, len(r.History))}
	if !r.DeliveredAt.IsZero() {
		n.EntregueEm = opsapi.Time(r.DeliveredAt)
	}
	for _, a := range r.History {
		n.Historico = append(n.Historico, Attempt{Tentativa: a.Attempt, Canal: a.Channel, Topico: a.Topic,
			Resultado: a.Outcome, Erro: a.Error, Em: opsapi.Time(a.At)})
	}
	return n
}
