// Package opsweb is the ledger's operator read endpoint (scope operacoes):
// how one transfer was settled, rejected or reserved (a hold, with its
// reservation and how it closed), what it was asked to move
// (accounts, amount, currency), for which client and request, with its
// postings and each account's balance right after its posting, for the
// console's journey page and for the transfers service, which compares it
// with a held result before an operator's apply. It only reads.
package opsweb

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// Store reads processed transfers (postgres.Store).
type Store interface {
	// Processed returns how the ledger decided a transfer, or
	// ledger.ErrNotProcessed.
	Processed(ctx context.Context, id uuid.UUID) (ledger.Processed, error)
}

// Routes returns the ledger's operator routes on store.
func Routes(store Store, log *slog.Logger) []auth.Route {
	return []auth.Route{{Method: http.MethodGet, Pattern: opsapi.PathSettlement, Scope: auth.ScopeOperations,
		Handler: opsapi.GetByID(log, "transfer id",
			// store is read at request time: Routes(nil, ...) lists the routes.
			func(ctx context.Context, id uuid.UUID) (ledger.Processed, error) { return store.Processed(ctx, id) },
			func(_ uuid.UUID, p ledger.Processed) any { return settlement(p) })}}
}

// reservationStates are the wire names of the reservation states.
var reservationStates = map[ledger.ReservationState]string{
	ledger.ReservationOpen: opsapi.ReservationOpen, ledger.ReservationCaptured: opsapi.ReservationCaptured,
	ledger.ReservationCancelled: opsapi.ReservationCancelled, ledger.ReservationExpired: opsapi.ReservationExpired,
}

func settlement(p ledger.Processed) opsapi.Settlement {
	s := opsapi.Settlement{TransferenciaID: p.TransferID.String(), Resultado: string(p.Outcome), Motivo: p.Reason,
		ContaOrigem: p.Source, ContaDestino: p.Destination, ValorEmCentavos: p.AmountCents, Moeda: p.Currency, ClienteID: p.ClientID,
		ProcessadaEm: opsapi.Time(p.ProcessedAt), Lancamentos: make([]opsapi.Posting, 0, len(p.Postings))}
	if p.RequestEventID != uuid.Nil {
		s.EventoSolicitacaoID = p.RequestEventID.String()
	}
	if r := p.Reservation; r != nil {
		s.Reserva = &opsapi.Reservation{ValorEmCentavos: r.AmountCents, ExpiraEm: opsapi.Time(r.ExpiresAt),
			Estado: reservationStates[r.State], ValorCapturadoEmCentavos: r.CapturedCents}
		if !r.ClosedAt.IsZero() {
			s.Reserva.EncerradaEm = opsapi.Time(r.ClosedAt)
		}
	}
	for _, b := range p.Postings {
		s.Lancamentos = append(s.Lancamentos, opsapi.Posting{Conta: b.Account, Direcao: string(b.Direction),
			ValorEmCentavos: b.AmountCents, SaldoApos: b.BalanceAfter, CriadoEm: opsapi.Time(b.CreatedAt)})
	}
	return s
}
