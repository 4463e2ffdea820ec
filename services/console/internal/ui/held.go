package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
)

// Held results: settlement results the transfers projection kept because
// no transfer had their id (a failover lost it, a restore, a bug). Results
// carry no amount, so the page sets each beside the ledger's record of the
// id (what it was asked to move) and the transfer that has the id now (a
// client's retry), and the operator applies the result only when they are
// the same transfer. The page's check is a guide: an apply sends the
// transfers service the held result and the decision only, and the
// transfers service reads the ledger's record itself (with the operator's
// token) and applies the ledger's outcome only when every field matches.

// opsHeld is one held result, opsHeldList the transfers service's list.
type (
	opsHeld     = opsapi.Held
	opsHeldList = opsapi.HeldList
)

// HeldRow is one held result with the ledger's record of its transfer id.
type HeldRow struct {
	Held   opsHeld
	Ledger *opsapi.Settlement
	// Differences says what keeps the result from being applied; empty
	// when the transfer is the one the ledger settled.
	Differences []string
}

// Matches reports whether the result can be applied.
func (r HeldRow) Matches() bool { return len(r.Differences) == 0 }

// heldRow compares the transfer that has the id now with the ledger's
// record, as the transfers service will.
func heldRow(h opsHeld, ledger *opsapi.Settlement) HeldRow {
	row := HeldRow{Held: h, Ledger: ledger}
	t := h.Transferencia
	switch {
	case ledger == nil:
		row.Differences = append(row.Differences, "the ledger has no record of this transfer id")
	case t == nil:
		row.Differences = append(row.Differences, "no transfer has this id yet (the client has not retried)")
	default:
		if t.Status != "PENDENTE" {
			row.Differences = append(row.Differences, "the transfer is "+t.Status+", not PENDENTE")
		}
		for _, d := range []struct {
			name      string
			got, want string
		}{
			{"source account", t.ContaOrigem, ledger.ContaOrigem},
			{"destination account", t.ContaDestino, ledger.ContaDestino},
			{"amount", strconv.FormatInt(t.ValorEmCentavos, 10), strconv.FormatInt(ledger.ValorEmCentavos, 10)},
			{"currency", t.Moeda, ledger.Moeda},
			{"client", t.ClienteID, ledger.ClienteID},
		} {
			if d.got != d.want {
				row.Differences = append(row.Differences, fmt.Sprintf("%s: %s here, %s in the ledger", d.name, d.got, d.want))
			}
		}
	}
	if ledger != nil && (ledger.Resultado != h.Status || (h.Status == "REJEITADA" && ledger.Motivo != h.Motivo)) {
		row.Differences = append(row.Differences, "the ledger decided "+ledger.Resultado+", the held result says "+h.Status)
	}
	return row
}

// heldRows reads the held results and the ledger's record of each.
func (s *Server) heldRows(w http.ResponseWriter, r *http.Request, sess *session, one string) ([]HeldRow, []string, bool) {
	var hs []opsHeld
	f := s.fetcher(r.Context(), sess)
	var found bool
	if one == "" {
		var list opsHeldList
		f.get(s.cfg.Transfers, opsapi.PathHeld+"?limite=100", &list, &found)
		f.wait()
		hs = list.Resultados
	} else {
		var h opsHeld
		f.get(s.cfg.Transfers, opsapi.PathHeld+"/"+one, &h, &found)
		f.wait()
		if found {
			hs = []opsHeld{h}
		}
	}
	ledgers := make([]opsapi.Settlement, len(hs))
	hasLedger := make([]bool, len(hs))
	for i, h := range hs {
		if id, ok := httpapi.ParseUUID(h.TransferenciaID); ok {
			f.get(s.cfg.Ledger, "/ops/liquidacoes/"+id.String(), &ledgers[i], &hasLedger[i])
		}
	}
	down := f.wait()
	if err := f.failure(); err != nil {
		s.upstreamFailed(w, r, sess, err)
		return nil, nil, false
	}
	if f.down["transfers"] != "" {
		s.message(w, r, sess, http.StatusBadGateway, "Service unavailable", "transfers is unavailable ("+f.down["transfers"]+"): its held results cannot be read.")
		return nil, nil, false
	}
	if one != "" && !found {
		s.message(w, r, sess, http.StatusNotFound, "Not found", "No held result has the event id "+one+".")
		return nil, nil, false
	}
	rows := make([]HeldRow, len(hs))
	for i, h := range hs {
		var l *opsapi.Settlement
		if hasLedger[i] {
			l = &ledgers[i]
		}
		rows[i] = heldRow(h, l)
	}
	return rows, down, true
}

