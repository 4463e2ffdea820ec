package history

import (
	"net/http"
	"slices"
	"time"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
)

// The anomaly kinds of refunds (CONTRACTS section 10).
const (
	// OverRefund: more refunded than was settled for a transfer: by the
	// refunds' postings in a snapshot, the EstornoLiquidado results
	// published, the refunds read LIQUIDADO, a read's
	// valorEstornadoEmCentavos; or a refund answered 202 where the
	// contract asks for 422 (it and the refunds accepted before it,
	// none rejected, exceed the transfer).
	OverRefund = "over-refund"
	// RefundTwice: a refund id posted more than once: an entry of more
	// than two posting rows, two entries of one refund in a snapshot, two
	// EstornoLiquidado results with distinct event ids.
	RefundTwice = "refund-twice"
	// RefundStatus: a refund's status is not the ledger's outcome: a
	// refund answered 202 never read LIQUIDADO or REJEITADO; a read other
	// than the result published, or than the postings show (REJEITADO
	// with postings), or with another amount or motivo; both results
	// published; a read of a refund contradicting one that completed
	// before it began; a 202 for a transfer never settled; a refusal for
	// exceeding what the refunds settled in the end leave room for; a
	// result for a refund no client asked for; a transfer read with less
	// refunded than the refunds read LIQUIDADO before it began.
	RefundStatus = "refund-status"
)

// ProblemRefundExceeds is the problem type of a refund's 422 when it
// exceeds what remains refundable.
var ProblemRefundExceeds = httpapi.ProblemTypeBase + "refund-exceeds-refundable"

// The statuses of a refund (GET /transferencias/{id}/estornos/{estornoId}).
const (
	RefundPending  = "PENDENTE"
	RefundSettled  = "LIQUIDADO"
	RefundRejected = "REJEITADO"
)

// Refund is what a refund operation is about: the transfer it refunds
// and, for a POST, the amount asked (0: all that remains refundable).
type Refund struct {
	TransferID  string `json:"transferId"`
	AmountCents int64  `json:"valorEmCentavos,omitempty"`
}

// RefundState is a refund as an answer names it: the 202's body (its
// transfer, PENDENTE) or a read's 200.
type RefundState struct {
	TransferID  string `json:"transferenciaId"`
	AmountCents int64  `json:"valorEmCentavos,omitempty"`
	Status      string `json:"status"`
	Reason      string `json:"motivo,omitempty"`
}

func isRefundPost(op Op) bool { return op.Kind == KindRefund }

// refundAccepted reports a refund POST answered 202.
func refundAccepted(op Op) bool {
	return op.Kind == KindRefund && op.Outcome == OK && op.Answer.Status == http.StatusAccepted
}

// refundMayExist reports a refund POST answered 202 or of unknown outcome.
func refundMayExist(op Op) bool {
	return refundAccepted(op) || (op.Kind == KindRefund && op.Outcome == Info)
}

// refundRead reports a read of a refund answered 200 with its body.
func refundRead(op Op) bool {
	return op.Kind == KindRefundGet && op.Outcome == OK && op.Answer.Status == http.StatusOK && op.Answer.Refund != nil
}

// refundExceeds reports a refusal for exceeding what remains: a 422
// refund-exceeds-refundable, or a read REJEITADO VALOR_EXCEDE_ESTORNAVEL.
func refundExceeds(op Op) bool {
	switch {
	case op.Kind == KindRefund && op.Outcome == OK:
		return op.Answer.Status == http.StatusUnprocessableEntity && op.Answer.Problem == ProblemRefundExceeds
	case refundRead(op):
		return op.Answer.Refund.Status == RefundRejected && op.Answer.Refund.Reason == events.ReasonExceedsRefundable
	}
	return false
}

// refundInfo is what the history shows of one refund id.
type refundInfo struct {
	transfer  string    // the transfer it refunds
	asked     []int64   // the amounts its POSTs asked (0: all that remains)
	accepted  bool      // a POST answered 202
	firstSent time.Time // its first POST that may have taken effect
	firstOK   time.Time // when its first 202 completed
	// what the ledger did: its published results (distinct event ids) and
	// the amount its postings moved in the snapshots
	settled, rejected []Record
	posted            int64
	// what reads said: the amount of a read LIQUIDADO, a read REJEITADO
	readCents  int64
	readReason string
	read       map[string]bool
}

