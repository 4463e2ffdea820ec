// Package opsweb is antifraud's operator read endpoint (scope operacoes):
// the decision taken on one transfer, for the console's journey page. It
// reads the decision table directly; it never writes.
package opsweb

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
	pg "github.com/paysuite/payments/pkg/postgres"
)

// Decision is the body of GET /ops/decisoes/{id}.
type Decision struct {
	TransferenciaID string   `json:"transferenciaId"`
	Pontuacao       int      `json:"pontuacao"`
	Limiar          int      `json:"limiar"`
	Resultado       string   `json:"resultado"`
	Regras          []string `json:"regras"`
	EventoID        string   `json:"eventoId"`
	DecididaEm      string   `json:"decididaEm"`
}

const decisionSQL = `
SELECT score, threshold, outcome, rules, event_id::text, decided_at
  FROM decision WHERE transfer_id = $1`

// Routes returns antifraud's operator routes on db.
func Routes(db *pg.DB, log *slog.Logger) []auth.Route {
	return []auth.Route{{Method: http.MethodGet, Pattern: "/ops/decisoes/{id}", Scope: auth.ScopeOperations,
		Handler: func(w http.ResponseWriter, r *http.Request) {
			id, err := httpapi.PathUUID(r, "id", "transfer id")
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			d := Decision{TransferenciaID: id.String()}
			var at time.Time
			err = db.QueryRow(r.Context(), decisionSQL, id).Scan(&d.Pontuacao, &d.Limiar, &d.Resultado, &d.Regras, &d.EventoID, &at)
			if errors.Is(err, pgx.ErrNoRows) {
				httpapi.WriteError(w, r, log, httpapi.Errorf(httpapi.KindNotFound, "antifraud has not decided this transfer"))
				return
			}
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			d.DecididaEm = opsapi.Time(at)
			httpapi.WriteJSON(w, http.StatusOK, d)
		}}}
}