func (s *Server) held(w http.ResponseWriter, r *http.Request, sess *session) {
	rows, down, ok := s.heldRows(w, r, sess, "")
	if !ok {
		return
	}
	s.render(w, r, sess, http.StatusOK, "held", "Held results", down, rows)
}

// HeldConfirm asks to confirm applying or discarding a held result.
type HeldConfirm struct {
	Row HeldRow
	// Apply: the action applies (else discards).
	Apply bool
}

func (s *Server) confirmHeld(w http.ResponseWriter, r *http.Request, sess *session) {
	id, ok := httpapi.ParseUUID(r.URL.Query().Get("id"))
	if !ok {
		s.message(w, r, sess, http.StatusBadRequest, "Refused", "The event id must be a UUID.")
		return
	}
	rows, down, ok := s.heldRows(w, r, sess, id.String())
	if !ok {
		return
	}
	apply := r.URL.Query().Get("do") == "apply"
	if apply && !rows[0].Matches() {
		s.message(w, r, sess, http.StatusConflict, "Cannot apply",
			"This result cannot be applied: "+strings.Join(rows[0].Differences, "; ")+". It stays held; discard it once the case is settled.")
		return
	}
	s.render(w, r, sess, http.StatusOK, "heldconfirm", "Confirm", down, HeldConfirm{Row: rows[0], Apply: apply})
}

// resolveHeld applies (apply) or discards a held result: it sends the
// transfers service the held result's event id, the decision (the path)
// and the operator's reason, nothing else; the transfers service reads the
// ledger's record itself for an apply.
func (s *Server) resolveHeld(apply bool) func(w http.ResponseWriter, r *http.Request, sess *session, a *auth.AuditRecord) {
	return func(w http.ResponseWriter, r *http.Request, sess *session, a *auth.AuditRecord) {
		id, ok := httpapi.ParseUUID(r.PostFormValue("id"))
		if !ok {
			s.message(w, r, sess, http.StatusBadRequest, "Refused", "Malformed event id: nothing was changed.")
			return
		}
		a.Resource("evento_id", id)
		q := url.Values{}
		if reason := strings.TrimSpace(r.PostFormValue("reason")); reason != "" {
			q.Set("motivo", reason)
		}
		path := opsapi.PathHeld + "/" + id.String() + "/descartar"
		if apply {
			path = opsapi.PathHeld + "/" + id.String() + "/aplicar"
		}
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		// An apply answers the transfer it moved, a discard the held result.
		var applied opsapi.OperatorTransfer
		var out any
		if apply {
			out = &applied
		}
		if err := s.client.do(r.Context(), s.cfg.Transfers, sess.token, http.MethodPost, path, out); err != nil {
			var prob *problemError
			if errors.As(err, &prob) && prob.Status == http.StatusConflict {
				s.render(w, r, sess, http.StatusConflict, "message", "Refused", nil, Message{Heading: "Refused",
					Text: "transfers refused: " + prob.Detail + ". Nothing was changed.", Back: "/held"})
				return
			}
			if errors.Is(err, errNotFound) {
				s.render(w, r, sess, http.StatusNotFound, "message", "Not found", nil, Message{Heading: "Not found",
					Text: "No held result has the event id " + id.String() + ": nothing was changed.", Back: "/held"})
				return
			}
			s.upstreamFailed(w, r, sess, err)
			return
		}
		if applied.ID != "" {
			a.Resource("transfer_id", applied.ID)
		}
		text := fmt.Sprintf("Held result %s discarded: no transfer changed.", id)
		if apply {
			text = fmt.Sprintf("Held result %s applied: the transfer took the ledger's result.", id)
		}
		s.render(w, r, sess, http.StatusOK, "message", "Held result", nil, Message{Heading: "Held result", Text: text, Back: "/held"})
	}
}