// amount returns the refund's amount as far as the history tells it: an
// amount its POSTs asked, else a read's, the published one, the posted
// one; 0 when none is known.
func (ri *refundInfo) amount() int64 {
	for _, a := range ri.asked {
		if a > 0 {
			return a
		}
	}
	for _, r := range ri.settled {
		if r.AmountCents > 0 {
			return r.AmountCents
		}
	}
	return max(ri.readCents, ri.posted)
}

// knownRejected reports a refund the ledger rejected or a read said so.
func (ri *refundInfo) knownRejected() bool { return len(ri.rejected) > 0 || ri.read[RefundRejected] }

// refundsOf returns, per refund id, what the history shows of it: every
// refund a POST answered 202 or of unknown outcome may have created, and
// every refund the ledger published a result for or posted.
func refundsOf(h History) map[string]*refundInfo {
	out := map[string]*refundInfo{}
	get := func(id, transfer string) *refundInfo {
		ri := out[id]
		if ri == nil {
			ri = &refundInfo{transfer: transfer, read: map[string]bool{}}
			out[id] = ri
		}
		if ri.transfer == "" {
			ri.transfer = transfer
		}
		return ri
	}
	seen := map[string]bool{}
	for _, op := range h {
		switch {
		case refundMayExist(op):
			ri := get(op.Key, op.Refund.TransferID)
			if !slices.Contains(ri.asked, op.Refund.AmountCents) {
				ri.asked = append(ri.asked, op.Refund.AmountCents)
			}
			if ri.firstSent.IsZero() || op.Invoke.Before(ri.firstSent) {
				ri.firstSent = op.Invoke
			}
			if refundAccepted(op) && (!ri.accepted || op.Complete.Before(ri.firstOK)) {
				ri.accepted, ri.firstOK = true, op.Complete
			}
		case op.Kind == KindPublished && op.Record.RefundID != "" && !seen[op.Record.EventID]:
			seen[op.Record.EventID] = true
			ri := get(op.Record.RefundID, op.Record.TransferID)
			switch op.Record.EventType {
			case events.TypeRefundSettled:
				ri.settled = append(ri.settled, *op.Record)
			case events.TypeRefundRejected:
				ri.rejected = append(ri.rejected, *op.Record)
			}
		case refundRead(op):
			ri := get(op.Key, op.Refund.TransferID)
			ri.read[op.Answer.Refund.Status] = true
			switch r := op.Answer.Refund; {
			case r.Status == RefundSettled && ri.readCents == 0:
				ri.readCents = r.AmountCents
			case r.Status == RefundRejected && ri.readReason == "":
				ri.readReason = r.Reason
			}
		case op.Kind == KindSnapshot:
			for _, e := range op.Snapshot.Entries {
				if e.Type == EntryRefund {
					ri := get(e.ID, e.TransferID)
					if ri.posted == 0 && e.Postings <= 2 { // one posted twice is RefundTwice's
						ri.posted = e.DebitCents
					}
				}
			}
		}
	}
	return out
}

// settledAmounts returns, per transfer id the ledger settled (postings
// in a snapshot, a liquidada published, a read LIQUIDADA), what it
// settled, as far as the history tells: its postings, else a capture's
// published amount, else the largest amount an immediate request of the
// key asked (0 for a hold without either). A transfer never settled is
// absent: it settled 0.
func settledAmounts(h History) map[string]int64 {
	out := map[string]int64{}
	posted, wasSettled := map[string]bool{}, map[string]bool{}
	for _, op := range h {
		switch {
		case op.Kind == KindSnapshot:
			for _, e := range op.Snapshot.Entries {
				if e.Type == EntryTransfer && !posted[e.ID] {
					posted[e.ID], wasSettled[e.ID], out[e.ID] = true, true, e.DebitCents
				}
			}
		case op.Kind == KindPublished && op.Record.EventType == events.TypeSettled:
			wasSettled[op.Record.TransferID] = true
		case op.Kind == KindGet && op.Outcome == OK && op.Answer.Status == http.StatusOK && op.Answer.TransferStatus == StatusSettled:
			wasSettled[op.Key] = true
		}
	}
	for _, op := range h {
		switch {
		case op.Kind == KindPublished && op.Record.EventType == events.TypeSettled && op.Record.AmountCents > 0 && !posted[op.Record.TransferID]:
			out[op.Record.TransferID] = op.Record.AmountCents
		case (accepted202(op) || (op.Kind == KindPost && op.Outcome == Info)) && !op.Transfer.Hold() && wasSettled[op.Key] && !posted[op.Key]:
			out[op.Key] = max(out[op.Key], op.Transfer.AmountCents)
		}
	}
	for id := range wasSettled {
		out[id] += 0
	}
	return out
}
