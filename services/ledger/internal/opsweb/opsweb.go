// Package opsweb is the ledger's operator read endpoint (scope operacoes):
// how one transfer was settled or rejected, what it was asked to move
// (accounts, amount, currency), with its postings and each account's
// balance right after its posting, for the console's journey page and its
// check of a result the transfers service held. It only reads.
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

// Settlement is the body of GET /ops/liquidacoes/{id}.
type Settlement struct {
	TransferenciaID string `json:"transferenciaId"`
	Resultado       string `json:"resultado"`
	Motivo          string `json:"motivo,omitempty"`
	// ContaOrigem, ContaDestino, ValorEmCentavos and Moeda are what the
	// TransferenciaAnalisada asked the ledger to move, as received: results
	// carry no amount, so this is what tells a transfer recreated under the
	// same id from the one decided here.
	ContaOrigem     string    `json:"contaOrigem"`
	ContaDestino    string    `json:"contaDestino"`
	ValorEmCentavos int64     `json:"valorEmCentavos"`
	Moeda           string    `json:"moeda"`
	ProcessadaEm    string    `json:"processadaEm"`
	Lancamentos     []Posting `json:"lancamentos"`
}

// Posting is one side of a settled transfer with the account's balance
// right after it.
type Posting struct {
	Conta           string `json:"conta"`
	Direcao         string `json:"direcao"`
	ValorEmCentavos int64  `json:"valorEmCentavos"`
	SaldoApos       int64  `json:"saldoAposEmCentavos"`
	CriadoEm        string `json:"criadoEm"`
}

const processedSQL = `
SELECT result, COALESCE(reason, ''), source_account, dest_account, amount_cents, currency, processed_at
FROM processed_transfer WHERE transfer_id = $1`

// postingsSQL computes each side's balance after it as the sum of the
// account's postings up to it (postings of one account are numbered in
// commit order, see the posting table).
const postingsSQL = `
SELECT p.account_id, p.direction, p.amount_cents,
       (SELECT COALESCE(sum(CASE q.direction WHEN 'C' THEN q.amount_cents ELSE -q.amount_cents END), 0)
          FROM posting q WHERE q.account_id = p.account_id AND q.id <= p.id)::bigint,
       p.created_at
  FROM posting p WHERE p.entry_type = 'TRANSFER' AND p.entry_id = $1 ORDER BY p.direction DESC`

// Routes returns the ledger's operator routes on db.
func Routes(db *pg.DB, log *slog.Logger) []auth.Route {
	return []auth.Route{{Method: http.MethodGet, Pattern: "/ops/liquidacoes/{id}", Scope: auth.ScopeOperations,
		Handler: func(w http.ResponseWriter, r *http.Request) {
			id, err := httpapi.PathUUID(r, "id", "transfer id")
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			s := Settlement{TransferenciaID: id.String(), Lancamentos: []Posting{}}
			var at time.Time
			err = db.QueryRow(r.Context(), processedSQL, id).Scan(&s.Resultado, &s.Motivo, &s.ContaOrigem, &s.ContaDestino, &s.ValorEmCentavos, &s.Moeda, &at)
			if errors.Is(err, pgx.ErrNoRows) {
				httpapi.WriteError(w, r, log, httpapi.Errorf(httpapi.KindNotFound, "the ledger has not processed this transfer"))
				return
			}
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			s.ProcessadaEm = opsapi.Time(at)
			rows, err := db.Query(r.Context(), postingsSQL, id)
			if err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			defer rows.Close()
			for rows.Next() {
				var p Posting
				var created time.Time
				if err := rows.Scan(&p.Conta, &p.Direcao, &p.ValorEmCentavos, &p.SaldoApos, &created); err != nil {
					httpapi.WriteError(w, r, log, err)
					return
				}
				p.CriadoEm = opsapi.Time(created)
				s.Lancamentos = append(s.Lancamentos, p)
			}
			if err := rows.Err(); err != nil {
				httpapi.WriteError(w, r, log, err)
				return
			}
			httpapi.WriteJSON(w, http.StatusOK, s)
		}}}
}
