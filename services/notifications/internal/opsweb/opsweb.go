// Package opsweb is notifications' operator read endpoint (scope
// operacoes): the notifications of one transfer with their delivery
// attempts, for the console's journey page. It only reads.
package opsweb

import (
	"log/slog"
	"net/http"
	"time"

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
}

const notificationsSQL = `
SELECT event_id::text, event_type, channel, status, attempts, delivered_at, COALESCE(last_error, ''), created_at, updated_at
  FROM notification WHERE transfer_id = $1 ORDER BY created_at LIMIT 20`

// Routes returns notifications' operator routes on db.
func Routes(db *pg.DB, log *slog.Logger) []auth.Route {
	return []auth.Route{{Method: http.MethodGet, Pattern: "/ops/notificacoes/{id}", Scope: auth.ScopeOperations,
		Handler: func(w http.ResponseWriter, r *http.Request) {
			raw, err := httpapi.PathParam(r, "id")
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			id, ok := httpapi.ParseUUID(raw)
			if !ok {
				httpapi.WriteError(w, r, log, httpapi.Errorf(httpapi.KindInvalidID, "the transfer id must be a UUID"))
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
				out.Notificacoes = append(out.Notificacoes, n)
			}
			if err := rows.Err(); err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			httpapi.WriteJSON(w, http.StatusOK, out)
		}}}
}
