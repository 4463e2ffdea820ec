// Package opsweb is the transfers service's operator endpoints (scope
// operacoes), for the console: one transfer with its client, an account's
// transfers, newest first, in pages, and the results held because their
// transfer was unknown, which an operator applies (against the ledger's
// record of the transfer) or discards, audited.
package opsweb

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
	pg "github.com/paysuite/payments/pkg/postgres"
)

// Transfer is one transfer as operators see it.
type Transfer struct {
	ID              string `json:"id"`
	ContaOrigem     string `json:"contaOrigem"`
	ContaDestino    string `json:"contaDestino"`
	ValorEmCentavos int64  `json:"valorEmCentavos"`
	Moeda           string `json:"moeda"`
	Status          string `json:"status"`
	Motivo          string `json:"motivo,omitempty"`
	ClienteID       string `json:"clienteId"`
	// RequestID is the id of the request that created it, when recorded.
	RequestID    string `json:"requestId,omitempty"`
	CriadaEm     string `json:"criadaEm"`
	AtualizadaEm string `json:"atualizadaEm"`
}

// Page is the body of GET /ops/contas/{id}/transferencias.
type Page struct {
	Transferencias []Transfer `json:"transferencias"`
	// Proxima is the cursor of the next page (query "apos"); empty on the
	// last page.
	Proxima string `json:"proxima,omitempty"`
}

// Page sizes of the account listing.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

const columns = `id::text, conta_origem, conta_destino, valor_centavos, moeda, status,
       COALESCE(motivo_rejeicao, ''), COALESCE(cliente_id, ''), COALESCE(request_id, ''), criada_em, atualizada_em`

const byIDSQL = `SELECT ` + columns + ` FROM transferencia WHERE id = $1`

// byAccountSQL lists both sides of the account, newest first, after the
// cursor ($2, $3) when one is given.
const byAccountSQL = `
SELECT ` + columns + ` FROM (
    (SELECT * FROM transferencia WHERE conta_origem = $1
        AND ($2::timestamptz IS NULL OR (criada_em, id) < ($2, $3::uuid))
      ORDER BY criada_em DESC, id DESC LIMIT $4)
    UNION
    (SELECT * FROM transferencia WHERE conta_destino = $1
        AND ($2::timestamptz IS NULL OR (criada_em, id) < ($2, $3::uuid))
      ORDER BY criada_em DESC, id DESC LIMIT $4)
) t ORDER BY criada_em DESC, id DESC LIMIT $4`

// Routes returns the transfers service's operator routes on db and held.
func Routes(db *pg.DB, held HeldStore, log *slog.Logger) []auth.Route {
	h := &handler{db: db, log: log}
	return append([]auth.Route{
		{Method: http.MethodGet, Pattern: "/ops/transferencias/{id}", Scope: auth.ScopeOperations, Handler: h.byID},
		{Method: http.MethodGet, Pattern: "/ops/contas/{id}/transferencias", Scope: auth.ScopeOperations, Handler: h.byAccount},
	}, heldRoutes(held, log)...)
}

type handler struct {
	db  *pg.DB
	log *slog.Logger
}

func scan(row pgx.Row) (Transfer, error) {
	var t Transfer
	var created, updated time.Time
	err := row.Scan(&t.ID, &t.ContaOrigem, &t.ContaDestino, &t.ValorEmCentavos, &t.Moeda, &t.Status,
		&t.Motivo, &t.ClienteID, &t.RequestID, &created, &updated)
	t.CriadaEm, t.AtualizadaEm = opsapi.Time(created), opsapi.Time(updated)
	return t, err
}

func (h *handler) byID(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.PathUUID(r, "id", "transfer id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	t, err := scan(h.db.QueryRow(r.Context(), byIDSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		httpapi.WriteError(w, r, h.log, httpapi.Errorf(httpapi.KindNotFound, "no transfer with this id"))
		return
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, t)
}

func (h *handler) byAccount(w http.ResponseWriter, r *http.Request) {
	account, err := httpapi.PathParam(r, "id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if !validAccount(account) {
		httpapi.WriteError(w, r, h.log, httpapi.Errorf(httpapi.KindInvalidID, "an account id is 1 to 32 of A-Z a-z 0-9 . _ -"))
		return
	}
	limit := DefaultLimit
	v, given, err := httpapi.QueryValue(r, "limite")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if given {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			httpapi.WriteError(w, r, h.log, httpapi.Errorf(httpapi.KindValidation, "limite must be an integer from 1 to %d", MaxLimit))
			return
		}
		limit = n
	}
	var after *time.Time
	var afterID *uuid.UUID
	if v, _, err = httpapi.QueryValue(r, "apos"); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if v != "" {
		at, id, ok := decodeCursor(v)
		if !ok {
			httpapi.WriteError(w, r, h.log, httpapi.Errorf(httpapi.KindValidation, "apos is not a cursor of this listing"))
			return
		}
		after, afterID = &at, &id
	}
	rows, err := h.db.Query(r.Context(), byAccountSQL, account, after, afterID, limit+1)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	defer rows.Close()
	out := Page{Transferencias: []Transfer{}}
	var lastAt time.Time
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			httpapi.WriteError(w, r, h.log, err)
			return
		}
		out.Transferencias = append(out.Transferencias, t)
	}
	if err := rows.Err(); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if len(out.Transferencias) > limit {
		out.Transferencias = out.Transferencias[:limit]
		last := out.Transferencias[limit-1]
		lastAt, _ = time.Parse(time.RFC3339Nano, last.CriadaEm)
		out.Proxima = encodeCursor(lastAt, last.ID)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func validAccount(s string) bool { return accountShape.MatchString(s) }

// accountShape is the shape of an account id (CONTRACTS.md section 2).
var accountShape = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// A cursor is the creation time and id of the last transfer of a page.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id))
}

func decodeCursor(s string) (time.Time, uuid.UUID, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, uuid.Nil, false
	}
	ts, rawID, ok := strings.Cut(string(b), "|")
	if !ok {
		return time.Time{}, uuid.Nil, false
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, uuid.Nil, false
	}
	id, ok := httpapi.ParseUUID(rawID)
	return at, id, ok
}
