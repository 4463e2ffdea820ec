package web

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// BalanceAtResponse is GET /contas/{id}/saldo?em=: the posted balance at
// the instant em (CONTRACTS.md section 11).
type BalanceAtResponse struct {
	ID           string    `json:"id"`
	Currency     string    `json:"moeda"`
	At           time.Time `json:"em"`
	BalanceCents int64     `json:"saldoEmCentavos"`
}

// statementHead is the start of a JSON statement, before its postings
// (itens) and its closing balance, which are streamed after it.
type statementHead struct {
	Account      string    `json:"conta"`
	Currency     string    `json:"moeda"`
	From         time.Time `json:"desde"`
	To           time.Time `json:"ate"`
	OpeningCents int64     `json:"saldoInicialEmCentavos"`
}

// StatementCSVHeader is the header row of a CSV statement: one column per
// field of PostingResponse, in csvRow's order.
var StatementCSVHeader = []string{"criadoEm", "id", "tipo", "valorEmCentavos", "transferenciaId", "estornoId", "saldoAposEmCentavos"}

// postingResponse is p on the wire, as /lancamentos and the statement show
// it.
func postingResponse(p ledger.Posting) PostingResponse {
	r := PostingResponse{ID: p.ID, TransferID: p.EntryID, Direction: string(p.Direction), AmountCents: p.AmountCents,
		BalanceAfterCents: p.BalanceAfterCents, CreatedAt: p.CreatedAt.UTC()}
	if p.RefundID != uuid.Nil {
		r.RefundID = &p.RefundID
	}
	return r
}

// csvRow is p as a line of a CSV statement, in StatementCSVHeader's order.
func csvRow(p PostingResponse) []string {
	refund := ""
	if p.RefundID != nil {
		refund = p.RefundID.String()
	}
	return []string{p.CreatedAt.Format(time.RFC3339Nano), strconv.FormatInt(p.ID, 10), p.Direction,
		strconv.FormatInt(p.AmountCents, 10), p.TransferID.String(), refund, strconv.FormatInt(p.BalanceAfterCents, 10)}
}

func (h *Handler) balanceAt(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.PathParam(r, "id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	at, err := instantParam(r, "em")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	a, balance, err := h.svc.BalanceAt(r.Context(), id, at, reader(r))
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, BalanceAtResponse{ID: a.ID, Currency: a.Currency, At: at.UTC(), BalanceCents: balance})
}

// statementRows is how many postings a statement writes between two
// extensions of the connection's write deadline: a long statement is not
// cut by the server's WriteTimeout while the client keeps reading, and a
// client that stops reading is still dropped after it.
const statementRows = 1000

func (h *Handler) statement(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.PathParam(r, "id")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	from, err := instantParam(r, "desde")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	to, err := instantParam(r, "ate")
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	format, _, err := httpapi.SearchParam(r, "formato")
	if err == nil && format != "" && format != "json" && format != "csv" {
		err = &errkind.Error{Kind: errkind.Malformed, Detail: "invalid query parameter",
			Fields: []errkind.FieldError{{Field: "formato", Message: "must be json or csv"}}}
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var out statementWriter = &jsonStatement{w: w}
	if format == "csv" {
		out = &csvStatement{w: csv.NewWriter(w)}
	}
	rc := http.NewResponseController(w)
	started, rows := false, 0
	err = h.svc.Statement(r.Context(), id, from, to, reader(r), func(s ledger.StatementHeader) error {
		started = true
		return out.begin(w, s)
	}, func(p ledger.Posting) error {
		if rows++; rows%statementRows == 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(httpapi.WriteTimeout)) // not every writer has a deadline
		}
		return out.posting(postingResponse(p))
	})
	if err == nil {
		err = out.end()
	}
	switch {
	case err != nil && !started:
		httpapi.WriteError(w, r, h.log, err)
	case err != nil:
		// The status and part of the body are gone: abort the response, so
		// that the client sees a broken transfer, never a short statement
		// that looks whole.
		h.log.WarnContext(r.Context(), "statement cut short", "account", id, "postings", rows, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// statementWriter writes a statement as its postings are read.
type statementWriter interface {
	begin(w http.ResponseWriter, s ledger.StatementHeader) error
	posting(p PostingResponse) error
	end() error
}

// jsonStatement writes the JSON statement: the head, each posting as it
// comes, then the closing balance.
type jsonStatement struct {
	w       http.ResponseWriter
	n       int
	closing int64
}

func (j *jsonStatement) begin(w http.ResponseWriter, s ledger.StatementHeader) error {
	head, err := json.Marshal(statementHead{Account: s.Account.ID, Currency: s.Account.Currency, From: s.From.UTC(), To: s.To.UTC(),
		OpeningCents: s.OpeningCents})
	if err != nil {
		return err
	}
	j.closing = s.ClosingCents
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(append(head[:len(head)-1], `,"itens":[`...))
	return err
}

func (j *jsonStatement) posting(p PostingResponse) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if j.n++; j.n > 1 {
		b = append([]byte{','}, b...)
	}
	_, err = j.w.Write(b)
	return err
}

func (j *jsonStatement) end() error {
	_, err := j.w.Write([]byte(`],"saldoFinalEmCentavos":` + strconv.FormatInt(j.closing, 10) + "}\n"))
	return err
}

// csvStatement writes the CSV statement: the header row, then one line a
// posting. The balances at both ends are the first line's and the last
// line's running balances less or plus what they moved; a client that
// needs them with no posting in the range asks /saldo.
type csvStatement struct {
	w *csv.Writer
}

func (c *csvStatement) begin(w http.ResponseWriter, _ ledger.StatementHeader) error {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	return c.w.Write(StatementCSVHeader)
}

func (c *csvStatement) posting(p PostingResponse) error { return c.w.Write(csvRow(p)) }

func (c *csvStatement) end() error {
	c.w.Flush()
	return c.w.Error()
}

// instantParam reads the required query parameter name as an RFC 3339
// instant.
func instantParam(r *http.Request, name string) (time.Time, error) {
	v, given, err := httpapi.SearchParam(r, name)
	if err != nil {
		return time.Time{}, err
	}
	t, perr := time.Parse(time.RFC3339Nano, v)
	if !given || perr != nil {
		return time.Time{}, &errkind.Error{Kind: errkind.Malformed, Detail: "invalid query parameter",
			Fields: []errkind.FieldError{{Field: name, Message: "must be an RFC 3339 instant, e.g. 2026-01-31T23:59:59Z"}}}
	}
	return t, nil
}
