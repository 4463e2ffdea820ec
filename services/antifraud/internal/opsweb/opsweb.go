// Package opsweb is antifraud's operator read endpoint (scope operacoes):
// the decision taken on one transfer, for the console's journey page. It
// reads through the service's store; it never writes.
package opsweb

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
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

// Store reads decisions (postgres.Store).
type Store interface {
	// Decision returns the decision of a transfer, or analysis.ErrNotFound.
	Decision(ctx context.Context, transferID uuid.UUID) (analysis.Decision, error)
}

// Routes returns antifraud's operator routes on store.
func Routes(store Store, log *slog.Logger) []auth.Route {
	return []auth.Route{{Method: http.MethodGet, Pattern: "/ops/decisoes/{id}", Scope: auth.ScopeOperations,
		Handler: opsapi.GetByID(log, "transfer id",
			// store is read at request time: Routes(nil, ...) lists the routes.
			func(ctx context.Context, id uuid.UUID) (analysis.Decision, error) { return store.Decision(ctx, id) },
			func(id uuid.UUID, d analysis.Decision) any {
				return Decision{TransferenciaID: id.String(), Pontuacao: d.Score, Limiar: d.Threshold, Resultado: string(d.Outcome),
					Regras: d.Rules, EventoID: d.EventID.String(), DecididaEm: opsapi.Time(d.DecidedAt)}
			})}}
}
