package ui

import "time"

// A settled transfer can be refunded, in whole or in parts (CONTRACTS.md
// section 10); each refund is its own resource, which the transfers
// service lists for operators (GET /ops/transferencias/{id}/estornos).
// The journey shows them below its steps, with the transfer's
// valorEstornadoEmCentavos in its summary.

// RefundLine is one refund of a transfer as the journey shows it.
type RefundLine struct {
	ID, Amount, Status, Reason string
	// RequestedAt is when it was accepted; DecidedAt when the ledger's
	// result (LIQUIDADO or REJEITADO) was projected, zero while PENDENTE.
	RequestedAt, DecidedAt time.Time
}

// refundLines are the transfer's refunds, oldest first, as the transfers
// service listed them; none when it did not answer.
func refundLines(p journeyParts) []RefundLine {
	if p.refunds == nil {
		return nil
	}
	cur := ""
	if p.transfer != nil {
		cur = p.transfer.Moeda
	}
	out := make([]RefundLine, 0, len(p.refunds.Estornos))
	for _, e := range p.refunds.Estornos {
		l := RefundLine{ID: e.ID, Amount: money(e.ValorEmCentavos, cur), Status: e.Status, Reason: e.Motivo,
			RequestedAt: parseTime(e.CriadoEm)}
		if e.Status != "PENDENTE" {
			l.DecidedAt = parseTime(e.AtualizadoEm)
		}
		out = append(out, l)
	}
	return out
}
