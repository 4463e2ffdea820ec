package ui

import (
	"fmt"
	"time"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
)

// A hold (CONTRACTS.md section 9) has two ledger steps where an immediate
// transfer has one: the reservation, with its expiry, and then its
// capture (in whole or in part), its cancellation or its expiry.

// isHold tells a hold by the transfer's captura, or by the ledger's
// reservation when the transfers service could not be read.
func isHold(p journeyParts) bool {
	return (p.transfer != nil && p.transfer.Captura == events.CaptureManual) ||
		(p.settlement != nil && p.settlement.Reserva != nil)
}

// expiresAt is when the hold's reservation expires: the ledger's, or the
// transfer's expiraEm before the ledger reserved it; zero for a transfer
// that is not a hold.
func expiresAt(p journeyParts) time.Time {
	if p.settlement != nil && p.settlement.Reserva != nil {
		return parseTime(p.settlement.Reserva.ExpiraEm)
	}
	if p.transfer != nil {
		return parseTime(p.transfer.ExpiraEm)
	}
	return time.Time{}
}

// reservedStep turns the ledger step into a hold's reservation: what was
// reserved, on which account, until when. The postings of its capture
// belong to the closing step.
func reservedStep(st *Step, p journeyParts, now time.Time) {
	s, cur := p.settlement, p.settlement.Moeda
	st.Title = "Ledger reservation"
	st.Postings = nil
	if r := s.Reserva; r != nil {
		st.Lines = []string{fmt.Sprintf("reserved %s on %s until %s", money(r.ValorEmCentavos, cur), s.ContaOrigem, clock(parseTime(r.ExpiraEm)))}
	} else {
		st.Lines = []string{"RESERVADA"}
	}
	outboxStep(st, "ledger", p.ledgerOut, p.ledgerBacklog, now, events.TypeReserved)
}

// holdClosedStep is the step after a hold's reservation: its capture
// (the amount captured of the amount reserved, with the postings), its
// cancellation or its expiry, or the wait for one of them with the time
// left before the expiry. ok is false when the hold never reached a
// reservation and never will (rejected by the ledger).
func holdClosedStep(p journeyParts, ledger Step, now time.Time) (st Step, ok bool) {
	st = Step{Title: "Capture, cancellation or expiry", Service: "ledger"}
	if p.down["ledger"] {
		st.State, st.Note = stateUnknown, ledger.Note
		return st, true
	}
	s := p.settlement
	switch {
	case s != nil && s.Resultado == "REJEITADA":
		return st, false
	case s == nil || s.Reserva == nil:
		st.State, st.Note = stateWaiting, "not reached yet: the ledger has not reserved the amount"
		if ledger.State == stateSkipped {
			st.State, st.Note = stateSkipped, ledger.Note
		}
		return st, true
	}
	r, cur := s.Reserva, s.Moeda
	reserved := money(r.ValorEmCentavos, cur)
	expiry := parseTime(r.ExpiraEm)
	st.State, st.At = stateDone, parseTime(r.EncerradaEm)
	switch r.Estado {
	case opsapi.ReservationCaptured:
		st.Title = "Captured"
		if r.ValorCapturadoEmCentavos == r.ValorEmCentavos {
			st.Lines = []string{"captured the whole " + reserved + " reserved"}
		} else {
			st.Lines = []string{fmt.Sprintf("captured %s of the %s reserved; the other %s released", money(r.ValorCapturadoEmCentavos, cur),
				reserved, money(r.ValorEmCentavos-r.ValorCapturadoEmCentavos, cur))}
		}
		st.Postings = postingLines(s.Lancamentos, cur)
		outboxStep(&st, "ledger", p.ledgerOut, p.ledgerBacklog, now, events.TypeSettled)
	case opsapi.ReservationCancelled:
		st.Title = "Cancelled"
		st.Lines = []string{"cancelled by the client: the " + reserved + " reserved released"}
		outboxStep(&st, "ledger", p.ledgerOut, p.ledgerBacklog, now, events.TypeCancelled)
	case opsapi.ReservationExpired:
		st.Title = "Expired"
		st.Lines = []string{fmt.Sprintf("expired at its expiraEm %s: the %s reserved released", clock(expiry), reserved)}
		outboxStep(&st, "ledger", p.ledgerOut, p.ledgerBacklog, now, events.TypeCancelled)
	default: // opsapi.ReservationOpen
		st.State, st.At = stateWaiting, time.Time{}
		if now.Before(expiry) {
			st.Note = fmt.Sprintf("reserved until %s (%s from now): waiting for a capture, a cancellation or the expiry",
				clock(expiry), humanDuration(expiry.Sub(now)))
		} else {
			st.Note = fmt.Sprintf("past its expiry (%s) for %s: the ledger's expiry sweep releases it", clock(expiry), humanDuration(now.Sub(expiry)))
		}
	}
	return st, true
}

// postingLines are a settlement's postings with each account's balance
// right after.
func postingLines(ls []opsapi.Posting, cur string) []PostingLine {
	var out []PostingLine
	for _, l := range ls {
		side := "credit"
		if l.Direcao == "D" {
			side = "debit"
		}
		out = append(out, PostingLine{Account: l.Conta, Side: side, Amount: money(l.ValorEmCentavos, cur), BalanceAfter: money(l.SaldoApos, cur)})
	}
	return out
}
