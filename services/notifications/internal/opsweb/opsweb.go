// Package opsweb is notifications' operator read endpoint (scope
// operacoes): the notifications of one transfer with each delivery attempt
// (channel, topic read from, outcome), for the console's journey page. It only reads.
package opsweb

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
	pg "github.com/paysuite/payments/pkg/postgres"
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

const notificationsSQL = `
SELECT event_id::text, event_type, channel, status, attempts, delivered_at, COALESCE(last_error, ''), created_at, updated_at
  FROM notification WHERE transfer_id = $1 ORDER BY created_at LIMIT 20`

const attemptsSQL = `
SELECT event_id::text, attempt, channel, topic, outcome, COALESCE(error, ''), at
  FROM notification_attempt WHERE transfer_id = $1 ORDER BY event_id, attempt LIMIT 200`

// Routes returns notifications' operator routes on db.
func Routes(db *pg.DB, log *slog.Logger) []auth.Route {
	return []auth.Route{{Method: http.MethodGet, Pattern: "/ops/notificacoes/{id}", Scope: auth.ScopeOperations,
		Handler: func(w http.ResponseWriter, r *http.Request) {
			id, err := httpapi.PathUUID(r, "id", "transfer id")
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			rows, err := db.Query(r.Context(), notificationsSQL, id)
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			defer rows.Close()
			out := Notifications{Notificacoes: []Notification{}}
			for rows.Next() {
				var n Notification
				var delivered *time.Time
				var created, updated time.Time
				if err := rows.Scan(&n.EventoID, &n.TipoEvento, &n.Canal, &n.Status, &n.Tentativas, &delivered, &n.Erro, &created, &updated); err != nil {
					httpapi.WriteError(w, r, log, err)
					return
				}
				if delivered != nil {
					n.EntregueEm = opsapi.Time(*delivered)
				}
				n.CriadaEm, n.AtualizadaEm = opsapi.Time(created), opsapi.Time(updated)
				n.Historico = []Attempt{}
				out.Notificacoes = append(out.Notificacoes, n)
			}
			if err := rows.Err(); err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			if err := addAttempts(r.Context(), db, id, out.Notificacoes); err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			httpapi.WriteJSON(w, http.StatusOK, out)
		}}}
}

// addAttempts fills the Historico of ns, the notifications of transfer id.
func addAttempts(ctx context.Context, db *pg.DB, id uuid.UUID, ns []Notification) error {
	byEvent := make(map[string]*Notification, len(ns))
	for i := range ns {
		byEvent[ns[i].EventoID] = &ns[i]
	}
	rows, err := db.Query(ctx, attemptsSQL, id)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			event string
			a     Attempt
			at    time.Time
		)
		if err := rows.Scan(&event, &a.Tentativa, &a.Canal, &a.Topico, &a.Resultado, &a.Erro, &at); err != nil {
			return err
		}
		a.Em = opsapi.Time(at)
		if n, ok := byEvent[event]; ok {
			n.Historico = append(n.Historico, a)
		}
	}
	return rows.Err()
}
